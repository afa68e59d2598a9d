// Ed25519 keys for remote cache entries (kjit/signing.hpp), on libsodium.
#include <kjit/signing.hpp>

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <kjit/error.hpp>

namespace kjit {
namespace {

void init_sodium() {
    static const int ready = sodium_init();  // 0 first time, 1 after; -1: no usable randomness
    if (ready < 0) throw Error("libsodium could not initialise (sodium_init): no source of randomness");
}

bool valid_name(std::string_view name) {
    return !name.empty() && name.size() <= 64 && std::ranges::all_of(name, [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '-' || c == '_';
    });
}

std::string base64(std::span<const std::uint8_t> bytes) {
    std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
    sodium_bin2base64(out.data(), out.size(), bytes.data(), bytes.size(), sodium_base64_VARIANT_ORIGINAL);
    out.resize(out.find('\0'));
    return out;
}

/// A "NAME:BASE64" line of exactly N key bytes.
template <std::size_t N>
std::pair<std::string, std::array<std::uint8_t, N>> parse_line(std::string_view line, const std::string& source,
                                                               std::string_view what) {
    const auto bad = [&](std::string_view why) {
        return UsageError(
            fmt::format("{}: {}: {} (a line is NAME:BASE64, as kjit keygen writes it)", source, what, why));
    };
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) throw bad("no ':' between the name and the key");
    const std::string name(line.substr(0, colon));
    if (!valid_name(name)) throw bad(fmt::format("'{}' is no key name (letters, digits, '.', '-', '_')", name));
    const std::string_view encoded = line.substr(colon + 1);
    std::array<std::uint8_t, N> bytes{};
    std::size_t length = 0;
    if (sodium_base642bin(bytes.data(), bytes.size(), encoded.data(), encoded.size(), nullptr, &length, nullptr,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        length != N)
        throw bad(fmt::format("key '{}' is not {} bytes of base64", name, N));
    return {name, bytes};
}

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

void write_new_file(const std::filesystem::path& path, const std::string& text, mode_t mode) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        throw UsageError(fmt::format(
            "cannot create {}: {}", path.string(),
            errno == EEXIST ? "it exists (kjit keygen never overwrites a key)" : std::string(std::strerror(errno))));
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written) {
        std::filesystem::remove(path);
        throw Error(fmt::format("writing {} failed", path.string()));
    }
}

}  // namespace

std::string PublicKey::line() const { return name + ":" + base64(bytes); }

PublicKey SigningKey::public_key() const {
    PublicKey key{name, {}};
    crypto_sign_ed25519_sk_to_pk(key.bytes.data(), secret.data());
    return key;
}

std::string SigningKey::line() const { return name + ":" + base64(secret); }

std::array<std::uint8_t, 64> SigningKey::sign(std::span<const std::uint8_t> message) const {
    init_sodium();
    std::array<std::uint8_t, 64> signature{};
    crypto_sign_detached(signature.data(), nullptr, message.data(), message.size(), secret.data());
    return signature;
}

SigningKey generate_signing_key(std::string_view name) {
    if (!valid_name(name))
        throw UsageError(
            fmt::format("'{}' is no key name: use letters, digits, '.', '-' and '_' (e.g. fleet-1, "
                        "numbered to rotate)",
                        name));
    init_sodium();
    SigningKey key{std::string(name), {}};
    std::array<std::uint8_t, 32> pk{};
    crypto_sign_keypair(pk.data(), key.secret.data());
    return key;
}

bool verify_signature(const PublicKey& key, std::span<const std::uint8_t> message,
                      std::span<const std::uint8_t, 64> signature) {
    init_sodium();
    return crypto_sign_verify_detached(signature.data(), message.data(), message.size(), key.bytes.data()) == 0;
}

SigningKey parse_signing_key(std::string_view text, const std::string& source) {
    auto [name, secret] = parse_line<64>(trimmed(text), source, "a secret key");
    SigningKey key{std::move(name), secret};
    // The secret holds its public half: a file whose halves disagree was not written by keygen.
    std::array<std::uint8_t, 32> derived{}, stored{};
    std::array<std::uint8_t, 64> rebuilt{};
    crypto_sign_seed_keypair(derived.data(), rebuilt.data(), secret.data());  // from the seed, its first half
    crypto_sign_ed25519_sk_to_pk(stored.data(), secret.data());
    if (derived != stored)
        throw UsageError(
            fmt::format("{}: a secret key: its two halves do not belong together (not written by kjit "
                        "keygen)",
                        source));
    return key;
}

std::vector<PublicKey> parse_trusted_keys(std::string_view text, const std::string& source) {
    std::vector<PublicKey> keys;
    std::size_t number = 0;
    for (std::size_t at = 0; at <= text.size();) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line = trimmed(text.substr(at, end - at));
        at = end + 1;
        ++number;
        if (line.empty() || line.front() == '#') continue;
        auto [name, bytes] = parse_line<32>(line, fmt::format("{} line {}", source, number), "a public key");
        if (std::ranges::any_of(keys, [&](const PublicKey& k) { return k.name == name; }))
            throw UsageError(fmt::format("{} line {}: the key name '{}' is given twice", source, number, name));
        keys.push_back({std::move(name), bytes});
    }
    return keys;
}

std::pair<std::filesystem::path, std::filesystem::path> write_key_pair(const SigningKey& key,
                                                                       const std::filesystem::path& dir) {
    const auto secret = dir / (key.name + ".secret"), pub = dir / (key.name + ".public");
    if (std::filesystem::exists(pub))
        throw UsageError(fmt::format("cannot create {}: it exists (kjit keygen never overwrites a key)", pub.string()));
    write_new_file(secret, key.line() + "\n", 0600);
    write_new_file(pub, key.public_key().line() + "\n", 0644);
    return {secret, pub};
}

}  // namespace kjit
