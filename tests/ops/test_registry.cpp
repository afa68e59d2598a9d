// The registry of shipped kernels.
#include <doctest/doctest.h>

#include <kjit/error.hpp>
#include <kjit/registry.hpp>

using namespace kjit;

TEST_CASE("the registry lists valid configurations of every shipped kernel") {
    int count = 0;
    for (const auto& family : shipped_kernels())
        for (const auto& k : family.configurations()) {
            CHECK(k.name() == family.name);
            ++count;
        }
    CHECK(count >= 4);
}

namespace {
std::string error_of(std::string_view name, std::vector<std::pair<std::string, std::string>> constants) {
    try {
        (void)find_shipped_kernel(name, constants);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}
}  // namespace

TEST_CASE(
    "a shipped kernel by its constants: values as numbers and flags, every missing one named, the nearest "
    "valid configurations shown") {
    const std::vector<std::pair<std::string, std::string>> depthwise{
        {"KH", "7"},        {"KW", "7"},       {"STRIDE", "1"},  {"PAD", "3"},
        {"BLOCK_H", "32"},  {"BLOCK_W", "64"}, {"PLANES", "1"},  {"THREADS", "128"},
        {"STEP_ROWS", "4"}, {"GROUP_IN", "1"}, {"OC_STEP", "1"}, {"STAGED", "true"}};
    const std::string id = find_shipped_kernel("conv2d_bn_silu_depthwise_forward", depthwise).id();
    // A flag as 1, a number with a leading zero: the same configuration.
    auto alike = depthwise;
    alike.back() = {"STAGED", "1"};
    alike[5] = {"BLOCK_W", "064"};
    CHECK(find_shipped_kernel("conv2d_bn_silu_depthwise_forward", alike).id() == id);
    alike.back() = {"STAGED", "yes"};
    const std::string invalid = error_of("conv2d_bn_silu_depthwise_forward", alike);
    CHECK(invalid.find("not a valid configuration of conv2d_bn_silu_depthwise_forward; the 12 nearest of its") !=
          std::string::npos);
    // The nearest first: all but STAGED alike.
    CHECK(invalid.find("valid ones:\n  KH=7 KW=7 STRIDE=1 PAD=3 BLOCK_H=32 BLOCK_W=64 PLANES=1 THREADS=128 STEP_ROWS=4 "
                       "GROUP_IN=1 OC_STEP=1 STAGED=true\n") != std::string::npos);
    // Every missing constant in one error, with a configuration to start from.
    const std::string missing = error_of("conv2d_bn_silu_depthwise_forward", {{"KH", "3"}});
    CHECK(missing.find("constants KW, STRIDE, PAD, BLOCK_H, BLOCK_W, PLANES, THREADS, STEP_ROWS, GROUP_IN, OC_STEP, "
                       "STAGED of kernel conv2d_bn_silu_depthwise_forward are missing: give each with -D NAME=VALUE, "
                       "e.g. -D KH=") != std::string::npos);
}
