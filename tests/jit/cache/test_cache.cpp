// The SQLite cache: round trip, cubin-only reads, WAL, the location rule.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <regex>
#include <thread>

#include "jit/cache/cache_test_support.hpp"
#include "jit/cache/schema.hpp"

using namespace kjit;
using namespace kjit::test;
namespace fs = std::filesystem;

TEST_CASE("an entry survives a round trip through the database, every field intact") {
    test::TempDir dir;
    const CacheEntry e = sample_entry();
    {
        Cache cache(dir.path());
        REQUIRE(cache.persistent());
        CHECK_FALSE(cache.find(e.key).has_value());
        cache.store(e);
    }
    Cache reopened(dir.path());
    const auto got = reopened.find(e.key);
    REQUIRE(got.has_value());
    CHECK(got->key == e.key);
    CHECK(got->readable_id == e.readable_id);
    CHECK(got->kernel_name == e.kernel_name);
    CHECK(got->arch == e.arch);
    CHECK(got->nvrtc_version == e.nvrtc_version);
    CHECK(got->options == e.options);
    CHECK(got->compiled.ptx == e.compiled.ptx);
    CHECK(got->compiled.cubin == e.compiled.cubin);
    CHECK(got->compiled.log == e.compiled.log);
    CHECK(got->compiled.resources == e.compiled.resources);
    CHECK(got->compiled.compile_ms == e.compiled.compile_ms);
    CHECK(got->created_at > 1'700'000'000);
    CHECK(got->hit_count == 0);
    CHECK(reopened.find(e.key)->hit_count == 1);  // each read is counted
    CHECK_FALSE(reopened.find(sample_entry(2).key).has_value());
}

TEST_CASE("a cubin-only read (what loading needs) returns the cubin and metadata, checks only those") {
    test::TempDir dir;
    const CacheEntry e = sample_entry();
    { Cache(dir.path()).store(e); }
    Cache cache(dir.path());
    const auto got = cache.find(e.key, Cache::Blobs::cubin);
    REQUIRE(got.has_value());
    CHECK(got->compiled.cubin == e.compiled.cubin);
    CHECK(got->compiled.resources == e.compiled.resources);
    CHECK(got->readable_id == e.readable_id);
    CHECK(got->arch == e.arch);
    CHECK(got->compiled.ptx.empty());
    CHECK(got->compiled.log.empty());
    CHECK(cache.find(e.key)->compiled.ptx == e.compiled.ptx);  // a full read still has everything

    // A damaged PTX does not stop a cubin-only read; a damaged cubin does.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / Cache::file_name).c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "UPDATE kernels SET ptx = 'damaged'", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    test::LogCapture log;
    Cache reopened(dir.path());
    CHECK(reopened.find(e.key, Cache::Blobs::cubin).has_value());
    CHECK_FALSE(reopened.find(e.key).has_value());
    REQUIRE(log.warnings().size() == 1);
    CHECK(log.warnings()[0].find("failed its ptx checksum") != std::string::npos);
    REQUIRE(sqlite3_open((dir.path() / Cache::file_name).c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "UPDATE kernels SET cubin = x'00'", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_FALSE(Cache(dir.path()).find(e.key, Cache::Blobs::cubin).has_value());
}

TEST_CASE("close() folds the WAL into the database file, so the file alone is complete") {
    test::TempDir dir;
    Cache cache(dir.path());
    cache.store(sample_entry());
    CHECK(fs::exists(dir.path() / (std::string(Cache::file_name) + "-wal")));
    cache.close();
    CHECK_FALSE(cache.persistent());
    CHECK_FALSE(fs::exists(dir.path() / (std::string(Cache::file_name) + "-wal")));
    test::TempDir shipped;  // the single file, copied elsewhere, holds the entry
    fs::copy_file(dir.path() / Cache::file_name, shipped.path() / Cache::file_name);
    CHECK(Cache(shipped.path()).find(sample_entry().key).has_value());
}

TEST_CASE("the database is in WAL mode with the schema version recorded") {
    test::TempDir dir;
    { Cache cache(dir.path()); }
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path() / Cache::file_name).c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(s) == SQLITE_ROW);
    CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 0))) == "wal");
    sqlite3_finalize(s);
    REQUIRE(sqlite3_prepare_v2(db, "SELECT version FROM kjit_schema", -1, &s, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(s) == SQLITE_ROW);
    CHECK(sqlite3_column_int(s, 0) == cache_schema_version);
    sqlite3_finalize(s);
    sqlite3_close(db);
}

namespace {

/// The kernels table's CREATE statement as the database holds it.
std::string kernels_table_sql(const fs::path& file) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE name = 'kernels'", -1, &s, nullptr) ==
            SQLITE_OK);
    REQUIRE(sqlite3_step(s) == SQLITE_ROW);
    std::string sql = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return sql;
}

/// The kernels table of the cache file `file` made WITHOUT ROWID, as kjits before 2026-12-05 made it.
void make_old_kernels_table(const fs::path& file) {
    std::string columns;
    for (const auto& c : detail::schema::kernel_columns)
        columns += fmt::format("{}{} {}", columns.empty() ? "" : ", ", c.name, c.type);
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
    const std::string sql = fmt::format(
        "BEGIN; CREATE TABLE old ({}) WITHOUT ROWID; INSERT INTO old SELECT * FROM kernels; DROP TABLE kernels; "
        "ALTER TABLE old RENAME TO kernels; CREATE INDEX kernels_by_name ON kernels (kernel_name, arch); COMMIT;",
        columns);
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    REQUIRE(kernels_table_sql(file).find("WITHOUT ROWID") != std::string::npos);
}

}  // namespace

TEST_CASE("a kernels table made WITHOUT ROWID by an older kjit is rebuilt with rowids, every entry kept") {
    test::TempDir dir;
    const fs::path file = dir.path() / Cache::file_name;
    const CacheEntry e = sample_entry();
    { Cache(dir.path()).store(e); }
    CHECK(kernels_table_sql(file).find("WITHOUT ROWID") == std::string::npos);
    make_old_kernels_table(file);
    Cache reopened(dir.path());
    CHECK(kernels_table_sql(file).find("WITHOUT ROWID") == std::string::npos);
    const auto got = reopened.find(e.key);
    REQUIRE(got.has_value());
    CHECK(got->compiled.cubin == e.compiled.cubin);
    CHECK(got->compiled.ptx == e.compiled.ptx);
    const CacheEntry other = sample_entry(2);  // and the rebuilt table takes new rows and replaces old ones
    reopened.store(other);
    reopened.store(e);
    const CacheKey keys[] = {e.key, other.key};
    CHECK(reopened.count_stored(keys) == 2);
    CHECK(reopened.find(other.key).has_value());
}

TEST_CASE("an old kernels table another process rebuilds while this one waits for the lock is not rebuilt again") {
    test::TempDir dir;
    const fs::path file = dir.path() / Cache::file_name;
    const CacheEntry e = sample_entry();
    { Cache(dir.path()).store(e); }
    make_old_kernels_table(file);
    // The other process: the write lock taken, the table rebuilt, not yet committed.
    sqlite3* other = nullptr;
    REQUIRE(sqlite3_open(file.c_str(), &other) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, detail::schema::rowid_kernels_sql().c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    std::atomic<int> rebuilt{0};
    set_log_level(LogLevel::info);
    set_log_sink([&](LogLevel, std::string_view m) { rebuilt += m.find("rebuilt with rowids") != m.npos; });
    // This process opens the cache meanwhile: it sees the old table and waits for the lock.
    std::string failed;
    std::thread opening([&] {
        try {
            Cache reopened(dir.path());
        } catch (const std::exception& x) {
            failed = x.what();
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
    opening.join();
    sqlite3_close(other);
    set_log_sink({});
    set_log_level(LogLevel::warning);
    CHECK(failed.empty());
    CHECK(rebuilt == 0);
    CHECK(kernels_table_sql(file).find("WITHOUT ROWID") == std::string::npos);
    const auto got = Cache(dir.path()).find(e.key);
    REQUIRE(got.has_value());
    CHECK(got->compiled.cubin == e.compiled.cubin);
}

TEST_CASE("default location: KJIT_CACHE_DIR, then the repository's cache/, then XDG, then ~/.cache") {
    EnvScope scope({"KJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"});
    ::setenv("KJIT_CACHE_DIR", "/some/where", 1);
    CHECK(Cache::default_directory() == fs::path("/some/where"));
    ::setenv("KJIT_CACHE_DIR", "", 1);  // set but empty: an error, not the default
    CHECK_THROWS_WITH_AS((void)Cache::default_directory(), doctest::Contains("KJIT_CACHE_DIR is set but empty"),
                         UsageError);
    ::unsetenv("KJIT_CACHE_DIR");

    fs::current_path(fs::path(KJIT_SOURCE_DIR) / "kernels_src" / "kjit");  // anywhere inside the checkout
    CHECK(fs::equivalent(Cache::default_directory(), fs::path(KJIT_SOURCE_DIR) / "cache"));

    test::TempDir outside;
    fs::current_path(outside.path());
    ::setenv("XDG_CACHE_HOME", "/xdg", 1);
    CHECK(Cache::default_directory() == fs::path("/xdg/kjit"));
    ::unsetenv("XDG_CACHE_HOME");
    ::setenv("HOME", "/home/user", 1);
    CHECK(Cache::default_directory() == fs::path("/home/user/.cache/kjit"));
}
