// The SQLite kernel cache's store: one database in WAL mode, checksummed entries written one
// transaction each, hits counted in memory and written in batches. Any database it cannot use
// turns the cache into an in-memory one (recovery.cpp), with one warning.
#include <unistd.h>

#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/cache.hpp>
#include <kjit/error.hpp>

#include "jit/cache/cache_impl.hpp"
#include "jit/cache/entry_row.hpp"
#include "jit/cache/schema.hpp"
#include "jit/log.hpp"

namespace kjit {
namespace fs = std::filesystem;
using detail::sqlite::Failure;
using detail::sqlite::Transaction;

namespace {

constexpr std::int64_t hit_batch = 256;  // pending hit counts written together

std::string host_name() {
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("unknown");
}

/// Whether the kernels table is the WITHOUT ROWID one of kjits before 2026-12-05.
bool kernels_without_rowid(const detail::sqlite::Database& db) {
    auto s = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'kernels'");
    return s.step() && s.text(0).find("WITHOUT ROWID") != std::string::npos;
}

}  // namespace

std::int64_t detail::unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Cache::Impl::Impl() : host(host_name()) {}

std::string detail::missing_kernel_columns(const sqlite::Database& database, std::string_view db) {
    std::set<std::string, std::less<>> present;
    auto info = database.prepare(schema::table_info_sql(db));
    while (info.step()) present.insert(info.text(1));
    if (present.empty()) return {};  // no kernels table yet: it is created
    std::vector<std::string_view> missing;
    for (const auto& c : schema::kernel_columns)
        if (!present.contains(c.name)) missing.push_back(c.name);
    return missing.empty() ? std::string{}
                           : fmt::format("column{} {}", missing.size() > 1 ? "s" : "", fmt::join(missing, ", "));
}

void Cache::Impl::open() {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    opened = detail::file_id(path);
    db.emplace(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
    read_only = db->read_only();
    if (opened == detail::FileId{}) opened = detail::file_id(path);  // created just now
    // Pages read through a mapping, not a read() each: a cubin lookup walks its row's overflow
    // pages (PTX first, hundreds of KB), and 12 lookups took 2.6 ms through read() and 1.1 ms
    // mapped on the build machine. SQLite remaps when another connection grows or shrinks the
    // file; only a truncation from outside SQLite could fault a read.
    db->exec("PRAGMA mmap_size=1073741824");

    // The schema version is read before anything is written: a newer kjit's database is left untouched.
    int version = 0;
    if (db->has_table("kjit_schema")) {
        auto v = db->prepare("SELECT max(version) FROM kjit_schema");
        if (!v.step()) db->fail(SQLITE_ERROR, "reading the schema version");
        version = static_cast<int>(v.integer(0));
    }
    if (version > cache_schema_version)
        throw Failure{
            fmt::format("it was written by a newer kjit (schema {}, this kjit reads {}); it is left "
                        "untouched. Use a kjit at least as new, or another KJIT_CACHE_DIR",
                        version, cache_schema_version)};
    if (const std::string missing = detail::missing_kernel_columns(*db, "main"); !missing.empty())
        throw Failure{
            fmt::format("it is not a kjit cache (its kernels table lacks {}); it is left untouched. "
                        "Point KJIT_CACHE_DIR or --cache-dir elsewhere, or move the file away",
                        missing)};
    if (read_only) {
        if (version != cache_schema_version) throw Failure{"it is read-only and holds no kjit cache"};
        warn_once(fmt::format("kernel cache {} is read-only: new compilations are kept in memory only", path.string()));
        return;
    }
    db->exec("PRAGMA journal_mode=WAL");
    db->exec("PRAGMA synchronous=NORMAL");
    if (kernels_without_rowid(*db)) {  // once per database: its lookups read whole rows until rebuilt
        Transaction t(*db);
        // Asked again under the write lock: another process may have rebuilt it while this one waited.
        if (kernels_without_rowid(*db)) {
            db->exec(detail::schema::rowid_kernels_sql());
            t.commit();
            detail::log(
                LogLevel::info,
                fmt::format("kernel cache {}: kernels table rebuilt with rowids (faster lookups)", path.string()));
        }
    }
    if (version == 0 || !db->has_table("tuned_winners") || !db->has_table("claims")) {  // new, or from before a table
        Transaction t(*db);
        db->exec(detail::schema::tables_sql("main"));
        db->exec(
            fmt::format("INSERT INTO kjit_schema (version) SELECT {0} WHERE NOT EXISTS (SELECT 1 FROM kjit_schema)",
                        cache_schema_version));
        t.commit();
    }
}

std::optional<CacheEntry> Cache::Impl::read(const CacheKey& key, Blobs blobs) {
    auto& find = find_statements[blobs == Blobs::cubin];
    if (!find)
        find.emplace(db->prepare(
            fmt::format("SELECT {} FROM kernels WHERE key = ?", detail::schema::select_list(blobs == Blobs::all))));
    const std::string hex = key.hex();
    find->bind(hex);
    bool row = false;
    try {
        row = find->step();
    } catch (...) {
        find->reset();
        throw;
    }
    if (!row) {
        find->reset();
        return std::nullopt;
    }
    auto [e, bad] = detail::decode_entry(*find, blobs);
    find->reset();
    if (!bad.empty()) {
        refused.insert(key);
        detail::warn(
            fmt::format("cache entry {} ({}) in {} failed its {} checksum: ignoring it; it is recompiled "
                        "and replaced",
                        e.readable_id, hex, path.string(), bad));
        return std::nullopt;
    }
    if (!read_only) {  // usage bookkeeping, written in batches (flush_hits)
        auto& pending = pending_hits[key];
        e.hit_count += pending++;  // as the database will say once flushed
        if (++pending_total >= hit_batch) {
            try {
                flush_hits();
            } catch (const Failure&) {  // a lost counter costs nothing else
                forget_hits();
            }
        }
    }
    return std::move(e);
}

void Cache::Impl::insert(const CacheEntry& e) const {
    auto s = db->prepare(detail::schema::insert_sql());
    detail::bind_entry(s, e, detail::unix_now());
    s.run("writing an entry");
}

void Cache::Impl::write(std::span<const CacheEntry> entries) {
    Transaction t(*db);
    for (const CacheEntry& e : entries) {
        insert(e);
        drop_claim(e.key);  // in the same transaction: waiters see the entry when the claim goes
    }
    t.commit();
    for (const CacheEntry& e : entries) refused.erase(e.key);
}

void Cache::Impl::flush_hits() {
    if (pending_hits.empty() || !db || read_only) return;
    Transaction t(*db);
    auto u = db->prepare("UPDATE kernels SET last_used_at = ?, hit_count = hit_count + ? WHERE key = ?");
    for (const auto& [key, hits] : pending_hits) {
        u.bind(detail::unix_now(), hits, key.hex());
        u.run("counting hits");
        u.reset();
    }
    t.commit();
    forget_hits();
}

void Cache::Impl::forget_hits() noexcept {
    pending_hits.clear();
    pending_total = 0;
}

void Cache::Impl::drop_database() noexcept {
    if (db) {
        try {
            flush_hits();
        } catch (const Failure&) {}
    }
    for (auto& f : find_statements) f.reset();
    db.reset();
}

void Cache::Impl::warn_once(const std::string& message) {
    if (warned) return;
    warned = true;
    detail::warn(message);
}

// ---- the public face ------------------------------------------------------------------------

fs::path Cache::default_directory() {
    if (const char* dir = std::getenv("KJIT_CACHE_DIR")) {
        if (!*dir)
            throw UsageError(
                "KJIT_CACHE_DIR is set but empty: give it a directory, or unset it for the default "
                "(the checkout's cache/, $XDG_CACHE_HOME/kjit or ~/.cache/kjit)");
        return dir;
    }
    // Inside a kjit checkout: its cache/ folder (marked by cache/README.md beside kernels_src/).
    std::error_code ec;
    for (fs::path dir = fs::current_path(ec); !ec && !dir.empty(); dir = dir.parent_path()) {
        if (fs::exists(dir / "cache" / "README.md", ec) && fs::is_directory(dir / "kernels_src", ec))
            return dir / "cache";
        if (dir == dir.root_path()) break;
    }
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "kjit";
    if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "kjit";
    return fs::temp_directory_path(ec) / "kjit-cache";
}

Cache::Cache(const fs::path& directory) : impl_(std::make_unique<Impl>()) {
    impl_->path = directory / file_name;
    try {
        impl_->open();
    } catch (const Failure& failure) {
        impl_->recover(failure);
    }
}

Cache::~Cache() = default;
Cache::Cache(Cache&&) noexcept = default;
Cache& Cache::operator=(Cache&&) noexcept = default;

CacheEntry make_cache_entry(const Kernel& kernel, const CompileOptions& options, Compiled compiled) {
    CacheEntry e;
    e.key = kernel.key(options);
    e.readable_id = kernel.id();
    e.kernel_name = kernel.name();
    e.arch = options.arch.name();
    e.nvrtc_version = nvrtc_version();
    e.options = fmt::format("{}", fmt::join(options.canonical(), " "));
    e.compiled = std::move(compiled);
    return e;
}

std::optional<CacheEntry> Cache::find(const CacheKey& key, Blobs blobs) {
    std::lock_guard lock(impl_->mutex);
    if (auto it = impl_->memory.find(key); it != impl_->memory.end()) return it->second;
    if (!impl_->db) return std::nullopt;
    try {
        return impl_->read(key, blobs);
    } catch (const Failure& failure) {
        impl_->recover(failure);
        return std::nullopt;
    }
}

void Cache::store(const CacheEntry& entry) { store(std::span(&entry, 1)); }

void Cache::store(std::span<const CacheEntry> entries) {
    if (entries.empty()) return;  // no write transaction for nothing (a pull's last batch may be empty)
    std::lock_guard lock(impl_->mutex);
    if (impl_->db && !impl_->read_only) {
        try {
            impl_->write(entries);
            for (const CacheEntry& e : entries) impl_->memory.erase(e.key);
            return;
        } catch (const Failure& failure) {
            impl_->recover(failure);
            if (impl_->db) {  // set aside and reopened: store into the fresh database
                try {
                    impl_->write(entries);
                    return;
                } catch (const Failure& again) {
                    impl_->to_memory(again);
                }
            }
        }
    }
    for (const CacheEntry& e : entries) impl_->memory.insert_or_assign(e.key, e);
}

void Cache::close() noexcept {
    std::lock_guard lock(impl_->mutex);
    impl_->drop_database();  // sqlite3_close_v2: the last connection folds the WAL into the file
}

bool Cache::persistent() const noexcept {
    std::lock_guard lock(impl_->mutex);
    return impl_->db && !impl_->read_only;
}

const fs::path& Cache::path() const noexcept { return impl_->path; }

}  // namespace kjit
