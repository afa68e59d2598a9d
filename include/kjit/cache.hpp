// kjit/cache.hpp — the SQLite kernel cache: one database file, checksummed entries.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kjit/compile.hpp>
#include <kjit/kernel.hpp>

namespace kjit {
namespace detail {
struct CacheAccess;
}  // namespace detail

/// Bumped whenever the table layout or the meaning of a stored entry changes.
inline constexpr int cache_schema_version = 1;

/// One cached compilation.
struct CacheEntry {
    CacheKey key;
    std::string readable_id;
    std::string kernel_name;
    std::string arch;           ///< "sm_90"
    std::string nvrtc_version;  ///< nvrtc_version() of the compiling process
    std::string options;        ///< canonical options, space separated
    Compiled compiled;
    std::int64_t created_at = 0;    ///< unix seconds
    std::int64_t last_used_at = 0;  ///< unix seconds
    std::int64_t hit_count = 0;
};

/// The entry for `compiled`, the output of compile(kernel, options): key, ids, arch, NVRTC
/// version and canonical options filled in, ready for Cache::store.
[[nodiscard]] CacheEntry make_cache_entry(const Kernel& kernel, const CompileOptions& options, Compiled compiled);

/// What Cache::export_to wrote.
struct ExportReport {
    std::size_t exported = 0;  ///< entries written to the file
    std::size_t rejected = 0;  ///< failed their checksums here: left out of the file
    std::size_t winners = 0;   ///< tuned winners written to the file
};

/// What an import did.
struct ImportReport {
    std::size_t imported = 0;  ///< written into this cache
    std::size_t kept = 0;      ///< already here and valid: left as they were
    std::size_t rejected = 0;  ///< failed their checksums in the file: not imported
    std::size_t winners = 0;   ///< tuned winners added (one for a key this cache has stays as it is)
};

/// What the remote tier (kjit/remote.hpp) did: one process's counts, and the totals a cache file
/// keeps of every process that used it (`kjit cache stats`).
struct RemoteCounters {
    std::uint64_t hits = 0;        ///< entries fetched and verified
    std::uint64_t misses = 0;      ///< lookups that found nothing (a writer looks again after it claims)
    std::uint64_t errors = 0;      ///< failed exchanges (refused, broken, garbage, denied)
    std::uint64_t timeouts = 0;    ///< exchanges the server did not answer in time
    std::uint64_t rejected = 0;    ///< values refused: unsigned, untrusted, wrongly signed, damaged
    std::uint64_t skipped = 0;     ///< exchanges not tried while the circuit breaker was open
    std::uint64_t published = 0;   ///< entries written to the server
    std::uint64_t bytes_down = 0;  ///< value bytes read
    std::uint64_t bytes_up = 0;    ///< value bytes written
    RemoteCounters& operator+=(const RemoteCounters& other) noexcept;
    friend RemoteCounters operator-(RemoteCounters a, const RemoteCounters& b) noexcept;
    friend bool operator==(const RemoteCounters&, const RemoteCounters&) = default;
};

/// The kernel cache. Thread-safe. Never throws for a database it cannot use: it then keeps
/// entries in memory for the life of the object and logs one warning saying why.
class Cache {
public:
    static constexpr const char* file_name = "kjit.sqlite3";

    /// $KJIT_CACHE_DIR; else `cache/` of the kjit repository containing the working
    /// directory; else $XDG_CACHE_HOME/kjit; else ~/.cache/kjit. Throws UsageError when
    /// KJIT_CACHE_DIR is set but empty (a script's unset variable, not a wish for the default).
    [[nodiscard]] static std::filesystem::path default_directory();

    /// Opens (creating if needed) `directory/kjit.sqlite3`.
    explicit Cache(const std::filesystem::path& directory);
    ~Cache();
    Cache(Cache&&) noexcept;
    Cache& operator=(Cache&&) noexcept;

    /// What find() reads: everything, or only what loading a module needs (the cubin and the
    /// metadata; ptx and log stay empty, unread and unchecked: PTX is the larger part of an entry).
    enum class Blobs { all, cubin };

    /// The entry, if present and every checksum read matches. A checksum mismatch counts as a
    /// miss and logs a warning; the next store() replaces the bad row.
    [[nodiscard]] std::optional<CacheEntry> find(const CacheKey& key, Blobs blobs = Blobs::all);
    /// Writes the entry in one transaction (replacing any row with the same key), and drops any
    /// claim on its key in the same transaction.
    void store(const CacheEntry& entry);
    /// store() for each of `entries`, all in one transaction (a pull or an import's batch).
    void store(std::span<const CacheEntry> entries);

    /// Cross-process single-flight for compiles: before compiling a missing key, a process
    /// claims it (a row naming host, pid and an expiry). Others see `held` and wait for the
    /// entry; a claim whose owner died (same host) or expired is taken over.
    enum class Claim {
        owned,     ///< this process claimed the key: compile, then store() (which releases it)
        held,      ///< another live process is compiling it: wait, then find() again
        present,   ///< the entry is there now: find() it
        unshared,  ///< no shared database (memory mode or read-only): compile without a claim
    };
    [[nodiscard]] Claim claim(const CacheKey& key, std::chrono::seconds ttl);
    /// Gives up this process's claim (a compile that failed), so another may try.
    void release(const CacheKey& key) noexcept;

    // ---- management (kjit cache …); these need a usable database and throw Error otherwise ----

    /// Every entry, blobs included (the caller may drop them).
    [[nodiscard]] std::vector<CacheEntry> entries();
    /// The key of every entry.
    [[nodiscard]] std::vector<CacheKey> keys();
    /// Adds one process's remote-tier counts to the totals the file keeps.
    void add_remote_counters(const RemoteCounters& counts);
    /// The totals the file keeps (zero for a file no remote tier has used).
    [[nodiscard]] RemoteCounters remote_counters();
    /// What this cache found wrong with its file since it opened it, one line each: a damaged
    /// file set aside (and where it went: "damaged (…): moved it to …"), or why it works from
    /// memory ("unusable (…)"). Empty while the file is sound. Needs no database.
    [[nodiscard]] std::vector<std::string> incidents() const;
    /// How many of `keys` the file holds, read apart from this cache's connection (so also when
    /// this cache works from memory): what a warm actually left on disk. 0 without a readable file.
    [[nodiscard]] std::size_t count_stored(std::span<const CacheKey> keys) const;
    /// incidents(), then SQLite's integrity check and every entry's checksums; one line per
    /// fault, empty if sound.
    [[nodiscard]] std::vector<std::string> verify();
    /// Removes every entry (tuned winners stay); returns how many. A file too damaged to delete
    /// from (corrupt pages) is set aside as on opening it, a fresh one taking its place: 0, and
    /// an incident says where it went.
    std::size_t clear();
    /// Removes least recently used entries until the blobs total at most `max_bytes`, then
    /// compacts the file; returns how many were removed. A damaged file is set aside, as clear()
    /// does.
    std::size_t prune(std::uint64_t max_bytes);
    /// Writes the entries (of one arch, if given) and the tuned winners (kjit/tuning.hpp; of
    /// that arch's devices, if given) into a new database file. A plain arch (sm_90) takes its arch-specific entries (sm_90a) along:
    /// what a device of that arch loads. Entries failing their checksums are left out (and
    /// counted): a shipped cache holds only entries that load.
    ExportReport export_to(const std::filesystem::path& file, const std::string& arch = {});
    /// Adds the entries (and tuned winners) of another kjit cache file. Entries failing their
    /// checksums are rejected; a valid entry or a winner here is never replaced.
    ImportReport import_from(const std::filesystem::path& file);

    /// Checkpoints and closes the database; later calls work from memory, without a warning.
    /// The process-wide runtime's cache is closed this way at exit, so the file is complete.
    void close() noexcept;

    /// False when working from memory (database unusable: see the logged warning).
    [[nodiscard]] bool persistent() const noexcept;
    /// The database file (even when it could not be used).
    [[nodiscard]] const std::filesystem::path& path() const noexcept;

private:
    friend struct detail::CacheAccess;  // the files of src/jit/cache
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kjit
