// The fleet tier (kjit/remote.hpp): one Redis server's share of the kernel cache. Reads go over
// one connection guarded by a mutex; publishes are sealed and written by a background thread on
// its own connection, off the compile path. Every exchange passes through exchange(): a circuit
// breaker that, after a failure, keeps this process off the server for a growing back-off.
#include <kjit/remote.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>
#include <kjit/error.hpp>
#include <kjit/tuning.hpp>

#include "jit/cache/entry_row.hpp"
#include "jit/cache/redis_connection.hpp"
#include "jit/cache/remote_entry.hpp"
#include "jit/cache_key.hpp"
#include "jit/file_bytes.hpp"
#include "jit/log.hpp"

namespace kjit {
namespace {
using detail::RedisConnection;
using detail::RedisEndpoint;
using detail::RedisFailure;
using Clock = std::chrono::steady_clock;

/// A KJIT_REMOTE address, parsed.
struct Address {
    RedisEndpoint endpoint;
    std::string prefix;     ///< prepended to every key
    std::string displayed;  ///< the address without its password
};

std::string url_decoded(std::string_view text, std::string_view address) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out.push_back(text[i]);
            continue;
        }
        unsigned value = 0;
        if (i + 3 > text.size() ||
            std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr != text.data() + i + 3)
            throw UsageError(fmt::format("remote cache address '{}': a '%' not followed by two hex digits", address));
        out.push_back(static_cast<char>(value));
        i += 2;
    }
    return out;
}

Address parse_address(std::string_view text) {
    const auto bad = [&](std::string_view why) {
        return UsageError(
            fmt::format("remote cache address '{}': {}; write redis://[USER[:PASSWORD]@]HOST[:PORT] or "
                        "unix:///PATH/TO/SOCKET, either with an optional ?prefix=NAME",
                        text, why));
    };
    Address a;
    std::string_view rest = text, query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    if (rest.starts_with("unix://")) {
        a.endpoint.socket_path = url_decoded(rest.substr(7), text);
        if (!a.endpoint.socket_path.starts_with('/')) throw bad("a Unix socket's path must be absolute");
    } else if (rest.starts_with("redis://")) {
        rest.remove_prefix(8);
        if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
            const std::string_view user_info = rest.substr(0, at);
            rest = rest.substr(at + 1);
            const auto colon = user_info.find(':');
            a.endpoint.user = url_decoded(user_info.substr(0, colon), text);
            if (colon != std::string_view::npos) a.endpoint.password = url_decoded(user_info.substr(colon + 1), text);
        }
        if (rest.ends_with('/')) rest.remove_suffix(1);
        if (rest.find('/') != std::string_view::npos)
            throw bad(
                "a path after the host (a database number?) is not supported: use ?prefix=NAME to share a server");
        std::string_view port = "6379";
        if (rest.starts_with('[')) {  // [IPv6]:port
            const auto close = rest.find(']');
            if (close == std::string_view::npos) throw bad("an unclosed '['");
            a.endpoint.host = std::string(rest.substr(1, close - 1));
            rest.remove_prefix(close + 1);
            if (rest.starts_with(':')) port = rest.substr(1);
            else if (!rest.empty()) throw bad("text after the ']'");
        } else {
            const auto colon = rest.find(':');
            a.endpoint.host = std::string(rest.substr(0, colon));
            if (colon != std::string_view::npos) port = rest.substr(colon + 1);
        }
        if (a.endpoint.host.empty()) throw bad("no host");
        if (std::from_chars(port.data(), port.data() + port.size(), a.endpoint.port).ptr != port.data() + port.size() ||
            a.endpoint.port <= 0 || a.endpoint.port > 65535)
            throw bad(fmt::format("'{}' is no port", port));
    } else {
        throw bad("it must start with redis:// or unix://");
    }
    for (std::size_t at = 0; at < query.size();) {
        const std::size_t end = std::min(query.find('&', at), query.size());
        const std::string_view pair = query.substr(at, end - at);
        at = end + 1;
        const auto eq = pair.find('=');
        const std::string_view name = pair.substr(0, eq);
        const std::string value = eq == std::string_view::npos ? "" : url_decoded(pair.substr(eq + 1), text);
        if (name == "prefix") a.prefix = value;
        else if (name == "user") a.endpoint.user = value;
        else if (name == "password") a.endpoint.password = value;
        else throw bad(fmt::format("unknown parameter '{}' (prefix, user and password are)", name));
    }
    if (!a.endpoint.user.empty() && a.endpoint.password.empty())
        throw bad(fmt::format("user '{}' without a password", a.endpoint.user));
    a.displayed = a.endpoint.socket_path.empty() ? fmt::format("redis://{}:{}", a.endpoint.host, a.endpoint.port)
                                                 : "unix://" + a.endpoint.socket_path;
    if (!a.prefix.empty()) a.displayed += "?prefix=" + a.prefix;
    return a;
}

std::string read_whole_file(const std::string& file, const char* variable) {
    if (auto bytes = detail::file_bytes(file)) return *std::move(bytes);
    throw UsageError(
        fmt::format("{}={}: cannot read the file (does it exist, may this user read it?)", variable, file));
}

/// Escapes SCAN MATCH's pattern characters in a literal prefix.
std::string glob_literal(std::string_view text) {
    std::string out;
    for (const char c : text) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

/// The remote name of a winner: its identity (all but the configuration and time), hashed.
std::string winner_identity(const TunedConfig& w) {
    const std::string identity = fmt::format("{}\n{}\n{}\n{}\n{}\n{}", w.kernel, w.shape, w.device, w.arch, w.driver,
                                             w.source_hash);
    return fmt::format("{:016x}", detail::checksum(identity));
}

/// Keys are "<prefix>kjit:1:<kind>:<name>": the 1 is the envelope's format version.
constexpr std::string_view key_space = "kjit:1:";

/// A server's error reply where the exchange needed another answer (an ACL denial, OOM under
/// noeviction): counted as an error, but the server answers, so the breaker stays closed.
struct ServerRefused {
    std::string what;
};

}  // namespace

std::optional<RemoteOptions> RemoteOptions::from_environment() {
    const char* address = std::getenv("KJIT_REMOTE");
    if (!address || !*address) return std::nullopt;
    RemoteOptions o;
    o.address = address;
    if (const char* mode = std::getenv("KJIT_REMOTE_MODE"); mode && *mode) {
        const std::string_view m = mode;
        if (m == "read-only") o.mode = RemoteMode::read_only;
        else if (m == "read-write") o.mode = RemoteMode::read_write;
        else throw UsageError(fmt::format("KJIT_REMOTE_MODE={}: write read-only or read-write", m));
    }
    if (const char* file = std::getenv("KJIT_SIGNING_KEY"); file && *file)
        o.signing_key = parse_signing_key(read_whole_file(file, "KJIT_SIGNING_KEY"), file);
    if (const char* file = std::getenv("KJIT_TRUSTED_KEYS"); file && *file)
        o.trusted_keys = parse_trusted_keys(read_whole_file(file, "KJIT_TRUSTED_KEYS"), file);
    return o;
}

struct RemoteCache::Impl {
    explicit Impl(RemoteOptions o) : options(std::move(o)), address(parse_address(options.address)) {
        if (options.mode == RemoteMode::read_write && !options.signing_key)
            throw UsageError(fmt::format(
                "the remote cache {} is read-write but no signing key is given: a writer signs what it publishes "
                "(set KJIT_SIGNING_KEY to a secret key file from kjit keygen), or make it read-only",
                address.displayed));
        trusted = options.trusted_keys;
        if (options.signing_key) {
            const PublicKey own = options.signing_key->public_key();
            if (std::ranges::none_of(trusted, [&](const PublicKey& k) { return k.name == own.name; }))
                trusted.push_back(own);
        }
        if (trusted.empty())
            throw UsageError(fmt::format(
                "the remote cache {} has no trusted keys: a reader loads only entries signed by a key it trusts "
                "(set KJIT_TRUSTED_KEYS to a file of public keys, the NAME.public lines kjit keygen writes)",
                address.displayed));
    }

    RemoteOptions options;
    Address address;
    std::vector<PublicKey> trusted;
    const std::string owner = fmt::format(
        "{}:{}",
        [] {
            char name[256] = {};
            gethostname(name, sizeof name - 1);
            return std::string(name);
        }(),
        getpid());

    struct Counters {
        std::atomic<std::uint64_t> hits{0}, misses{0}, errors{0}, timeouts{0}, rejected{0}, skipped{0}, published{0},
            bytes_down{0}, bytes_up{0};
    } counts;

    // The breaker: after a failure, no exchange until `closed_at`; each further failure doubles
    // the wait (up to max_backoff); a success resets it.
    static constexpr std::chrono::milliseconds first_backoff{1000}, max_backoff{60'000};
    std::mutex breaker_mutex;
    int failures = 0;
    Clock::time_point closed_at{};
    std::atomic<bool> warned_refusal{false}, warned_rejection{false};

    std::mutex read_mutex;
    std::unique_ptr<RedisConnection> reader;  // under read_mutex

    // The publisher thread and its queue.
    static constexpr std::size_t max_queued = 1024;
    std::mutex queue_mutex;
    std::condition_variable queue_changed;
    std::deque<std::shared_ptr<const CacheEntry>> queue;
    std::size_t writing = 0;  // taken from the queue, not yet written or dropped
    bool stopping = false;
    std::thread publisher;
    std::unique_ptr<RedisConnection> writer;  // the publisher thread's own

    [[nodiscard]] std::string key_of(std::string_view kind, std::string_view name) const {
        return fmt::format("{}{}{}:{}", address.prefix, key_space, kind, name);
    }

    [[nodiscard]] bool writable() const { return options.mode == RemoteMode::read_write; }

    /// `work(connection)` over `connection` (connected first if need be), or nothing: the breaker
    /// open, or the exchange failed (counted; the breaker opens; one warning per outage).
    template <class Work>
    auto exchange(std::unique_ptr<RedisConnection>& connection, Work&& work)
        -> std::optional<decltype(work(*connection))> {
        {
            std::lock_guard lock(breaker_mutex);
            if (failures > 0 && Clock::now() < closed_at) {
                ++counts.skipped;
                return std::nullopt;
            }
        }
        try {
            if (!connection)
                connection = std::make_unique<RedisConnection>(address.endpoint, options.connect_timeout,
                                                               options.operation_timeout);
            auto result = work(*connection);
            succeeded();
            return result;
        } catch (const RedisFailure& f) {
            connection.reset();  // a time-out leaves a reply in flight: never reuse the stream
            failed(f);
        } catch (const ServerRefused& r) {
            ++counts.errors;
            if (!warned_refusal.exchange(true))
                detail::warn(
                    fmt::format("remote cache {}: the server refused: {} (further refusals are counted in "
                                "kjit cache stats)",
                                address.displayed, r.what));
        }
        return std::nullopt;
    }

    void succeeded() {
        std::lock_guard lock(breaker_mutex);
        if (failures > 0) detail::debug(fmt::format("remote cache {} answers again", address.displayed));
        failures = 0;
    }

    void failed(const RedisFailure& f) {
        ++(f.timed_out ? counts.timeouts : counts.errors);
        std::lock_guard lock(breaker_mutex);
        const auto backoff = std::min<std::chrono::milliseconds>(first_backoff * (1LL << std::min(failures, 10)),
                                                                 max_backoff);
        closed_at = Clock::now() + backoff;
        const std::string message = fmt::format("remote cache {}: {}{}; working without it for {:.2g} s",
                                                address.displayed, f.what, f.timed_out ? " (timed out)" : "",
                                                backoff.count() / 1000.0);
        if (failures++ == 0) detail::warn(message + " (compiling locally what it would have served)");
        else detail::debug(message);
    }

    std::optional<CacheEntry> fetch(const CacheKey& key) {
        const std::string name = key_of("entry", key.hex());
        // The connection is held for the exchange only: verifying and decompressing run in parallel.
        const auto value = [&] {
            std::lock_guard lock(read_mutex);
            return exchange(reader, [&](RedisConnection& c) -> std::optional<std::string> {
                auto reply = c.command({"GET", name});
                if (reply.is_nil()) return std::nullopt;
                if (reply.is_error()) throw ServerRefused{std::string(reply.text())};
                return std::string(reply.text());
            });
        }();
        if (!value) return std::nullopt;  // counted by exchange
        if (!*value) {
            ++counts.misses;
            return std::nullopt;
        }
        counts.bytes_down += (*value)->size();
        auto opened = detail::open_entry(**value, name, trusted, key);
        if (!opened.entry) {
            reject(name, opened.rejected);
            return std::nullopt;
        }
        ++counts.hits;
        return std::move(opened.entry);
    }

    void reject(std::string_view name, std::string_view why) {
        ++counts.rejected;
        const std::string message = fmt::format(
            "remote cache {}: rejected the value of {}: {}; compiling locally instead", address.displayed, name, why);
        if (!warned_rejection.exchange(true))
            detail::warn(message + " (further rejections are counted in kjit cache stats)");
        else detail::debug(message);
    }

    Claim claim(const CacheKey& key, std::chrono::seconds ttl) {
        if (!writable()) return Claim::unshared;
        const std::string name = key_of("claim", key.hex()), seconds = std::to_string(ttl.count());
        std::lock_guard lock(read_mutex);
        const auto got = exchange(reader, [&](RedisConnection& c) {
            auto reply = c.command({"SET", name, owner, "NX", "EX", seconds});
            if (reply.is_error()) throw ServerRefused{std::string(reply.text())};
            return reply.is_ok();
        });
        if (!got) return Claim::unshared;
        return *got ? Claim::owned : Claim::held;
    }

    void release(const CacheKey& key) {
        if (!writable()) return;
        const std::string name = key_of("claim", key.hex());
        std::lock_guard lock(read_mutex);
        (void)exchange(reader, [&](RedisConnection& c) { return c.command({"DEL", name}).is_error(); });
    }

    void publish(std::shared_ptr<const CacheEntry> entry) {
        if (!writable()) return;
        std::lock_guard lock(queue_mutex);
        if (queue.size() >= max_queued) {  // the server is far behind: this one stays local
            ++counts.skipped;
            return;
        }
        queue.push_back(std::move(entry));
        if (!publisher.joinable()) publisher = std::thread([this] { publish_queued(); });
        queue_changed.notify_all();
    }

    void publish_queued() {
        std::unique_lock lock(queue_mutex);
        for (;;) {
            queue_changed.wait(lock, [&] { return stopping || !queue.empty(); });
            if (queue.empty()) return;  // stopping, and nothing left
            auto entry = std::move(queue.front());
            queue.pop_front();
            ++writing;
            lock.unlock();
            write_entry(*entry);
            lock.lock();
            --writing;
            queue_changed.notify_all();
        }
    }

    void write_entry(const CacheEntry& entry) {
        const std::string name = key_of("entry", entry.key.hex()), claim = key_of("claim", entry.key.hex());
        std::string value;
        try {
            value = detail::seal_entry(entry, name, *options.signing_key);
        } catch (const Error& e) {
            detail::warn(
                fmt::format("remote cache {}: not publishing {}: {}", address.displayed, entry.readable_id, e.what()));
            return;
        }
        const auto written = exchange(writer, [&](RedisConnection& c) {
            const std::vector<std::vector<std::string_view>> commands{{"SET", name, value}, {"DEL", claim}};
            auto replies = c.pipeline(commands);
            if (replies[0].is_error()) throw ServerRefused{std::string(replies[0].text())};
            return true;
        });
        if (written) {
            ++counts.published;
            counts.bytes_up += value.size();
        }
    }

    bool flush(std::chrono::milliseconds timeout) {
        std::unique_lock lock(queue_mutex);
        return queue_changed.wait_for(lock, timeout, [&] { return queue.empty() && writing == 0; });
    }

    ~Impl() {
        flush(options.operation_timeout);
        {
            std::lock_guard lock(queue_mutex);
            if (!queue.empty())
                detail::warn(fmt::format("remote cache {}: {} entries not published (the server is slow or down)",
                                         address.displayed, queue.size()));
            queue.clear();
            stopping = true;
            queue_changed.notify_all();
        }
        if (publisher.joinable()) publisher.join();
    }

    /// A connection for a whole-cache transfer: no breaker, and a failure is the command's error.
    [[nodiscard]] RedisConnection connect_for(std::string_view doing) const {
        try {
            return RedisConnection(address.endpoint, options.connect_timeout, options.operation_timeout);
        } catch (const RedisFailure& f) {
            throw Error(fmt::format("cannot {} the remote cache {}: {}", doing, address.displayed, f.what));
        }
    }

    /// A whole-cache transfer: `work(connection, report)` over a connection of its own, timed; a
    /// failure is the command's Error ("cannot push to the remote cache …: why").
    template <class Work>
    Transfer transfer(std::string_view doing, Work&& work) const {
        const auto started = Clock::now();
        RedisConnection connection = connect_for(doing);
        Transfer t;
        try {
            work(connection, t);
        } catch (const RedisFailure& f) {
            throw Error(fmt::format("cannot {} the remote cache {}: {}{}", doing, address.displayed, f.what,
                                    f.timed_out ? " (timed out)" : ""));
        } catch (const ServerRefused& refused) {
            throw Error(fmt::format("cannot {} the remote cache {}: the server refused: {}", doing, address.displayed,
                                    refused.what));
        }
        t.seconds = std::chrono::duration<double>(Clock::now() - started).count();
        return t;
    }

    /// Every key of `kind` on the server.
    [[nodiscard]] std::vector<std::string> names_of(RedisConnection& c, std::string_view kind) const {
        return c.scan(glob_literal(fmt::format("{}{}{}:", address.prefix, key_space, kind)) + "*");
    }
};

RemoteCache::RemoteCache(RemoteOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
RemoteCache::~RemoteCache() = default;

std::optional<CacheEntry> RemoteCache::fetch(const CacheKey& key) {
    try {
        return impl_->fetch(key);
    } catch (const std::exception& e) {  // bad_alloc on a huge value, say: a miss like any other
        detail::debug(fmt::format("remote cache: fetching {}: {}", key.hex(), e.what()));
        ++impl_->counts.errors;
        return std::nullopt;
    }
}

void RemoteCache::publish(std::shared_ptr<const CacheEntry> entry) { impl_->publish(std::move(entry)); }
bool RemoteCache::flush(std::chrono::milliseconds timeout) { return impl_->flush(timeout); }
RemoteCache::Claim RemoteCache::claim(const CacheKey& key, std::chrono::seconds ttl) { return impl_->claim(key, ttl); }

void RemoteCache::release(const CacheKey& key) noexcept {
    try {
        impl_->release(key);
    } catch (...) {
        // the claim expires by itself
    }
}

namespace {
/// Work in batches of at most this many values (pipelined: one round trip per batch).
constexpr std::size_t batch_size = 64;
}  // namespace

RemoteCache::Transfer RemoteCache::push(Cache& cache) {
    Impl& r = *impl_;
    if (!r.writable())
        throw UsageError(
            fmt::format("the remote cache {} is read-only here: set KJIT_REMOTE_MODE=read-write and "
                        "KJIT_SIGNING_KEY to push",
                        r.address.displayed));
    Transfer t = r.transfer("push to", [&](RedisConnection& c, Transfer& t) {
        // Sends the values of `names` the server lacks; `value(i)` seals the i-th (nothing: skip it).
        const auto send_missing = [&](const std::vector<std::string>& names, auto&& value, std::size_t& sent) {
            for (std::size_t from = 0; from < names.size(); from += batch_size) {
                const std::size_t to = std::min(names.size(), from + batch_size);
                std::vector<std::vector<std::string_view>> exists;
                for (std::size_t i = from; i < to; ++i) exists.push_back({"EXISTS", names[i]});
                const auto present = c.pipeline(exists);
                std::vector<std::string> values;
                std::vector<std::vector<std::string_view>> sets;
                values.reserve(to - from);
                for (std::size_t i = from; i < to; ++i) {
                    if (present[i - from].is_error()) throw ServerRefused{std::string(present[i - from].text())};
                    if (present[i - from].integer() == 1) {
                        ++t.present;
                        continue;
                    }
                    if (auto v = value(i)) {
                        values.push_back(*std::move(v));
                        sets.push_back({"SET", names[i], values.back()});
                    }
                }
                for (const auto& reply : c.pipeline(sets))
                    if (reply.is_error()) throw ServerRefused{std::string(reply.text())};
                for (const auto& v : values) t.bytes += v.size();
                sent += sets.size();
            }
        };
        const std::vector<CacheKey> keys = cache.keys();
        std::vector<std::string> names;
        for (const CacheKey& k : keys) names.push_back(r.key_of("entry", k.hex()));
        send_missing(
            names,
            [&](std::size_t i) -> std::optional<std::string> {
                const auto entry = cache.find(keys[i]);
                if (!entry) {  // failed its checksums here: never shipped
                    ++t.rejected;
                    return std::nullopt;
                }
                return detail::seal_entry(*entry, names[i], *r.options.signing_key);
            },
            t.entries);
        const std::vector<TunedConfig> winners = tuned_configs(cache);
        std::vector<std::string> winner_names;
        for (const TunedConfig& w : winners) winner_names.push_back(r.key_of("winner", winner_identity(w)));
        send_missing(
            winner_names,
            [&](std::size_t i) -> std::optional<std::string> {
                return detail::seal_winner(winners[i], winner_names[i], *r.options.signing_key);
            },
            t.winners);
    });
    r.counts.published += t.entries;
    r.counts.bytes_up += t.bytes;
    return t;
}

RemoteCache::Transfer RemoteCache::pull(Cache& cache) {
    Impl& r = *impl_;
    Transfer t = r.transfer("pull from", [&](RedisConnection& c, Transfer& t) {
        // Reads the values of `names` in batches and hands each to `take(index, value)`.
        const auto read_all = [&](const std::vector<std::string>& names, auto&& take) {
            for (std::size_t from = 0; from < names.size(); from += batch_size) {
                const std::size_t to = std::min(names.size(), from + batch_size);
                std::vector<std::vector<std::string_view>> gets;
                for (std::size_t i = from; i < to; ++i) gets.push_back({"GET", names[i]});
                const auto values = c.pipeline(gets);
                for (std::size_t i = from; i < to; ++i) {
                    const auto& v = values[i - from];
                    if (v.is_nil()) continue;  // evicted or deleted since the scan
                    if (v.is_error()) throw ServerRefused{std::string(v.text())};
                    t.bytes += v.text().size();
                    take(i, v.text());
                }
            }
        };
        const std::string entry_prefix = r.key_of("entry", "");
        std::unordered_set<CacheKey, detail::CacheKeyHash> local;
        for (const CacheKey& k : cache.keys()) local.insert(k);
        std::vector<std::string> wanted;
        std::vector<CacheKey> wanted_keys;
        for (std::string& name : r.names_of(c, "entry")) {
            const CacheKey key = detail::parse_key(std::string_view(name).substr(entry_prefix.size()));
            if (local.contains(key)) {
                ++t.present;
                continue;
            }
            wanted.push_back(std::move(name));
            wanted_keys.push_back(key);
        }
        std::vector<CacheEntry> opened_batch;  // stored a batch per transaction
        const auto store_batch = [&] {
            cache.store(opened_batch);
            t.entries += opened_batch.size();
            opened_batch.clear();
        };
        read_all(wanted, [&](std::size_t i, std::string_view value) {
            auto opened = detail::open_entry(value, wanted[i], r.trusted, wanted_keys[i]);
            if (!opened.entry) {
                r.reject(wanted[i], opened.rejected);
                ++t.rejected;
                return;
            }
            opened_batch.push_back(*std::move(opened.entry));
            if (opened_batch.size() == batch_size) store_batch();
        });
        store_batch();
        std::set<std::string> local_winners;
        for (const TunedConfig& w : tuned_configs(cache)) local_winners.insert(winner_identity(w));
        const std::string winner_prefix = r.key_of("winner", "");
        std::vector<std::string> winner_names;
        for (std::string& name : r.names_of(c, "winner")) {
            if (local_winners.contains(name.substr(winner_prefix.size()))) continue;
            winner_names.push_back(std::move(name));
        }
        read_all(winner_names, [&](std::size_t i, std::string_view value) {
            const std::string& name = winner_names[i];
            auto opened = detail::open_winner(value, name, r.trusted);
            // Signed over its name, so a winner copied under another identity fails above; one signed
            // under a name that is not its identity was never written by kjit.
            if (opened.winner && r.key_of("winner", winner_identity(*opened.winner)) != name)
                opened = {std::nullopt, "its name is not the hash of what it is for"};
            if (!opened.winner) {
                r.reject(name, opened.rejected);
                ++t.rejected;
                return;
            }
            store_tuned(cache, *opened.winner);
            ++t.winners;
        });
    });
    r.counts.hits += t.entries;
    r.counts.bytes_down += t.bytes;
    return t;
}

RemoteCounters RemoteCache::counters() const noexcept {
    const auto& c = impl_->counts;
    return {c.hits.load(),    c.misses.load(),    c.errors.load(),     c.timeouts.load(), c.rejected.load(),
            c.skipped.load(), c.published.load(), c.bytes_down.load(), c.bytes_up.load()};
}

const RemoteOptions& RemoteCache::options() const noexcept { return impl_->options; }

std::string RemoteCache::describe() const {
    const auto& o = impl_->options;
    return o.mode == RemoteMode::read_write
               ? fmt::format("{} (read-write, signing as {})", impl_->address.displayed, o.signing_key->name)
               : fmt::format("{} (read-only, trusting {} keys)", impl_->address.displayed, impl_->trusted.size());
}

}  // namespace kjit
