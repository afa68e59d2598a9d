// Cross-process single-flight for compiles: a claims row (host, pid, expiry) marks who compiles
// a missing key; the others wait for its entry, and a dead owner's claim is taken over.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <kjit/cache.hpp>

#include "jit/cache/cache_impl.hpp"

namespace kjit {
using detail::sqlite::Failure;
using detail::sqlite::Transaction;

namespace {
/// Whether process `pid` on this host still runs (a claim's owner).
bool process_alive(std::int64_t pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }
}  // namespace

/// One transaction: the entry is there, or a live process holds an unexpired claim on the key,
/// or this process takes the claim (replacing an expired one or a dead owner's).
Cache::Claim Cache::Impl::claim(const CacheKey& key, std::chrono::seconds ttl) {
    const std::string hex = key.hex();
    Transaction t(*db);
    auto present = db->prepare("SELECT 1 FROM kernels WHERE key = ?");
    if (present.bind(hex).step() && !refused.contains(key)) {
        t.commit();
        return Claim::present;
    }
    auto holder = db->prepare("SELECT host, pid, expires_at FROM claims WHERE key = ?");
    const std::int64_t now = detail::unix_now();
    if (holder.bind(hex).step()) {
        const bool expired = holder.integer(2) < now;
        const bool dead = holder.text(0) == host && !process_alive(holder.integer(1));
        if (!expired && !dead) {
            t.commit();
            return Claim::held;
        }
    }
    db->prepare("INSERT OR REPLACE INTO claims (key, host, pid, expires_at) VALUES (?, ?, ?, ?)")
        .bind(hex, host, std::int64_t{::getpid()}, now + ttl.count())
        .run("taking a claim");
    t.commit();
    return Claim::owned;
}

void Cache::Impl::drop_claim(const CacheKey& key) const {
    db->prepare("DELETE FROM claims WHERE key = ?").bind(key.hex()).run("releasing a claim");
}

Cache::Claim Cache::claim(const CacheKey& key, std::chrono::seconds ttl) {
    std::lock_guard lock(impl_->mutex);
    if (impl_->memory.contains(key)) return Claim::present;
    if (!impl_->db || impl_->read_only) return Claim::unshared;
    try {
        return impl_->claim(key, ttl);
    } catch (const Failure& failure) {
        impl_->recover(failure);
        return Claim::unshared;
    }
}

void Cache::release(const CacheKey& key) noexcept {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->db || impl_->read_only) return;
    try {
        impl_->drop_claim(key);
    } catch (const Failure&) {  // an unreleased claim expires, or dies with this process
    }
}

}  // namespace kjit
