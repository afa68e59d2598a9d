// Step 4 — the SQLite cache: checksummed entries, one transaction each, WAL, busy retries.
// Any database it cannot use turns the cache into an in-memory one, with one warning.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <kjit/cache.hpp>
#include <kjit/error.hpp>

#include "cache_key.hpp"
#include "log.hpp"

namespace kjit {
namespace fs = std::filesystem;

namespace {

constexpr int busy_timeout_ms = 10'000;
constexpr int busy_retries = 5;  // the busy handler already waits; these cover WAL snapshot races

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// Thrown inside this file when SQLite fails; at the boundary a damaged file is set aside and
/// replaced, anything else turns the cache into memory mode with a warning.
struct SqlFailure {
    std::string what;
    int code = SQLITE_ERROR;
    /// The file itself is broken (not a database, or corrupt): no retry or wait can help.
    [[nodiscard]] bool damaged() const noexcept {
        return (code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB;
    }
};

/// Identity of a file, so that a file replaced under us is never set aside by mistake.
struct FileId {
    dev_t device = 0;
    ino_t inode = 0;
    friend bool operator==(const FileId&, const FileId&) = default;
};
FileId file_id(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? FileId{st.st_dev, st.st_ino} : FileId{};
}

/// Whether process `pid` on this host still runs (a claim's owner).
bool process_alive(std::int64_t pid) {
    return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::string host_name() {
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("unknown");
}

struct StatementDeleter {
    void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};
using Statement = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

struct DatabaseDeleter {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using Database = std::unique_ptr<sqlite3, DatabaseDeleter>;

/// The tables, in database `db` ("main" or an attached one). Changes are additive only: a kjit
/// that does not know a table ignores it.
std::string schema_sql(std::string_view db) {
    return fmt::format(R"sql(
CREATE TABLE IF NOT EXISTS {0}.kjit_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS {0}.kernels (
    key TEXT PRIMARY KEY NOT NULL,
    readable_id TEXT NOT NULL,
    kernel_name TEXT NOT NULL,
    arch TEXT NOT NULL,
    nvrtc_version TEXT NOT NULL,
    options TEXT NOT NULL,
    ptx BLOB NOT NULL,
    cubin BLOB NOT NULL,
    log TEXT NOT NULL,
    registers INTEGER NOT NULL,
    spill_store_bytes INTEGER NOT NULL,
    spill_load_bytes INTEGER NOT NULL,
    shared_static_bytes INTEGER NOT NULL,
    stack_frame_bytes INTEGER NOT NULL,
    constant_bytes INTEGER NOT NULL,
    barriers INTEGER NOT NULL,
    compile_ms REAL NOT NULL,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER NOT NULL,
    hit_count INTEGER NOT NULL,
    ptx_checksum INTEGER NOT NULL,
    cubin_checksum INTEGER NOT NULL,
    log_checksum INTEGER NOT NULL,
    meta_checksum INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {0}.kernels_by_name ON kernels (kernel_name, arch);
CREATE TABLE IF NOT EXISTS {0}.claims (
    key TEXT PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS {0}.tuned (
    kernel TEXT NOT NULL,
    shape TEXT NOT NULL,
    device TEXT NOT NULL,
    arch TEXT NOT NULL,
    config TEXT NOT NULL,
    microseconds REAL NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kernel, shape, device, arch)
) WITHOUT ROWID;
)sql",
                       db);
}

constexpr const char* columns =
    "key, readable_id, kernel_name, arch, nvrtc_version, options, ptx, cubin, log, registers, spill_store_bytes, "
    "spill_load_bytes, shared_static_bytes, stack_frame_bytes, constant_bytes, barriers, compile_ms, created_at, "
    "last_used_at, hit_count, ptx_checksum, cubin_checksum, log_checksum, meta_checksum";
/// The same columns with the PTX and the log left out (NULL): what loading a module reads.
constexpr const char* cubin_columns =
    "key, readable_id, kernel_name, arch, nvrtc_version, options, NULL, cubin, NULL, registers, spill_store_bytes, "
    "spill_load_bytes, shared_static_bytes, stack_frame_bytes, constant_bytes, barriers, compile_ms, created_at, "
    "last_used_at, hit_count, ptx_checksum, cubin_checksum, log_checksum, meta_checksum";

/// Checksum over the row's text fields and resource numbers (everything but the blobs).
std::uint64_t meta_checksum(const CacheEntry& e) {
    const auto& r = e.compiled.resources;
    return detail::checksum(fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{} {} {} {} {} {} {}", e.key.hex(), e.readable_id,
                                        e.kernel_name, e.arch, e.nvrtc_version, e.options, r.registers,
                                        r.spill_store_bytes, r.spill_load_bytes, r.shared_static_bytes,
                                        r.stack_frame_bytes, r.constant_bytes, r.barriers));
}

std::int64_t as_sql(std::uint64_t v) { return static_cast<std::int64_t>(v); }

/// The key of a row: 32 hex digits (anything else reads as a key no entry has).
CacheKey parse_key(std::string_view hex) {
    CacheKey k;
    auto half = [&](std::string_view h, std::uint64_t& out) {
        return std::from_chars(h.data(), h.data() + h.size(), out, 16).ptr == h.data() + h.size();
    };
    if (hex.size() != 32 || !half(hex.substr(0, 16), k.high) || !half(hex.substr(16), k.low)) return {};
    return k;
}

}  // namespace

struct Cache::Impl {
    fs::path path;
    std::mutex mutex;
    Database db;                 // null in memory mode
    bool read_only = false;      // reads from db, stores to memory
    bool warned = false;
    // Hits are counted here and written in batches: a cache hit must not pay for a write.
    std::unordered_map<CacheKey, std::int64_t, detail::CacheKeyHash> pending_hits;
    std::int64_t pending_total = 0;
    // Prepared once (all blobs, cubin only); declared after db, so finalized before it closes.
    std::array<Statement, 2> find_statements;
    FileId opened;  // the file open() opened
    // Rows read here that failed a checksum: claim() does not call them present (they are to be
    // replaced), so a waiter never re-reads a bad row and warns twice.
    std::unordered_set<CacheKey, detail::CacheKeyHash> refused;
    const std::string host = host_name();

    ~Impl() { drop_database(); }

    /// Writes pending hit counts and closes the database (memory mode from here on).
    void drop_database() noexcept {
        if (db) {
            try {
                flush_hits();
            } catch (const SqlFailure&) {
            }
        }
        for (auto& f : find_statements) f.reset();
        db.reset();
    }

    void flush_hits() {
        if (pending_hits.empty() || !db || read_only) return;
        exec("BEGIN IMMEDIATE");
        try {
            auto u = prepare("UPDATE kernels SET last_used_at = ?, hit_count = hit_count + ? WHERE key = ?");
            for (const auto& [key, hits] : pending_hits) {
                const std::string hex = key.hex();
                sqlite3_bind_int64(u.get(), 1, unix_now());
                sqlite3_bind_int64(u.get(), 2, hits);
                sqlite3_bind_text(u.get(), 3, hex.c_str(), -1, SQLITE_TRANSIENT);
                step(u.get());
                sqlite3_reset(u.get());
            }
        } catch (...) {
            sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
        exec("COMMIT");
        pending_hits.clear();
        pending_total = 0;
    }
    std::unordered_map<CacheKey, CacheEntry, detail::CacheKeyHash> memory;  // entries not written to db

    void warn_once(const std::string& message) {
        if (warned) return;
        warned = true;
        detail::warn(message);
    }

    void fail(int rc, std::string_view what) const {
        if (db && (rc & 0xff) == SQLITE_ERROR) rc = sqlite3_extended_errcode(db.get());  // the specific reason
        throw SqlFailure{fmt::format("{}: {} ({})", what, db ? sqlite3_errmsg(db.get()) : sqlite3_errstr(rc), rc), rc};
    }

    Statement prepare(const std::string& sql) const {
        sqlite3_stmt* raw = nullptr;
        const int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &raw, nullptr);
        if (rc != SQLITE_OK) fail(rc, "preparing SQL");
        return Statement(raw);
    }

    /// Runs `sql`, retrying while another connection holds the lock.
    void exec(const char* sql) const {
        for (int attempt = 0;; ++attempt) {
            const int rc = sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr);
            if (rc == SQLITE_OK) return;
            if ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && attempt < busy_retries) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt));
                continue;
            }
            fail(rc, sql);
        }
    }

    int step(sqlite3_stmt* s) const {
        for (int attempt = 0;; ++attempt) {
            const int rc = sqlite3_step(s);
            if ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && attempt < busy_retries) {
                sqlite3_reset(s);
                std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt));
                continue;
            }
            return rc;
        }
    }

    bool has_table(const char* name) {
        auto s = prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?");
        sqlite3_bind_text(s.get(), 1, name, -1, SQLITE_STATIC);
        if (step(s.get()) != SQLITE_ROW) fail(sqlite3_errcode(db.get()), "reading the schema");
        return sqlite3_column_int(s.get(), 0) == 1;
    }

    void open() {
        std::error_code ec;
        fs::create_directories(path.parent_path(), ec);
        opened = file_id(path);
        sqlite3* raw = nullptr;
        const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                       nullptr);
        db.reset(raw);
        if (rc != SQLITE_OK) fail(rc, "opening the database");
        sqlite3_busy_timeout(db.get(), busy_timeout_ms);
        read_only = sqlite3_db_readonly(db.get(), "main") == 1;
        if (opened == FileId{}) opened = file_id(path);  // created just now

        // The schema version is read before anything is written: a newer kjit's database is left untouched.
        int version = 0;
        {
            auto s = prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'kjit_schema'");
            if (step(s.get()) != SQLITE_ROW) fail(sqlite3_errcode(db.get()), "reading the schema");
            if (sqlite3_column_int(s.get(), 0) == 1) {
                auto v = prepare("SELECT max(version) FROM kjit_schema");
                if (step(v.get()) != SQLITE_ROW) fail(sqlite3_errcode(db.get()), "reading the schema version");
                version = sqlite3_column_int(v.get(), 0);
            }
        }
        if (version > cache_schema_version)
            throw SqlFailure{fmt::format("it was written by a newer kjit (schema {}, this kjit reads {}); it is left "
                                         "untouched. Use a kjit at least as new, or another KJIT_CACHE_DIR",
                                         version, cache_schema_version)};
        if (read_only) {
            if (version != cache_schema_version) throw SqlFailure{"it is read-only and holds no kjit cache"};
            warn_once(fmt::format("kernel cache {} is read-only: new compilations are kept in memory only", path.string()));
            return;
        }
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA synchronous=NORMAL");
        if (version == 0 || !has_table("tuned") || !has_table("claims")) {  // new, or from before a table
            exec("BEGIN IMMEDIATE");
            exec(schema_sql("main").c_str());
            exec(fmt::format("INSERT INTO kjit_schema (version) SELECT {0} WHERE NOT EXISTS (SELECT 1 FROM kjit_schema)",
                             cache_schema_version)
                     .c_str());
            exec("COMMIT");
        }
    }

    /// What every public entry point does with a failure: a damaged file is set aside and a
    /// fresh database takes its place; anything else leaves the database for memory.
    void recover(const SqlFailure& failure) {
        if (failure.damaged() && !read_only) set_aside(failure);
        else to_memory(failure);
    }

    /// Moves a damaged database (and its WAL and index) aside, keeping them for inspection, and
    /// opens a fresh one at the same path. Entries in the old file are recompiled as needed.
    void set_aside(const SqlFailure& failure) {
        pending_hits.clear();
        pending_total = 0;
        for (auto& f : find_statements) f.reset();
        db.reset();
        const fs::path aside = path.string() + fmt::format(".damaged-{}-{}", unix_now(), ::getpid());
        std::error_code ec;
        if (file_id(path) == opened) {  // else another process replaced it already: just reopen
            fs::rename(path, aside, ec);
            if (ec) return to_memory(SqlFailure{fmt::format("{}; moving it aside to {} failed: {}", failure.what,
                                                            aside.string(), ec.message())});
            // A stale WAL must never be replayed into the fresh database.
            for (const char* suffix : {"-wal", "-shm"}) {
                std::error_code ignored;
                fs::rename(path.string() + suffix, aside.string() + suffix, ignored);
            }
            detail::warn(fmt::format("the kernel cache {} is damaged ({}): moved it to {} and started a fresh one; "
                                     "its kernels are recompiled as they are needed",
                                     path.string(), failure.what, aside.string()));
        }
        try {
            open();
        } catch (const SqlFailure& again) {
            to_memory(again);
        }
    }

    /// Leaves the database behind for the rest of this object's life.
    void to_memory(const SqlFailure& failure) {
        pending_hits.clear();
        for (auto& f : find_statements) f.reset();
        db.reset();
        warn_once(fmt::format("cannot use the kernel cache {}: {}. Working from memory: compiled kernels are not saved.",
                              path.string(), failure.what));
    }

    std::optional<CacheEntry> read(const CacheKey& key, Blobs blobs) {
        Statement& find = find_statements[blobs == Blobs::cubin];
        if (!find)
            find = prepare(fmt::format("SELECT {} FROM kernels WHERE key = ?",
                                       blobs == Blobs::cubin ? cubin_columns : columns));
        sqlite3_stmt* s = find.get();
        const std::string hex = key.hex();
        sqlite3_bind_text(s, 1, hex.c_str(), -1, SQLITE_TRANSIENT);
        const int rc = step(s);
        if (rc != SQLITE_ROW) {
            sqlite3_reset(s);
            if (rc == SQLITE_DONE) return std::nullopt;
            fail(rc, "reading an entry");
        }
        auto [e, bad] = decode(s, blobs);
        sqlite3_reset(s);
        if (!bad.empty()) {
            refused.insert(key);
            detail::warn(fmt::format("cache entry {} ({}) in {} failed its {} checksum: ignoring it; it is recompiled "
                                     "and replaced",
                                     e.readable_id, hex, path.string(), bad));
            return std::nullopt;
        }
        if (!read_only) {  // usage bookkeeping, written in batches (flush_hits)
            auto& pending = pending_hits[key];
            e.hit_count += pending++;  // as the database will say once flushed
            if (++pending_total >= 256) {
                try {
                    flush_hits();
                } catch (const SqlFailure&) {  // a lost counter costs nothing else
                    pending_hits.clear();
                    pending_total = 0;
                }
            }
        }
        return e;
    }

    /// The entry in the current row of a `SELECT columns` statement, and the name of the first
    /// checksum it fails ("" when every blob read and the metadata match).
    static std::pair<CacheEntry, std::string> decode(sqlite3_stmt* s, Blobs blobs = Blobs::all) {
        auto text = [&](int col) {
            const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
            return std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, col)));
        };
        auto int_at = [&](int col) { return sqlite3_column_int64(s, col); };
        CacheEntry e;
        e.key = parse_key(text(0));
        e.readable_id = text(1);
        e.kernel_name = text(2);
        e.arch = text(3);
        e.nvrtc_version = text(4);
        e.options = text(5);
        e.compiled.ptx = text(6);
        const auto* cubin = static_cast<const std::byte*>(sqlite3_column_blob(s, 7));
        e.compiled.cubin.assign(cubin, cubin + sqlite3_column_bytes(s, 7));
        e.compiled.log = text(8);
        auto& r = e.compiled.resources;
        int* fields[] = {&r.registers, &r.spill_store_bytes, &r.spill_load_bytes, &r.shared_static_bytes,
                         &r.stack_frame_bytes, &r.constant_bytes, &r.barriers};
        for (int i = 0; i < 7; ++i) *fields[i] = static_cast<int>(int_at(9 + i));
        e.compiled.compile_ms = sqlite3_column_double(s, 16);
        e.created_at = int_at(17);
        e.last_used_at = int_at(18);
        e.hit_count = int_at(19);
        std::string bad;
        const bool all = blobs == Blobs::all;
        if (all && as_sql(detail::checksum(e.compiled.ptx)) != int_at(20)) bad = "ptx";
        else if (as_sql(detail::checksum(e.compiled.cubin)) != int_at(21)) bad = "cubin";
        else if (all && as_sql(detail::checksum(e.compiled.log)) != int_at(22)) bad = "log";
        else if (as_sql(meta_checksum(e)) != int_at(23)) bad = "metadata";
        return {std::move(e), std::move(bad)};
    }

    /// Calls `row(entry, failed_checksum)` for every entry of `table` ("main.kernels", …).
    template <class Row>
    void each_entry(std::string_view table, Row&& row) {
        auto s = prepare(fmt::format("SELECT {} FROM {}", columns, table));
        for (int rc; (rc = step(s.get())) != SQLITE_DONE;) {
            if (rc != SQLITE_ROW) fail(rc, "reading entries");
            auto [e, bad] = decode(s.get());
            row(std::move(e), bad);
        }
    }

    void write(const CacheEntry& e) {
        exec("BEGIN IMMEDIATE");
        try {
            insert(e);
            drop_claim(e.key);  // in the same transaction: waiters see the entry when the claim goes
            refused.erase(e.key);
        } catch (...) {
            sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
        exec("COMMIT");
    }

    void drop_claim(const CacheKey& key) {
        auto s = prepare("DELETE FROM claims WHERE key = ?");
        const std::string hex = key.hex();
        sqlite3_bind_text(s.get(), 1, hex.c_str(), -1, SQLITE_TRANSIENT);
        if (const int rc = step(s.get()); rc != SQLITE_DONE) fail(rc, "releasing a claim");
    }

    /// One transaction: the entry is there, or a live process holds an unexpired claim on the
    /// key, or this process takes the claim (replacing an expired one or a dead owner's).
    Claim claim(const CacheKey& key, std::chrono::seconds ttl) {
        const std::string hex = key.hex();
        exec("BEGIN IMMEDIATE");
        try {
            auto present = prepare("SELECT 1 FROM kernels WHERE key = ?");
            sqlite3_bind_text(present.get(), 1, hex.c_str(), -1, SQLITE_TRANSIENT);
            if (step(present.get()) == SQLITE_ROW && !refused.contains(key)) {
                exec("COMMIT");
                return Claim::present;
            }
            auto holder = prepare("SELECT host, pid, expires_at FROM claims WHERE key = ?");
            sqlite3_bind_text(holder.get(), 1, hex.c_str(), -1, SQLITE_TRANSIENT);
            const std::int64_t now = unix_now();
            if (step(holder.get()) == SQLITE_ROW) {
                const auto* owner_host = reinterpret_cast<const char*>(sqlite3_column_text(holder.get(), 0));
                const std::int64_t pid = sqlite3_column_int64(holder.get(), 1);
                const bool expired = sqlite3_column_int64(holder.get(), 2) < now;
                const bool dead = owner_host && host == owner_host && !process_alive(pid);
                if (!expired && !dead) {
                    exec("COMMIT");
                    return Claim::held;
                }
            }
            auto take = prepare("INSERT OR REPLACE INTO claims (key, host, pid, expires_at) VALUES (?, ?, ?, ?)");
            sqlite3_bind_text(take.get(), 1, hex.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(take.get(), 2, host.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(take.get(), 3, ::getpid());
            sqlite3_bind_int64(take.get(), 4, now + ttl.count());
            if (const int rc = step(take.get()); rc != SQLITE_DONE) fail(rc, "taking a claim");
        } catch (...) {
            sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
        exec("COMMIT");
        return Claim::owned;
    }

    /// INSERT OR REPLACE of one entry, inside the caller's transaction.
    void insert(const CacheEntry& e) {
        auto s = prepare(fmt::format("INSERT OR REPLACE INTO kernels ({}) VALUES "
                                     "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                     columns));
        const std::string hex = e.key.hex();
        int col = 0;
        auto bind_text = [&](const std::string& v) { sqlite3_bind_text(s.get(), ++col, v.data(), static_cast<int>(v.size()), SQLITE_STATIC); };
        auto bind_int = [&](std::int64_t v) { sqlite3_bind_int64(s.get(), ++col, v); };
        bind_text(hex);
        bind_text(e.readable_id);
        bind_text(e.kernel_name);
        bind_text(e.arch);
        bind_text(e.nvrtc_version);
        bind_text(e.options);
        sqlite3_bind_blob(s.get(), ++col, e.compiled.ptx.data(), static_cast<int>(e.compiled.ptx.size()), SQLITE_STATIC);
        sqlite3_bind_blob(s.get(), ++col, e.compiled.cubin.data(), static_cast<int>(e.compiled.cubin.size()), SQLITE_STATIC);
        bind_text(e.compiled.log);
        const auto& r = e.compiled.resources;
        for (int v : {r.registers, r.spill_store_bytes, r.spill_load_bytes, r.shared_static_bytes, r.stack_frame_bytes,
                      r.constant_bytes, r.barriers})
            bind_int(v);
        sqlite3_bind_double(s.get(), ++col, e.compiled.compile_ms);
        const std::int64_t now = unix_now();
        bind_int(e.created_at ? e.created_at : now);
        bind_int(e.last_used_at ? e.last_used_at : now);
        bind_int(e.hit_count);
        bind_int(as_sql(detail::checksum(e.compiled.ptx)));
        bind_int(as_sql(detail::checksum(e.compiled.cubin)));
        bind_int(as_sql(detail::checksum(e.compiled.log)));
        bind_int(as_sql(meta_checksum(e)));

        const int rc = step(s.get());
        if (rc != SQLITE_DONE) fail(rc, "writing an entry");
    }
};

fs::path Cache::default_directory() {
    if (const char* dir = std::getenv("KJIT_CACHE_DIR"); dir && *dir) return dir;
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
    } catch (const SqlFailure& failure) {
        impl_->recover(failure);
    }
}

Cache::Claim Cache::claim(const CacheKey& key, std::chrono::seconds ttl) {
    std::lock_guard lock(impl_->mutex);
    if (impl_->memory.contains(key)) return Claim::present;
    if (!impl_->db || impl_->read_only) return Claim::unshared;
    try {
        return impl_->claim(key, ttl);
    } catch (const SqlFailure& failure) {
        impl_->recover(failure);
        return Claim::unshared;
    }
}

void Cache::release(const CacheKey& key) noexcept {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->db || impl_->read_only) return;
    try {
        impl_->drop_claim(key);
    } catch (const SqlFailure&) {  // an unreleased claim expires, or dies with this process
    }
}

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

Cache::~Cache() = default;
Cache::Cache(Cache&&) noexcept = default;
Cache& Cache::operator=(Cache&&) noexcept = default;

std::optional<CacheEntry> Cache::find(const CacheKey& key, Blobs blobs) {
    std::lock_guard lock(impl_->mutex);
    if (auto it = impl_->memory.find(key); it != impl_->memory.end()) return it->second;
    if (!impl_->db) return std::nullopt;
    try {
        return impl_->read(key, blobs);
    } catch (const SqlFailure& failure) {
        impl_->recover(failure);
        return std::nullopt;
    }
}

void Cache::store(const CacheEntry& entry) {
    std::lock_guard lock(impl_->mutex);
    if (impl_->db && !impl_->read_only) {
        try {
            impl_->write(entry);
            impl_->memory.erase(entry.key);
            return;
        } catch (const SqlFailure& failure) {
            impl_->recover(failure);
            if (impl_->db) {  // set aside and reopened: store into the fresh database
                try {
                    impl_->write(entry);
                    return;
                } catch (const SqlFailure& again) {
                    impl_->to_memory(again);
                }
            }
        }
    }
    impl_->memory.insert_or_assign(entry.key, entry);
}

// ---- management ---------------------------------------------------------------------------

namespace {
/// Runs `work` with the database, or throws Error when this cache works from memory.
template <class Impl, class Work>
auto with_database(Impl& impl, Work&& work) {
    std::lock_guard lock(impl.mutex);
    if (!impl.db)
        throw Error(fmt::format("the kernel cache {} cannot be used (see the warning above): nothing to manage",
                                impl.path.string()));
    try {
        impl.flush_hits();
        return work();
    } catch (const SqlFailure& failure) {
        throw Error(fmt::format("kernel cache {}: {}", impl.path.string(), failure.what));
    }
}
}  // namespace

std::vector<CacheEntry> Cache::entries() {
    return with_database(*impl_, [&] {
        std::vector<CacheEntry> all;
        impl_->each_entry("main.kernels", [&](CacheEntry e, const std::string&) { all.push_back(std::move(e)); });
        return all;
    });
}

std::vector<std::string> Cache::verify() {
    return with_database(*impl_, [&] {
        std::vector<std::string> faults;
        auto check = impl_->prepare("PRAGMA integrity_check");
        for (int rc; (rc = impl_->step(check.get())) == SQLITE_ROW;) {
            const std::string line = reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0));
            if (line != "ok") faults.push_back("integrity: " + line);
        }
        impl_->each_entry("main.kernels", [&](const CacheEntry& e, const std::string& bad) {
            if (!bad.empty())
                faults.push_back(fmt::format("entry {} ({}, {}): {} checksum mismatch", e.key.hex(), e.readable_id,
                                             e.arch, bad));
        });
        return faults;
    });
}

std::size_t Cache::clear() {
    return with_database(*impl_, [&] {
        impl_->exec("DELETE FROM kernels");
        return static_cast<std::size_t>(sqlite3_changes(impl_->db.get()));
    });
}

std::size_t Cache::prune(std::uint64_t max_bytes) {
    return with_database(*impl_, [&] {
        auto s = impl_->prepare(
            "SELECT key, length(ptx) + length(cubin) + length(log) FROM kernels ORDER BY last_used_at DESC, created_at DESC");
        std::uint64_t kept_bytes = 0;
        std::vector<std::string> doomed;
        for (int rc; (rc = impl_->step(s.get())) == SQLITE_ROW;) {
            const auto bytes = static_cast<std::uint64_t>(sqlite3_column_int64(s.get(), 1));
            if (kept_bytes + bytes <= max_bytes) kept_bytes += bytes;  // most recently used first stay
            else doomed.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)));
        }
        s.reset();
        impl_->exec("BEGIN IMMEDIATE");
        auto del = impl_->prepare("DELETE FROM kernels WHERE key = ?");
        for (const auto& key : doomed) {
            sqlite3_bind_text(del.get(), 1, key.c_str(), -1, SQLITE_STATIC);
            impl_->step(del.get());
            sqlite3_reset(del.get());
        }
        del.reset();
        impl_->exec("COMMIT");
        impl_->exec("VACUUM");
        return doomed.size();
    });
}

std::size_t Cache::export_to(const fs::path& file, const std::string& arch) {
    if (fs::exists(file))
        throw UsageError(fmt::format("{} exists: export writes a new file; remove it or choose another name",
                                     file.string()));
    return with_database(*impl_, [&] {
        auto attach = impl_->prepare("ATTACH DATABASE ? AS export_target");
        sqlite3_bind_text(attach.get(), 1, file.c_str(), -1, SQLITE_TRANSIENT);
        if (impl_->step(attach.get()) != SQLITE_DONE) impl_->fail(sqlite3_errcode(impl_->db.get()), "creating the file");
        attach.reset();
        std::size_t n = 0;
        try {
            impl_->exec("BEGIN IMMEDIATE");
            impl_->exec(schema_sql("export_target").c_str());
            impl_->exec(fmt::format("INSERT INTO export_target.kjit_schema (version) VALUES ({})", cache_schema_version)
                            .c_str());
            auto copy = impl_->prepare(fmt::format("INSERT INTO export_target.kernels SELECT {0} FROM main.kernels{1}",
                                                   columns, arch.empty() ? "" : " WHERE arch = ?"));
            if (!arch.empty()) sqlite3_bind_text(copy.get(), 1, arch.c_str(), -1, SQLITE_TRANSIENT);
            if (impl_->step(copy.get()) != SQLITE_DONE) impl_->fail(sqlite3_errcode(impl_->db.get()), "copying entries");
            n = static_cast<std::size_t>(sqlite3_changes(impl_->db.get()));
            copy.reset();
            impl_->exec("INSERT INTO export_target.tuned SELECT * FROM main.tuned");
            impl_->exec("COMMIT");
        } catch (...) {
            sqlite3_exec(impl_->db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            sqlite3_exec(impl_->db.get(), "DETACH DATABASE export_target", nullptr, nullptr, nullptr);
            std::error_code ec;
            fs::remove(file, ec);  // nothing half-written stays behind
            throw;
        }
        impl_->exec("DETACH DATABASE export_target");
        return n;
    });
}

ImportReport Cache::import_from(const fs::path& file) {
    if (!fs::is_regular_file(file))
        throw UsageError(fmt::format("{} is not a file: give the path of a cache exported with kjit cache export",
                                     file.string()));
    return with_database(*impl_, [&] {
        sqlite3* raw = nullptr;
        const int rc = sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
        Database source(raw);
        auto not_a_cache = [&](std::string_view why) {
            return UsageError(fmt::format("{} is not a kjit cache ({}): give a file written by kjit cache export",
                                          file.string(), why));
        };
        if (rc != SQLITE_OK) throw not_a_cache(sqlite3_errstr(rc));
        int version = 0;
        sqlite3_exec(
            source.get(), "SELECT version FROM kjit_schema",
            [](void* v, int, char** cols, char**) {
                *static_cast<int*>(v) = cols[0] ? std::atoi(cols[0]) : 0;
                return 0;
            },
            &version, nullptr);
        if (version != cache_schema_version)
            throw not_a_cache(version ? fmt::format("schema {}, this kjit reads {}", version, cache_schema_version)
                                      : std::string("no kjit_schema table"));
        source.reset();

        ImportReport report;
        auto attach = impl_->prepare("ATTACH DATABASE ? AS import_source");
        sqlite3_bind_text(attach.get(), 1, file.c_str(), -1, SQLITE_TRANSIENT);
        if (impl_->step(attach.get()) != SQLITE_DONE) impl_->fail(sqlite3_errcode(impl_->db.get()), "opening the file");
        attach.reset();
        std::vector<CacheEntry> incoming;
        impl_->each_entry("import_source.kernels", [&](CacheEntry e, const std::string& bad) {
            if (!bad.empty()) {
                ++report.rejected;
                detail::warn(fmt::format("import: entry {} ({}) in {} failed its {} checksum: not imported",
                                         e.key.hex(), e.readable_id, file.string(), bad));
                return;
            }
            incoming.push_back(std::move(e));
        });
        impl_->exec("BEGIN IMMEDIATE");
        try {
            // Tuned winners travel too; this cache's own winners stay.
            if (sqlite3_exec(impl_->db.get(), "SELECT 1 FROM import_source.tuned LIMIT 1", nullptr, nullptr, nullptr) ==
                SQLITE_OK)
                impl_->exec("INSERT OR IGNORE INTO main.tuned SELECT * FROM import_source.tuned");
            for (const auto& e : incoming) {
                std::optional<CacheEntry> here;
                {
                    auto s = impl_->prepare(fmt::format("SELECT {} FROM kernels WHERE key = ?", columns));
                    const std::string hex = e.key.hex();
                    sqlite3_bind_text(s.get(), 1, hex.c_str(), -1, SQLITE_TRANSIENT);
                    if (impl_->step(s.get()) == SQLITE_ROW) {
                        auto [existing, bad] = Impl::decode(s.get());
                        if (bad.empty()) here = std::move(existing);
                    }
                }
                if (here) {
                    ++report.kept;
                    continue;
                }
                impl_->insert(e);
                ++report.imported;
            }
            impl_->exec("COMMIT");
        } catch (...) {
            sqlite3_exec(impl_->db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            sqlite3_exec(impl_->db.get(), "DETACH DATABASE import_source", nullptr, nullptr, nullptr);
            throw;
        }
        impl_->exec("DETACH DATABASE import_source");
        return report;
    });
}

void Cache::store_tuned(const TunedConfig& w) {
    with_database(*impl_, [&] {
        auto s = impl_->prepare("INSERT OR REPLACE INTO tuned VALUES (?, ?, ?, ?, ?, ?, ?)");
        int col = 0;
        for (const std::string* v : {&w.kernel, &w.shape, &w.device, &w.arch, &w.config})
            sqlite3_bind_text(s.get(), ++col, v->c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(s.get(), ++col, w.microseconds);
        sqlite3_bind_int64(s.get(), ++col, unix_now());
        if (impl_->step(s.get()) != SQLITE_DONE) impl_->fail(sqlite3_errcode(impl_->db.get()), "storing a tuned winner");
        return 0;
    });
}

std::vector<TunedConfig> Cache::tuned() {
    return with_database(*impl_, [&] {
        std::vector<TunedConfig> all;
        auto s = impl_->prepare("SELECT kernel, shape, device, arch, config, microseconds FROM tuned");
        while (impl_->step(s.get()) == SQLITE_ROW) {
            auto text = [&](int c) { return std::string(reinterpret_cast<const char*>(sqlite3_column_text(s.get(), c))); };
            all.push_back({text(0), text(1), text(2), text(3), text(4), sqlite3_column_double(s.get(), 5)});
        }
        return all;
    });
}

std::optional<TunedConfig> Cache::find_tuned(const std::string& kernel, const std::string& shape,
                                             const std::string& device, const std::string& arch) {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->db) return std::nullopt;
    try {
        auto s = impl_->prepare("SELECT config, microseconds FROM tuned WHERE kernel = ? AND shape = ? AND device = ? "
                                "AND arch = ?");
        int col = 0;
        for (const std::string* v : {&kernel, &shape, &device, &arch})
            sqlite3_bind_text(s.get(), ++col, v->c_str(), -1, SQLITE_TRANSIENT);
        if (impl_->step(s.get()) != SQLITE_ROW) return std::optional<TunedConfig>{};
        return std::optional<TunedConfig>{TunedConfig{kernel, shape, device, arch,
                                                      reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)),
                                                      sqlite3_column_double(s.get(), 1)}};
    } catch (const SqlFailure&) {
        return std::optional<TunedConfig>{};
    }
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
