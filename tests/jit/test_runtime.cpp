// The runtime: cache tiers, checksum recovery, single-flight, two processes on one database.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <barrier>
#include <cstdlib>
#include <future>
#include <thread>

#include "support.hpp"

using namespace kjit;

TEST_CASE("compile results come from NVRTC, then memory, then SQLite in a new runtime") {
    test::TempDir dir;
    const Kernel k = test::axpby();
    const CompileOptions o = test::options_for("sm_90");
    std::shared_ptr<const CacheEntry> first;
    {
        Runtime rt(dir.path());
        const auto a = rt.compile(k, o);
        CHECK(a.origin == Origin::compiled);
        CHECK(a.entry->readable_id == k.id());
        CHECK(a.entry->key == k.key(o));
        CHECK(a.entry->arch == "sm_90");
        const auto b = rt.compile(test::axpby(), o);  // another object, same kernel
        CHECK(b.origin == Origin::memory);
        CHECK(b.entry == a.entry);
        CHECK(rt.stats().compiles == 1);
        first = a.entry;
    }
    Runtime again(dir.path());
    const auto c = again.compile(k, o);
    CHECK(c.origin == Origin::cache);
    CHECK(c.entry->compiled.cubin == first->compiled.cubin);
    CHECK(c.entry->compiled.ptx == first->compiled.ptx);
    CHECK(c.entry->compiled.resources == first->compiled.resources);
    CHECK(again.stats().compiles == 0);
    CHECK(again.stats().cache_hits == 1);
}

TEST_CASE("a corrupted blob is a miss: recompiled, replaced, one warning") {
    test::TempDir dir;
    const Kernel k = test::axpby();
    const CompileOptions o = test::options_for("sm_90");
    { (void)Runtime(dir.path()).compile(k, o); }

    // Flip one byte inside the stored cubin, leaving its checksum as it was.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / Cache::file_name).c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* read = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT key, cubin FROM kernels", -1, &read, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(read) == SQLITE_ROW);
    const std::string key(reinterpret_cast<const char*>(sqlite3_column_text(read, 0)));
    std::string cubin(static_cast<const char*>(sqlite3_column_blob(read, 1)), sqlite3_column_bytes(read, 1));
    sqlite3_finalize(read);
    cubin[cubin.size() / 2] ^= 0x01;
    sqlite3_stmt* write = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "UPDATE kernels SET cubin = ? WHERE key = ?", -1, &write, nullptr) == SQLITE_OK);
    sqlite3_bind_blob(write, 1, cubin.data(), static_cast<int>(cubin.size()), SQLITE_STATIC);
    sqlite3_bind_text(write, 2, key.c_str(), -1, SQLITE_STATIC);
    REQUIRE(sqlite3_step(write) == SQLITE_DONE);
    sqlite3_finalize(write);
    CHECK(sqlite3_changes(db) == 1);
    sqlite3_close(db);

    test::LogCapture log;
    Runtime rt(dir.path());
    const auto r = rt.compile(k, o);
    CHECK(r.origin == Origin::compiled);
    CHECK(rt.stats().compiles == 1);
    REQUIRE(log.warnings().size() == 1);
    CHECK(log.warnings()[0].find("failed its cubin checksum") != std::string::npos);

    Runtime after(dir.path());  // the bad row was replaced by the recompiled one
    CHECK(after.compile(k, o).origin == Origin::cache);
    CHECK(log.warnings().size() == 1);
}

TEST_CASE("single-flight: 8 threads asking for one missing kernel cause exactly one compile") {
    test::TempDir dir;
    Runtime rt(dir.path());
    const CompileOptions o = test::options_for("sm_90");
    std::barrier start(8);
    std::vector<std::future<CompileResult>> results;
    for (int i = 0; i < 8; ++i)
        results.push_back(std::async(std::launch::async, [&] {
            const Kernel k = test::axpby();  // each thread its own object
            start.arrive_and_wait();
            return rt.compile(k, o);
        }));
    int compiled = 0;
    std::shared_ptr<const CacheEntry> entry;
    for (auto& f : results) {
        const auto r = f.get();
        compiled += r.origin == Origin::compiled;
        if (!entry) entry = r.entry;
        CHECK(r.entry == entry);
    }
    CHECK(compiled == 1);
    CHECK(rt.stats().compiles == 1);
    CHECK(rt.stats().memory_hits == 7);
}

TEST_CASE("compile_all: each distinct kernel once, in parallel, at its target, the first failure rethrown") {
    test::TempDir dir;
    Runtime rt(dir.path());
    const Kernel a = test::axpby(), same = test::axpby();
    const Kernel* twice[] = {&a, &same, &a};
    rt.compile_all(twice, Arch(9, 0));
    CHECK(rt.stats().compiles == 1);
    CHECK(rt.compile(a, test::options_for("sm_90")).origin == Origin::memory);
    const Kernel broken(KernelSpec{"broken", {}, {{"x", {Scalar::f32, true}}}},
                        "__device__ void broken(float* x) { nope; }");
    const Kernel* mixed[] = {&broken, &a};
    CHECK_THROWS_AS(rt.compile_all(mixed, Arch(9, 0)), CompileError);
    CHECK(rt.stats().memory_hits == 2);  // the good kernel was still served
}

TEST_CASE("a failed compile is not memoised: every caller sees the error") {
    test::TempDir dir;
    Runtime rt(dir.path());
    const Kernel broken(KernelSpec{"broken", {}, {{"x", {Scalar::f32, true}}}},
                        "__device__ void broken(float* x) { nope; }");
    CHECK_THROWS_AS((void)rt.compile(broken, test::options_for("sm_90")), CompileError);
    CHECK_THROWS_AS((void)rt.compile(broken, test::options_for("sm_90")), CompileError);
    CHECK(rt.stats().compiles == 0);
}

TEST_CASE("two processes write one database at once") {
    test::TempDir dir;
    const std::string cmd = KJIT_TEST_HELPER " warm " + dir.path().string();
    auto a = std::async(std::launch::async, [&] { return std::system((cmd + " 1 2 4 >/dev/null").c_str()); });
    auto b = std::async(std::launch::async, [&] { return std::system((cmd + " 4 2 1 >/dev/null").c_str()); });
    CHECK(a.get() == 0);
    CHECK(b.get() == 0);
    Runtime rt(dir.path());
    for (std::int64_t items : {1, 2, 4})
        CHECK(rt.compile(test::axpby(Scalar::f32, items), test::options_for("sm_90")).origin == Origin::cache);
    CHECK(rt.stats().compiles == 0);
}

TEST_CASE("without a driver, launching fails with a clear message and compiling still works") {
    if (device_count() > 0) {
        MESSAGE("a CUDA device is present: the no-driver path is not reachable here");
        return;
    }
    const std::string reason = device_unavailable_reason();
    CHECK(reason.find("no CUDA") != std::string::npos);
    CHECK_THROWS_WITH_AS((void)Device::get(0), doctest::Contains("no CUDA"), NoDeviceError);
    test::TempDir dir;
    Runtime rt(dir.path());
    CHECK(rt.compile(test::axpby(), test::options_for("sm_90")).origin == Origin::compiled);
}
