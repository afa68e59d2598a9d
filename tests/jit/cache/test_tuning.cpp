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

namespace {
/// A winner for layer "b1" of conv2d_bn_silu on `device` under driver 580 and kernel source `hash`.
TunedConfig winner(const std::string& device, const std::string& hash, const std::string& config, double us,
                   const std::string& arch = "sm_90") {
    return {"conv2d_bn_silu", "b1", device, arch, "580.159.04", hash, config, us};
}
std::vector<std::string> configs_of(const std::vector<TunedConfig>& winners) {
    std::vector<std::string> out;
    for (const auto& w : winners) out.push_back(w.config);
    return out;
}
}  // namespace

TEST_CASE("tuned winners: keyed by problem, device, arch, driver and kernel source, replaced, listed, cleared") {
    test::TempDir dir;
    Cache cache(dir.path());
    const auto find = [&](const std::string& device, const std::string& driver = "580.159.04") {
        return configs_of(find_tuned(cache, "conv2d_bn_silu", "b1", device, "sm_90", driver));
    };
    CHECK(find("H200").empty());
    store_tuned(cache, winner("H200", "aaaa", "BLOCK_M=64 BLOCK_N=16", 15.4));
    store_tuned(cache, winner("H100", "aaaa", "BLOCK_M=32 BLOCK_N=16", 17.0));
    const auto found = find_tuned(cache, "conv2d_bn_silu", "b1", "H200", "sm_90", "580.159.04");
    REQUIRE(found.size() == 1);
    CHECK(found[0].config == "BLOCK_M=64 BLOCK_N=16");
    CHECK(found[0].microseconds == 15.4);
    CHECK(found[0].source_hash == "aaaa");
    CHECK(found[0].created_at > 1700000000);   // stamped when stored
    CHECK(find("H200", "570.86.15").empty());  // timed under another driver: not this one's
    // The same key again replaces; another kernel source is a winner of its own, listed newest first.
    store_tuned(cache, winner("H200", "aaaa", "BLOCK_M=128 BLOCK_N=16", 14.0));
    CHECK(find("H200") == std::vector<std::string>{"BLOCK_M=128 BLOCK_N=16"});
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // created_at has whole seconds
    store_tuned(cache, winner("H200", "bbbb", "BLOCK_M=32 BLOCK_N=32", 13.0));
    CHECK(find("H200") == std::vector<std::string>{"BLOCK_M=32 BLOCK_N=32", "BLOCK_M=128 BLOCK_N=16"});
    CHECK(tuned_configs(cache).size() == 3);
    // Clearing the entries keeps the winners; clear_tuned removes them.
    cache.store(sample_entry());
    CHECK(cache.clear() == 1);
    CHECK(tuned_configs(cache).size() == 3);
    CHECK(clear_tuned(cache) == 3);
    CHECK(tuned_configs(cache).empty());
}

TEST_CASE("tuned winners travel: exported with the entries (an arch's with that arch's), imported, local ones kept") {
    test::TempDir dir;
    Cache cache(dir.path());
    store_tuned(cache, winner("H200", "aaaa", "shipped", 15.4));
    store_tuned(cache, winner("A100", "aaaa", "for sm_80", 20.0, "sm_80"));
    cache.store(sample_entry());
    const ExportReport all = cache.export_to(dir.path() / "shipped.sqlite3");
    CHECK(all.exported == 1);
    CHECK(all.winners == 2);
    CHECK(cache.export_to(dir.path() / "sm90.sqlite3", "sm_90").winners == 1);
    CHECK(cache.export_to(dir.path() / "sm90a.sqlite3", "sm_90a").winners == 1);  // sm_90 devices' kernels
    CHECK_THROWS_WITH_AS((void)cache.export_to(dir.path() / "shipped.sqlite3"), doctest::Contains("exists"),
                         UsageError);
    test::TempDir deployed;
    Cache target(deployed.path());
    store_tuned(target, winner("H200", "aaaa", "mine", 1.0));
    const ImportReport r = target.import_from(dir.path() / "shipped.sqlite3");
    CHECK(r.imported == 1);
    CHECK(r.kept == 0);
    CHECK(r.rejected == 0);
    CHECK(r.winners == 1);
    CHECK(configs_of(find_tuned(target, "conv2d_bn_silu", "b1", "H200", "sm_90", "580.159.04")) ==
          std::vector<std::string>{"mine"});  // the local winner kept
    CHECK(configs_of(find_tuned(target, "conv2d_bn_silu", "b1", "A100", "sm_80", "580.159.04")) ==
          std::vector<std::string>{"for sm_80"});
    CHECK(target.verify().empty());
}
