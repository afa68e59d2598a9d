// The SQLite cache: round trip, location rule, and databases it cannot use.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "support.hpp"

using namespace kjit;
namespace fs = std::filesystem;

namespace {

CacheEntry sample_entry(std::uint64_t salt = 1) {
    CacheEntry e;
    e.key = {0x0123456789abcdefULL, salt};
    e.readable_id = "axpby__f32__f32__256__4";
    e.kernel_name = "axpby";
    e.arch = "sm_90";
    e.nvrtc_version = nvrtc_version();
    e.options = "--std=c++17 -default-device --gpu-architecture=sm_90";
    e.compiled.ptx = ".version 9.0\n.target sm_90\n";
    e.compiled.cubin = {std::byte{0x7f}, std::byte{'E'}, std::byte{'L'}, std::byte{'F'}, std::byte{0}, std::byte{42}};
    e.compiled.log = "ptxas info    : Used 20 registers";
    e.compiled.resources = {.registers = 20, .spill_store_bytes = 0, .spill_load_bytes = 0,
                            .shared_static_bytes = 512, .stack_frame_bytes = 8, .constant_bytes = 392, .barriers = 1};
    e.compiled.compile_ms = 12.5;
    return e;
}

std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Restores the working directory and an environment variable when the scope ends.
struct EnvScope {
    explicit EnvScope(std::vector<std::string> names) : names_(std::move(names)) {
        for (const auto& n : names_) {
            const char* v = std::getenv(n.c_str());
            saved_.emplace_back(v ? std::optional<std::string>(v) : std::nullopt);
        }
    }
    ~EnvScope() {
        fs::current_path(cwd_);
        for (std::size_t i = 0; i < names_.size(); ++i) {
            if (saved_[i]) ::setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
            else ::unsetenv(names_[i].c_str());
        }
    }
    fs::path cwd_ = fs::current_path();
    std::vector<std::string> names_;
    std::vector<std::optional<std::string>> saved_;
};

}  // namespace

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

TEST_CASE("default location: KJIT_CACHE_DIR, then the repository's cache/, then XDG, then ~/.cache") {
    EnvScope scope({"KJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"});
    ::setenv("KJIT_CACHE_DIR", "/some/where", 1);
    CHECK(Cache::default_directory() == fs::path("/some/where"));
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

TEST_CASE("tuned winners: stored, found by (kernel, shape, device, arch), replaced, exported and imported") {
    test::TempDir dir;
    Cache cache(dir.path());
    CHECK_FALSE(cache.find_tuned("conv2d_bn_silu", "b1", "H200", "sm_90").has_value());
    cache.store_tuned({"conv2d_bn_silu", "b1", "H200", "sm_90", "BLOCK_M=64 BLOCK_N=16", 15.4});
    cache.store_tuned({"conv2d_bn_silu", "b1", "H100", "sm_90", "BLOCK_M=32 BLOCK_N=16", 17.0});
    auto found = cache.find_tuned("conv2d_bn_silu", "b1", "H200", "sm_90");
    REQUIRE(found.has_value());
    CHECK(found->config == "BLOCK_M=64 BLOCK_N=16");
    CHECK(found->microseconds == 15.4);
    cache.store_tuned({"conv2d_bn_silu", "b1", "H200", "sm_90", "BLOCK_M=128 BLOCK_N=16", 14.0});
    CHECK(cache.find_tuned("conv2d_bn_silu", "b1", "H200", "sm_90")->config == "BLOCK_M=128 BLOCK_N=16");
    CHECK(cache.tuned().size() == 2);

    cache.store(sample_entry());
    CHECK(cache.export_to(dir.path() / "shipped.sqlite3") == 1);
    CHECK_THROWS_WITH_AS((void)cache.export_to(dir.path() / "shipped.sqlite3"), doctest::Contains("exists"), UsageError);
    test::TempDir deployed;
    Cache target(deployed.path());
    target.store_tuned({"conv2d_bn_silu", "b1", "H200", "sm_90", "mine", 1.0});
    const ImportReport r = target.import_from(dir.path() / "shipped.sqlite3");
    CHECK(r.imported == 1);
    CHECK(r.kept == 0);
    CHECK(r.rejected == 0);
    CHECK(target.find_tuned("conv2d_bn_silu", "b1", "H200", "sm_90")->config == "mine");  // local winner kept
    CHECK(target.find_tuned("conv2d_bn_silu", "b1", "H100", "sm_90").has_value());        // new one imported
    CHECK(target.verify().empty());
}

TEST_CASE("prune keeps the most recently used entries within the size, clear removes all") {
    test::TempDir dir;
    Cache cache(dir.path());
    for (std::uint64_t i = 1; i <= 5; ++i) cache.store(sample_entry(i));
    const std::uint64_t one = sample_entry().compiled.ptx.size() + sample_entry().compiled.cubin.size() +
                              sample_entry().compiled.log.size();
    CHECK(cache.prune(2 * one) == 3);
    CHECK(cache.entries().size() == 2);
    CHECK(cache.clear() == 2);
    CHECK(cache.entries().empty());
    CHECK(cache.verify().empty());
}
