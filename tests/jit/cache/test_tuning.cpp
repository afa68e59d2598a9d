// Tuned winners: stored, found, replaced, exported and imported.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <random>
#include <regex>
#include <thread>

#include <kjit/tuning.hpp>

#include "jit/cache/cache_test_support.hpp"

using namespace kjit;
using namespace kjit::test;
namespace fs = std::filesystem;

TEST_CASE("tuned winners: stored, found by (kernel, shape, device, arch), replaced, exported and imported") {
    test::TempDir dir;
    Cache cache(dir.path());
    CHECK_FALSE(find_tuned(cache, "conv2d_bn_silu", "b1", "H200", "sm_90").has_value());
    store_tuned(cache, {"conv2d_bn_silu", "b1", "H200", "sm_90", "BLOCK_M=64 BLOCK_N=16", 15.4});
    store_tuned(cache, {"conv2d_bn_silu", "b1", "H100", "sm_90", "BLOCK_M=32 BLOCK_N=16", 17.0});
    auto found = find_tuned(cache, "conv2d_bn_silu", "b1", "H200", "sm_90");
    REQUIRE(found.has_value());
    CHECK(found->config == "BLOCK_M=64 BLOCK_N=16");
    CHECK(found->microseconds == 15.4);
    store_tuned(cache, {"conv2d_bn_silu", "b1", "H200", "sm_90", "BLOCK_M=128 BLOCK_N=16", 14.0});
    CHECK(find_tuned(cache, "conv2d_bn_silu", "b1", "H200", "sm_90")->config == "BLOCK_M=128 BLOCK_N=16");
    CHECK(tuned_configs(cache).size() == 2);

    cache.store(sample_entry());
    CHECK(cache.export_to(dir.path() / "shipped.sqlite3").exported == 1);
    CHECK_THROWS_WITH_AS((void)cache.export_to(dir.path() / "shipped.sqlite3"), doctest::Contains("exists"),
                         UsageError);
    test::TempDir deployed;
    Cache target(deployed.path());
    store_tuned(target, {"conv2d_bn_silu", "b1", "H200", "sm_90", "mine", 1.0});
    const ImportReport r = target.import_from(dir.path() / "shipped.sqlite3");
    CHECK(r.imported == 1);
    CHECK(r.kept == 0);
    CHECK(r.rejected == 0);
    CHECK(find_tuned(target, "conv2d_bn_silu", "b1", "H200", "sm_90")->config == "mine");  // local winner kept
    CHECK(find_tuned(target, "conv2d_bn_silu", "b1", "H100", "sm_90").has_value());        // new one imported
    CHECK(target.verify().empty());
}
