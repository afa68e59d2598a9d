// kjit/remote.hpp — the fleet tier: a kernel cache on Redis shared by build boxes and GPU servers,
// behind each machine's SQLite cache (memory → SQLite → Redis). Writers sign what they publish
// (kjit/signing.hpp); readers load only entries signed by a key they trust. The server being
// down, slow, stopped or answering garbage costs at most a local compile, never a failure or a
// hang: every exchange has a time-out, and after a failure a circuit breaker keeps kjit off the
// server for a growing back-off. docs/SECURITY.md has the threat model.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <kjit/cache.hpp>
#include <kjit/signing.hpp>

namespace kjit {

enum class RemoteMode {
    read_only,   ///< fetch only (GPU servers)
    read_write,  ///< fetch, and publish what this machine compiles (build boxes); needs a signing key
};

struct RemoteOptions {
    /// redis://[USER[:PASSWORD]@]HOST[:PORT] or unix:///PATH/TO/SOCKET, either with an optional
    /// query ?prefix=P (keys start with P, for several caches on one server), &user=U&password=W.
    std::string address;
    RemoteMode mode = RemoteMode::read_only;
    std::optional<SigningKey> signing_key;  ///< a writer's; its public key is trusted too
    std::vector<PublicKey> trusted_keys;    ///< whose entries a reader loads
    std::chrono::milliseconds connect_timeout{100};
    std::chrono::milliseconds operation_timeout{2000};

    /// From KJIT_REMOTE (nothing when unset or empty), KJIT_REMOTE_MODE (read-only, the default,
    /// or read-write), KJIT_SIGNING_KEY (a secret key file) and KJIT_TRUSTED_KEYS (a file of
    /// public keys). UsageError saying what is wrong and what to set.
    [[nodiscard]] static std::optional<RemoteOptions> from_environment();
};

/// One Redis server's share of the cache. Thread-safe; never throws from the hot path (fetch,
/// publish, claim): a failure there is a miss, counted, with one warning per outage.
class RemoteCache {
public:
    /// Checks the options (UsageError: a malformed address, a writer without a signing key, a
    /// reader without trusted keys); connects only when first used.
    explicit RemoteCache(RemoteOptions options);
    /// Waits up to the operation time-out for publishes still queued, then drops them.
    ~RemoteCache();
    RemoteCache(const RemoteCache&) = delete;
    RemoteCache& operator=(const RemoteCache&) = delete;

    /// The entry stored under `key`, verified (signed by a trusted key over this key, whole, for
    /// this key), or nothing: absent, rejected, or the server unreachable.
    [[nodiscard]] std::optional<CacheEntry> fetch(const CacheKey& key);
    /// Queues `entry` to be signed, compressed and stored on a background thread (writers only;
    /// a reader's call does nothing). Also drops this process's claim on its key.
    void publish(std::shared_ptr<const CacheEntry> entry);
    /// Waits until every queued publish is written or dropped; false when `timeout` passed first.
    bool flush(std::chrono::milliseconds timeout);

    /// Cross-machine single-flight (SET NX with an expiry): before compiling a key it could not
    /// fetch, a writer claims it; while another machine holds the claim, it waits for the entry.
    enum class Claim {
        owned,     ///< this process claimed it: compile, then publish() (which releases it)
        held,      ///< another machine is compiling it: fetch again later
        unshared,  ///< a reader, or the server unreachable: compile without a claim
    };
    [[nodiscard]] Claim claim(const CacheKey& key, std::chrono::seconds ttl);
    /// Gives up this process's claim (a compile that failed).
    void release(const CacheKey& key) noexcept;

    /// What a whole-cache transfer did (push, pull).
    struct Transfer {
        std::size_t entries = 0;   ///< entries sent or received
        std::size_t present = 0;   ///< already on the other side: not sent
        std::size_t rejected = 0;  ///< failed verification (pull) or their checksums (push)
        std::size_t winners = 0;   ///< tuned winners sent or received
        std::uint64_t bytes = 0;   ///< over the wire
        double seconds = 0;
    };
    /// Publishes every entry and tuned winner of `cache` the server lacks (writers). Error when
    /// the server cannot be reached: an admin command says so rather than doing nothing.
    Transfer push(Cache& cache);
    /// Stores every verified entry and tuned winner of the server that `cache` lacks.
    Transfer pull(Cache& cache);

    [[nodiscard]] RemoteCounters counters() const noexcept;
    [[nodiscard]] const RemoteOptions& options() const noexcept;
    /// "redis://host:6379 (read-write, signing as fleet-1)", for logs and `kjit cache stats`.
    [[nodiscard]] std::string describe() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kjit
