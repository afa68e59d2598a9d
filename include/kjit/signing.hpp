// kjit/signing.hpp — Ed25519 keys that sign the kernel cache's remote entries (libsodium), named
// so that a key can be rotated: a writer holds one secret key, a reader a list of trusted public keys. On disk, as
// Nix writes its binary-cache keys, one "NAME:BASE64" line: a secret key file (mode 0600) holds
// the 64-byte secret key, a trusted-keys file one public key a line ('#' comments allowed).
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kjit {

struct PublicKey {
    std::string name;
    std::array<std::uint8_t, 32> bytes{};
    /// "NAME:BASE64", the line a trusted-keys file holds.
    [[nodiscard]] std::string line() const;
};

struct SigningKey {
    std::string name;
    std::array<std::uint8_t, 64> secret{};  ///< libsodium's: seed, then the public key
    [[nodiscard]] PublicKey public_key() const;
    /// "NAME:BASE64", the line a secret key file holds.
    [[nodiscard]] std::string line() const;
    /// The detached Ed25519 signature of `message`.
    [[nodiscard]] std::array<std::uint8_t, 64> sign(std::span<const std::uint8_t> message) const;
};

/// A fresh key pair named `name` (letters, digits, '.', '-', '_'; as "fleet-1": numbered for rotation).
[[nodiscard]] SigningKey generate_signing_key(std::string_view name);
/// Whether `signature` is `key`'s over `message`.
[[nodiscard]] bool verify_signature(const PublicKey& key, std::span<const std::uint8_t> message,
                                    std::span<const std::uint8_t, 64> signature);

/// Parsers of the lines above; UsageError saying what is wrong with the text (`source` names it).
[[nodiscard]] SigningKey parse_signing_key(std::string_view text, const std::string& source);
[[nodiscard]] std::vector<PublicKey> parse_trusted_keys(std::string_view text, const std::string& source);

/// Writes `key` to `dir`/NAME.secret (mode 0600) and its public key to `dir`/NAME.public; refuses
/// (UsageError) to overwrite either. Returns the two paths.
std::pair<std::filesystem::path, std::filesystem::path> write_key_pair(const SigningKey& key,
                                                                       const std::filesystem::path& dir);

}  // namespace kjit
