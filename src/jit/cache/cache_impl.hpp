// Cache::Impl: the state behind a Cache, shared by the files of src/jit/cache (the store, the
// claims, damage recovery, the admin commands, tuned winners). Every method expects `mutex` held.
#pragma once
#include <sys/types.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <kjit/cache.hpp>
#include <kjit/error.hpp>

#include "jit/cache/sqlite.hpp"
#include "jit/cache_key.hpp"

namespace kjit {

namespace detail {
/// Seconds since the epoch: created, last-used and expiry times.
std::int64_t unix_now();

/// Identity of a file, so that a file replaced under us is never set aside by mistake.
struct FileId {
    dev_t device = 0;
    ino_t inode = 0;
    friend bool operator==(const FileId&, const FileId&) = default;
};
FileId file_id(const std::filesystem::path& p);

/// The kernels columns this kjit needs that database `db` ("main", an attached name) lacks,
/// comma-separated; "" when it has them all or has no kernels table yet.
std::string missing_kernel_columns(const sqlite::Database& database, std::string_view db);
}  // namespace detail

struct Cache::Impl {
    std::filesystem::path path;
    std::mutex mutex;
    std::optional<detail::sqlite::Database> db;  // empty in memory mode
    bool read_only = false;                      // reads from db, stores to memory
    bool warned = false;
    // Hits are counted here and written in batches: a cache hit must not pay for a write.
    std::unordered_map<CacheKey, std::int64_t, detail::CacheKeyHash> pending_hits;
    std::int64_t pending_total = 0;
    // Prepared once (all blobs, cubin only); declared after db, so finalized before it closes.
    std::array<std::optional<detail::sqlite::Statement>, 2> find_statements;
    detail::FileId opened;  // the file open() opened
    // Rows read here that failed a checksum: claim() does not call them present (they are to be
    // replaced), so a waiter never re-reads a bad row and warns twice.
    std::unordered_set<CacheKey, detail::CacheKeyHash> refused;
    std::unordered_map<CacheKey, CacheEntry, detail::CacheKeyHash> memory;  // entries not written to db
    // What went wrong with the file since it was opened (damage set aside and where, memory mode):
    // verify() reports these before its own checks.
    std::vector<std::string> incidents;
    const std::string host;

    Impl();
    ~Impl() { drop_database(); }

    // cache.cpp: the store
    void open();
    std::optional<CacheEntry> read(const CacheKey& key, Blobs blobs);
    void write(std::span<const CacheEntry> entries);  ///< in one transaction
    void insert(const CacheEntry& e) const;
    void flush_hits();
    void forget_hits() noexcept;
    /// Writes pending hit counts and closes the database (memory mode from here on).
    void drop_database() noexcept;
    void warn_once(const std::string& message);

    // claims.cpp: cross-process single-flight
    Claim claim(const CacheKey& key, std::chrono::seconds ttl);
    void drop_claim(const CacheKey& key) const;

    // recovery.cpp: what a failure does to the cache
    /// A damaged file is set aside and a fresh database takes its place; anything else leaves
    /// the database for memory.
    void recover(const detail::sqlite::Failure& failure);
    void set_aside(const detail::sqlite::Failure& failure);
    void to_memory(const detail::sqlite::Failure& failure);

    /// Runs `work` with the database, or throws Error when this cache works from memory or the
    /// work fails (management commands: kjit cache …, tuned winners). With `set_damaged_aside`, a
    /// damaged file is set aside instead (a fresh database takes its place) and `work` is not
    /// retried: the result is a default-constructed value.
    template <class Work>
    auto with_database(Work&& work, bool set_damaged_aside = false);
};

template <class Work>
auto Cache::Impl::with_database(Work&& work, bool set_damaged_aside) {
    std::lock_guard lock(mutex);
    if (!db)
        throw Error(fmt::format("the kernel cache {} cannot be used (see the warning above): nothing to manage",
                                path.string()));
    try {
        flush_hits();
        return work(*db);
    } catch (const detail::sqlite::Failure& failure) {
        if (!set_damaged_aside || !failure.damaged() || read_only)
            throw Error(fmt::format("kernel cache {}: {}", path.string(), failure.what));
        set_aside(failure);
        if constexpr (!std::is_void_v<decltype(work(*db))>) return decltype(work(*db)){};
    }
}

namespace detail {
/// What tuning.cpp needs of a Cache: its Impl.
struct CacheAccess {
    static Cache::Impl& impl(Cache& cache) noexcept { return *cache.impl_; }
};
}  // namespace detail

}  // namespace kjit
