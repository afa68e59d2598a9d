// Databases the cache cannot use, damaged files, crashes and a full disk (docs/RELIABILITY.md).
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

TEST_CASE("a directory that cannot be created: works from memory, warns once") {
    test::TempDir dir;
    std::ofstream(dir.path() / "a-file") << "not a directory";
    test::LogCapture log;
    Cache cache(dir.path() / "a-file" / "cache");
    CHECK_FALSE(cache.persistent());
    const CacheEntry e = sample_entry();
    cache.store(e);
    cache.store(sample_entry(2));
    REQUIRE(cache.find(e.key).has_value());
    CHECK(cache.find(e.key)->compiled.cubin == e.compiled.cubin);
    REQUIRE(log.warnings().size() == 1);
    CHECK(log.warnings()[0].find("Working from memory") != std::string::npos);
}

namespace {

/// The files beside the database whose name starts with `kjit.sqlite3.damaged-`.
std::vector<fs::path> set_aside_files(const fs::path& dir) {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().starts_with(std::string(Cache::file_name) + ".damaged-") &&
            e.path().extension() != ".sqlite3-wal")
            found.push_back(e.path());
    return found;
}

/// A damaged file at the cache path is kept (moved aside, bytes unchanged), a fresh database
/// takes its place, and one warning names both paths.
void check_set_aside(const fs::path& dir, const std::string& original) {
    test::LogCapture log;
    {
        Cache cache(dir);
        CHECK(cache.persistent());
        cache.store(sample_entry());
        CHECK(cache.find(sample_entry().key).has_value());
    }
    CHECK(Cache(dir).find(sample_entry().key).has_value());  // the fresh database kept it
    const auto aside = set_aside_files(dir);
    REQUIRE(aside.size() == 1);
    CHECK(file_bytes(aside[0]) == original);
    REQUIRE(log.warnings().size() == 1);
    CHECK(log.warnings()[0].find((dir / Cache::file_name).string()) != std::string::npos);
    CHECK(log.warnings()[0].find(aside[0].string()) != std::string::npos);
    CHECK(log.warnings()[0].find("started a fresh one") != std::string::npos);
}

}  // namespace

TEST_CASE("a file that is not a database is moved aside, not deleted, and a fresh database created") {
    test::TempDir dir;
    const std::string garbage(4096, 'x');
    std::ofstream(dir.path() / Cache::file_name, std::ios::binary) << garbage;
    check_set_aside(dir.path(), garbage);
}

TEST_CASE("a truncated database is moved aside, not deleted, and a fresh database created") {
    test::TempDir dir;
    {
        Cache cache(dir.path());
        for (std::uint64_t salt = 10; salt < 40; ++salt) {
            CacheEntry e = sample_entry(salt);
            e.compiled.ptx.assign(20'000, static_cast<char>('a' + salt % 26));  // spill onto many pages
            cache.store(e);
        }
        cache.close();
    }
    const fs::path path = dir.path() / Cache::file_name;
    const std::string whole = file_bytes(path);
    REQUIRE(whole.size() > 200'000);
    const std::string half = whole.substr(0, whole.size() / 2);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << half;
    check_set_aside(dir.path(), half);
}

TEST_CASE("a database from a newer schema is left untouched") {
    test::TempDir dir;
    const fs::path path = dir.path() / Cache::file_name;
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE TABLE kjit_schema (version INTEGER); INSERT INTO kjit_schema VALUES (99);",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    const std::string before = file_bytes(path);

    test::LogCapture log;
    {
        Cache cache(dir.path());
        CHECK_FALSE(cache.persistent());
        cache.store(sample_entry());
        CHECK(cache.find(sample_entry().key).has_value());
    }
    REQUIRE(log.warnings().size() == 1);
    CHECK(log.warnings()[0].find("newer kjit (schema 99") != std::string::npos);
    CHECK(file_bytes(path) == before);
}

TEST_CASE("crashes: 50 warms killed at random moments, the database stays sound and loses nothing else") {
    test::TempDir dir;
    constexpr int kernels = 10;
    // Kill moments are drawn within the time a warm of two thirds of the list takes here.
    const auto started = std::chrono::steady_clock::now();
    REQUIRE(warm_list(dir.path(), 4, kernels).compiles == kernels);
    const auto full_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                               started);
    std::mt19937 rng(20261130);
    std::uniform_int_distribution<int> delay_ms(0, static_cast<int>(full_ms.count() * 2 / 3));
    REQUIRE(sqlite3_exec_on(dir.path(), "DELETE FROM kernels WHERE abs(random()) % 3 != 0"));
    int kills_with_work_lost = 0;
    for (int round = 0; round < 50; ++round) {
        CAPTURE(round);
        const pid_t pid = spawn_warm_list(dir.path(), 4, kernels);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) ++kills_with_work_lost;

        std::size_t present = 0;
        {
            Cache cache(dir.path());
            REQUIRE(cache.persistent());         // it opens,
            const auto faults = cache.verify();  // integrity_check ok, every checksum valid
            CHECK(faults.empty());
            for (const auto& f : faults) MESSAGE(f);
            present = cache.entries().size();
        }
        CHECK(query(dir.path(), "PRAGMA integrity_check") == "ok");
        const WarmReport next = warm_list(dir.path(), 4, kernels);  // recompiles exactly what was lost
        CHECK(next.exit_code == 0);
        CHECK(next.warnings == 0);
        CHECK(next.compiles == kernels - static_cast<int>(present));

        // Drop a random part of the list again, so the next kill has compiles to interrupt.
        REQUIRE(sqlite3_exec_on(dir.path(), "DELETE FROM kernels WHERE abs(random()) % 3 != 0"));
    }
    MESSAGE(kills_with_work_lost << " of 50 kills landed while the warm ran");
    CHECK(kills_with_work_lost >= 25);  // most kills landed mid-warm, not after it ended
}

TEST_CASE("a full disk (file size limit): kjit keeps working from memory and warns once") {
    test::TempDir dir;
    const WarmReport r = warm_list(dir.path(), 2, 8, 64 * 1024);  // a 64 KB file limit
    CHECK(r.exit_code == 0);                                      // every kernel compiled and was handed out
    CHECK(r.compiles == 8);
    CHECK(r.warnings == 1);
    CHECK_FALSE(r.persistent);
}
