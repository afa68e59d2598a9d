// A cache entry (or a tuned winner) as the remote tier stores it: an envelope a reader can check before it trusts a
// byte — magic, format version, the signer's key name, the entry's sizes, the entry compressed
// (zstd), its BLAKE2b-256 hash, and an Ed25519 signature over the remote key and all of the
// above, so that a value copied under another key fails. Local bookkeeping (when created, last
// used, hits) does not travel.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <kjit/cache.hpp>

#include <kjit/signing.hpp>
#include <kjit/tuning.hpp>

namespace kjit::detail {

/// The envelope of `entry`, to be stored under `remote_key`, signed by `signer`.
[[nodiscard]] std::string seal_entry(const CacheEntry& entry, std::string_view remote_key, const SigningKey& signer);

/// What a value read under `remote_key` held: the entry, where it is signed over that key by one
/// of `trusted`, whole and unaltered, and for `expected`; else why it was rejected.
struct OpenedEntry {
    std::optional<CacheEntry> entry;
    std::string rejected;
};
[[nodiscard]] OpenedEntry open_entry(std::string_view value, std::string_view remote_key,
                                     std::span<const PublicKey> trusted, const CacheKey& expected);

/// A tuned winner's envelope, as an entry's (another magic, so neither opens as the other).
[[nodiscard]] std::string seal_winner(const TunedConfig& winner, std::string_view remote_key, const SigningKey& signer);
struct OpenedWinner {
    std::optional<TunedConfig> winner;
    std::string rejected;
};
[[nodiscard]] OpenedWinner open_winner(std::string_view value, std::string_view remote_key,
                                       std::span<const PublicKey> trusted);

}  // namespace kjit::detail
