// Fuzz target: a cache row as kjit reads it. The bytes become one row of the kernels table
// (written with SQLite directly, any value in any column, checksums sometimes made to match);
// kjit then looks it up, lists and verifies the cache. It must never crash, and never hand out
// a row whose checksums fail.
#include <sqlite3.h>

#include <unistd.h>

#include <filesystem>

#include <kjit/cache.hpp>
#include <kjit/error.hpp>
#include <kjit/log.hpp>

#include "../../src/jit/cache_key.hpp"
#include "fuzz_input.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& directory() {
    static const fs::path dir = [] {
        auto d = fs::temp_directory_path() / ("kjit-fuzz-row-" + std::to_string(::getpid()));
        fs::create_directories(d);
        kjit::set_log_sink([](kjit::LogLevel, std::string_view) {});  // warnings are expected here
        kjit::Cache{d};                                               // creates the schema
        return d;
    }();
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    kjit::fuzz::Input in(data, size);
    const fs::path db_path = directory() / kjit::Cache::file_name;
    sqlite3* db = nullptr;
    if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) return 0;
    sqlite3_exec(db, "DELETE FROM kernels", nullptr, nullptr, nullptr);
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db,
                       "INSERT OR REPLACE INTO kernels (key, readable_id, kernel_name, arch, nvrtc_version, "
                       "options, ptx, cubin, log, registers, spill_store_bytes, spill_load_bytes, "
                       "shared_static_bytes, stack_frame_bytes, constant_bytes, barriers, compile_ms, created_at, "
                       "last_used_at, hit_count, ptx_checksum, cubin_checksum, log_checksum, meta_checksum) "
                       "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       -1, &s, nullptr);
    const bool valid_key = in.byte() & 1;
    const kjit::CacheKey wanted{0x1234, static_cast<std::uint64_t>(in.i64())};
    const std::string key = valid_key ? wanted.hex() : in.bytes();
    std::string text[5], blobs[3];
    for (auto& t : text) t = in.bytes();
    for (auto& b : blobs) b = in.bytes();
    const std::uint8_t forms = in.byte();  // per column: text, blob, integer or NULL
    int col = 0;
    auto bind_any = [&](const std::string& v, int form) {
        ++col;
        switch (form & 3) {
            case 0: sqlite3_bind_text(s, col, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); break;
            case 1: sqlite3_bind_blob(s, col, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); break;
            case 2: sqlite3_bind_int64(s, col, static_cast<std::int64_t>(v.size())); break;
            default: sqlite3_bind_null(s, col);
        }
    };
    bind_any(key, 0);
    for (int i = 0; i < 5; ++i) bind_any(text[i], forms >> (i % 4) & 1);
    for (int i = 0; i < 3; ++i) bind_any(blobs[i], forms >> (4 + i) & 3 ? 1 : 0);
    for (int i = 0; i < 11; ++i) sqlite3_bind_int64(s, ++col, in.i64());  // resources, compile_ms, times, hits
    const bool matching = in.byte() & 1;  // checksums that match the blobs (the metadata one rarely does)
    std::int64_t stored[3];
    for (int i = 0; i < 3; ++i) {
        stored[i] = matching ? static_cast<std::int64_t>(kjit::detail::checksum(blobs[i])) : in.i64();
        sqlite3_bind_int64(s, ++col, stored[i]);
    }
    sqlite3_bind_int64(s, ++col, in.i64());
    sqlite3_step(s);
    sqlite3_finalize(s);
    sqlite3_close(db);

    kjit::Cache cache(directory());
    // A row handed out must be the row stored, with a cubin matching its stored checksum.
    for (auto blobs_read : {kjit::Cache::Blobs::all, kjit::Cache::Blobs::cubin})
        if (const auto e = cache.find(wanted, blobs_read))
            if (static_cast<std::int64_t>(kjit::detail::checksum(e->compiled.cubin)) != stored[1] || e->key != wanted)
                __builtin_trap();
    try {
        (void)cache.entries();
        (void)cache.verify();
    } catch (const kjit::Error&) {}
    return 0;
}
