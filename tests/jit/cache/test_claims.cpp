// Cross-process single-flight: many processes warming one database compile each key once; dead
// owners' claims are taken over, live ones waited for.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <random>
#include <regex>
#include <thread>

#include "jit/cache/cache_test_support.hpp"

using namespace kjit;
using namespace kjit::test;
namespace fs = std::filesystem;

TEST_CASE("concurrency: 8 processes x 4 threads warm one list into one database, NVRTC once per key") {
    test::TempDir dir;
    constexpr int kernels = 16;
    std::vector<std::future<WarmReport>> runs;
    for (int p = 0; p < 8; ++p)
        runs.push_back(std::async(std::launch::async, [&] { return warm_list(dir.path(), 4, kernels); }));
    int compiles = 0;
    for (auto& run : runs) {
        const WarmReport r = run.get();
        CHECK(r.exit_code == 0);
        CHECK(r.warnings == 0);  // no busy/locked error reached anyone: each stayed on the database
        CHECK(r.persistent);
        compiles += r.compiles;
    }
    CHECK(compiles == kernels);  // cross-process single-flight: exactly one NVRTC run per key
    CHECK(query(dir.path(), "SELECT count(*) FROM kernels") == std::to_string(kernels));
    CHECK(query(dir.path(), "SELECT count(DISTINCT key) FROM kernels") == std::to_string(kernels));
    CHECK(query(dir.path(), "SELECT count(*) FROM claims") == "0");
    CHECK(query(dir.path(), "PRAGMA integrity_check") == "ok");
    Cache cache(dir.path());
    CHECK(cache.verify().empty());
}

TEST_CASE("a claim left by a dead process is taken over at once") {
    test::TempDir dir;
    const Kernel k = test::scale_kernel("", 3);
    const auto o = test::options_for("sm_90");
    const pid_t dead = [] {
        const pid_t child = fork();
        if (child == 0) _exit(0);
        waitpid(child, nullptr, 0);
        return child;  // reaped: no process has this pid now
    }();
    {
        Cache cache(dir.path());
        REQUIRE(cache.claim(k.key(o), std::chrono::seconds(600)) == Cache::Claim::owned);
    }
    REQUIRE(sqlite3_exec_on(dir.path(), fmt::format("UPDATE claims SET pid = {}", dead).c_str()));
    Runtime rt(dir.path());
    const auto started = std::chrono::steady_clock::now();
    CHECK(rt.compile(k, o).origin == Origin::compiled);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
    CHECK(query(dir.path(), "SELECT count(*) FROM claims") == "0");
}

TEST_CASE("a live process's claim makes others wait for its entry instead of compiling") {
    test::TempDir dir;
    const Kernel k = test::scale_kernel("", 4);
    const auto o = test::options_for("sm_90");
    Cache owner(dir.path());
    REQUIRE(owner.claim(k.key(o), std::chrono::seconds(600)) == Cache::Claim::owned);
    CHECK(Cache(dir.path()).claim(k.key(o), std::chrono::seconds(600)) == Cache::Claim::held);  // this pid lives
    Runtime waiter(dir.path());
    auto waiting = std::async(std::launch::async, [&] { return waiter.compile(k, o).origin; });
    CHECK(waiting.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);  // it waits
    owner.store(make_cache_entry(k, o, compile(k, o)));  // the owner stores: the claim goes with it
    CHECK(waiting.get() == Origin::cache);
    CHECK(waiter.stats().compiles == 0);
}

TEST_CASE("try_compile passes over a key another live process is compiling, and compiles it once released") {
    test::TempDir dir;
    const Kernel k = test::scale_kernel("", 5);
    const auto o = test::options_for("sm_90");
    Cache owner(dir.path());
    REQUIRE(owner.claim(k.key(o), std::chrono::seconds(600)) == Cache::Claim::owned);
    Runtime rt(dir.path());
    const auto started = std::chrono::steady_clock::now();
    CHECK_FALSE(rt.try_compile(k, o).has_value());  // at once, not after the owner
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    CHECK(rt.stats().compiles == 0);
    CHECK(query(dir.path(), "SELECT count(*) FROM claims") == "1");  // the owner's claim stands
    owner.release(k.key(o));                                         // the owner gives up: the next try compiles
    const auto r = rt.try_compile(k, o);
    REQUIRE(r.has_value());
    CHECK(r->origin == Origin::compiled);
    CHECK(rt.stats().compiles == 1);
    CHECK(rt.try_compile(k, o)->origin == Origin::memory);
}
