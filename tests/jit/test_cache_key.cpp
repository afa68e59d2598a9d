// Cache keys: stable across processes and paths, sensitive to everything that changes the binary.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <fstream>

#include "jit/cache_key.hpp"
#include "jit/kernel_state.hpp"
#include "support.hpp"

using namespace kjit;

namespace {
std::string run(const std::string& command) {
    std::array<char, 256> buffer{};
    std::string out;
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    while (std::fgets(buffer.data(), buffer.size(), pipe)) out += buffer.data();
    CHECK(::pclose(pipe) == 0);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}
}  // namespace

TEST_CASE("the same kernel gives the same key in this process and in two others") {
    const std::string here = test::axpby().key(test::options_for("sm_90")).hex();
    CHECK(here.size() == 32);
    CHECK(test::axpby().key(test::options_for("sm_90")).hex() == here);
    CHECK(run(KJIT_TEST_HELPER " key") == here);
    // Another working directory, and the sources read from another absolute path: same key.
    test::TempDir copy;
    std::filesystem::copy(KJIT_SOURCE_DIR "/kernels_src", copy.path(), std::filesystem::copy_options::recursive);
    CHECK(run("cd / && KJIT_KERNELS_DIR=" + copy.path().string() + " " KJIT_TEST_HELPER " key") == here);
}

TEST_CASE("the key changes with the body, a header, a constant, an option, the arch, NVRTC and nothing else") {
    const CompileOptions sm90 = test::options_for("sm_90");
    const CacheKey base = test::scale_kernel().key(sm90);

    CHECK(test::scale_kernel("// a comment is an edit\n").key(sm90) != base);  // body
    CHECK(test::scale_kernel("", 3).key(sm90) != base);                        // constant
    CHECK(test::scale_kernel().key(test::options_for("sm_80")) != base);       // arch
    CHECK(test::scale_kernel().key(test::options_for("sm_90a")) != base);      // arch-specific target

    CompileOptions o = sm90;
    o.line_info = true;
    CHECK(test::scale_kernel().key(o) != base);
    o = sm90;
    o.defines.push_back({"FAST", "1"});
    CHECK(test::scale_kernel().key(o) != base);
    o = sm90;
    o.standard = CxxStandard::cxx20;
    CHECK(test::scale_kernel().key(o) != base);

    // NVRTC version and build.
    const Kernel k = test::scale_kernel();
    const auto canonical = sm90.canonical();
    const CacheKey with_ours = detail::cache_key(k.state().source_digest, canonical, nvrtc_version());
    CHECK(with_ours == base);
    CHECK(detail::cache_key(k.state().source_digest, canonical, "13.0 build 0000") != base);
    CHECK(detail::cache_key(k.state().source_digest, canonical, "13.1 build " + nvrtc_version().substr(11)) != base);

    // A header's content, through KJIT_KERNELS_DIR.
    const CacheKey shipped = test::axpby().key(sm90);
    test::TempDir copy;
    std::filesystem::copy(KJIT_SOURCE_DIR "/kernels_src", copy.path(), std::filesystem::copy_options::recursive);
    ::setenv("KJIT_KERNELS_DIR", copy.path().c_str(), 1);
    CHECK(test::axpby().key(sm90) == shipped);
    std::ofstream(copy.path() / "kjit" / "grid.cuh", std::ios::app) << "// header edit\n";
    CHECK(test::axpby().key(sm90) != shipped);
    ::unsetenv("KJIT_KERNELS_DIR");
}

TEST_CASE("option lists are canonical: fixed order, arch spelled one way") {
    CompileOptions o = test::options_for("90");
    CHECK(o.arch.name() == "sm_90");
    CHECK(o.canonical() ==
          std::vector<std::string>{"--std=c++17", "-default-device", "--gpu-architecture=sm_90", "--ptxas-options=-v"});
    o.line_info = true;
    o.defines = {{"A", "1"}, {"B", ""}};
    CHECK(o.canonical().back() == "-DB");
    CHECK(o.canonical()[4] == "-lineinfo");
    CHECK(test::options_for("compute_87").arch.name() == "sm_87");
    CHECK(test::options_for("9.0").arch == test::options_for("sm_90").arch);
}

TEST_CASE("unsupported arch strings are rejected with the supported list") {
    // Suffixed targets exist for some archs only (NVRTC is asked): sm_80a, sm_75a, sm_90f do not.
    for (const char* bad : {"sm_91", "sm_", "gfx90a", "sm_9x", "", "sm_1000", "sm_80a", "sm_75a", "sm_90f"}) {
        CAPTURE(bad);
        try {
            (void)Arch::parse(bad);
            FAIL("expected UsageError");
        } catch (const UsageError& e) {
            CHECK(std::string(e.what()).find("unsupported arch") != std::string::npos);
            CHECK(std::string(e.what()).find("sm_90, sm_90a,") != std::string::npos);  // the accepted names
        }
    }
    CHECK(Arch::parse("sm_90a").name() == "sm_90a");
}
