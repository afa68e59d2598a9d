// The remote tier's signed, compressed entry envelope (remote_entry.hpp).
#include "jit/cache/remote_entry.hpp"

#include <sodium.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <kjit/error.hpp>

namespace kjit::detail {
namespace {

constexpr std::string_view entry_magic = "kjit.ent", winner_magic = "kjit.win";
constexpr std::uint32_t format_version = 1;
constexpr std::uint64_t max_entry_bytes = 1ULL << 30;  // a larger claim is garbage, not a kernel
constexpr std::size_t hash_bytes = 32, signature_bytes = 64;

/// Appends fixed-width little-endian integers and length-prefixed fields.
struct Writer {
    std::string out;
    template <class T>
    void number(T v) {
        for (std::size_t i = 0; i < sizeof(T); ++i)
            out.push_back(static_cast<char>(static_cast<std::uint64_t>(v) >> (8 * i)));
    }
    void bytes(std::string_view b) {
        number<std::uint64_t>(b.size());
        out.append(b);
    }
};

/// Reads what Writer wrote; every read checks what is left, so a short or lying value throws.
struct Reader {
    std::string_view in;
    struct Short {};
    std::string_view take(std::size_t n) {
        if (n > in.size()) throw Short{};
        const auto part = in.substr(0, n);
        in.remove_prefix(n);
        return part;
    }
    template <class T>
    T number() {
        const auto b = take(sizeof(T));
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) v |= std::uint64_t(static_cast<unsigned char>(b[i])) << (8 * i);
        return static_cast<T>(v);
    }
    std::string_view bytes() { return take(number<std::uint64_t>()); }
};

std::string serialize(const CacheEntry& e) {
    Writer w;
    w.number(e.key.high);
    w.number(e.key.low);
    for (const std::string* s :
         {&e.readable_id, &e.kernel_name, &e.arch, &e.nvrtc_version, &e.options, &e.compiled.ptx, &e.compiled.log})
        w.bytes(*s);
    w.bytes({reinterpret_cast<const char*>(e.compiled.cubin.data()), e.compiled.cubin.size()});
    const auto& r = e.compiled.resources;
    for (const int v : {r.registers, r.spill_store_bytes, r.spill_load_bytes, r.shared_static_bytes,
                        r.stack_frame_bytes, r.constant_bytes, r.barriers})
        w.number<std::int32_t>(v);
    std::uint64_t ms = 0;
    std::memcpy(&ms, &e.compiled.compile_ms, sizeof ms);
    w.number(ms);
    return std::move(w.out);
}

CacheEntry deserialize(std::string_view raw) {
    Reader r{raw};
    CacheEntry e;
    e.key.high = r.number<std::uint64_t>();
    e.key.low = r.number<std::uint64_t>();
    for (std::string* s :
         {&e.readable_id, &e.kernel_name, &e.arch, &e.nvrtc_version, &e.options, &e.compiled.ptx, &e.compiled.log})
        *s = std::string(r.bytes());
    const auto cubin = r.bytes();
    e.compiled.cubin.resize(cubin.size());
    std::memcpy(e.compiled.cubin.data(), cubin.data(), cubin.size());
    auto& res = e.compiled.resources;
    for (int* v : {&res.registers, &res.spill_store_bytes, &res.spill_load_bytes, &res.shared_static_bytes,
                   &res.stack_frame_bytes, &res.constant_bytes, &res.barriers})
        *v = r.number<std::int32_t>();
    const auto ms = r.number<std::uint64_t>();
    std::memcpy(&e.compiled.compile_ms, &ms, sizeof ms);
    if (!r.in.empty()) throw Reader::Short{};  // trailing bytes: not what a writer wrote
    return e;
}

std::array<std::uint8_t, hash_bytes> hash_of(std::string_view bytes) {
    std::array<std::uint8_t, hash_bytes> h{};
    crypto_generichash(h.data(), h.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), nullptr,
                       0);
    return h;
}

/// What the signature covers: the remote key, length first, then the envelope up to it.
std::string signed_message(std::string_view remote_key, std::string_view envelope_body) {
    Writer w;
    w.bytes(remote_key);
    w.out.append(envelope_body);
    return std::move(w.out);
}

std::span<const std::uint8_t> as_bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

/// The envelope of `raw` (a serialized entry or winner), kind `magic`.
std::string seal(std::string_view kind, std::string_view raw, std::string_view remote_key, const SigningKey& signer) {
    std::string compressed(ZSTD_compressBound(raw.size()), '\0');
    const std::size_t size = ZSTD_compress(compressed.data(), compressed.size(), raw.data(), raw.size(), 3);
    if (ZSTD_isError(size)) throw Error(fmt::format("compressing a cache entry failed: {}", ZSTD_getErrorName(size)));
    compressed.resize(size);
    Writer w;
    w.out.append(kind);
    w.number(format_version);
    w.number<std::uint16_t>(static_cast<std::uint16_t>(signer.name.size()));
    w.out.append(signer.name);
    w.number<std::uint64_t>(raw.size());
    w.bytes(compressed);
    const auto hash = hash_of(raw);
    w.out.append(reinterpret_cast<const char*>(hash.data()), hash.size());
    const auto signature = signer.sign(as_bytes(signed_message(remote_key, w.out)));
    w.out.append(reinterpret_cast<const char*>(signature.data()), signature.size());
    return std::move(w.out);
}

/// The raw bytes an envelope of kind `magic` holds, once its signature, sizes and hash check; else
/// why not (`rejected`).
struct Opened {
    std::string raw;
    std::string rejected;
};
Opened open(std::string_view kind, std::string_view value, std::string_view remote_key,
            std::span<const PublicKey> trusted) {
    const auto reject = [](std::string why) { return Opened{{}, std::move(why)}; };
    if (value.size() < kind.size() + signature_bytes || value.substr(0, kind.size()) != kind)
        return reject(fmt::format("not a kjit {} (no magic)", kind == entry_magic ? "entry" : "tuned winner"));
    const std::string_view body = value.substr(0, value.size() - signature_bytes);
    const auto* signature = reinterpret_cast<const std::uint8_t*>(value.data() + body.size());
    Reader r{body.substr(kind.size())};
    if (const auto version = r.number<std::uint32_t>(); version != format_version)
        return reject(fmt::format("format version {}, this kjit reads {}", version, format_version));
    const std::string signer(r.take(r.number<std::uint16_t>()));
    const auto key = std::ranges::find(trusted, signer, &PublicKey::name);
    if (key == trusted.end()) return reject(fmt::format("signed by '{}', a key this reader does not trust", signer));
    // Nothing past the signer's name is believed before the signature checks.
    if (!verify_signature(*key, as_bytes(signed_message(remote_key, body)),
                          std::span<const std::uint8_t, signature_bytes>(signature, signature_bytes)))
        return reject(fmt::format("its signature by '{}' does not hold for this key", signer));
    const auto raw_size = r.number<std::uint64_t>();
    const std::string_view compressed = r.bytes();
    const auto hash = r.take(hash_bytes);
    if (!r.in.empty() || raw_size > max_entry_bytes) return reject("malformed (sizes)");
    std::string raw(raw_size, '\0');
    const std::size_t got = ZSTD_decompress(raw.data(), raw.size(), compressed.data(), compressed.size());
    if (ZSTD_isError(got) || got != raw_size) return reject("its compressed entry does not decompress to its size");
    if (const auto h = hash_of(raw); std::memcmp(h.data(), hash.data(), hash_bytes) != 0)
        return reject("its hash does not match its entry");
    return {std::move(raw), {}};
}

std::string serialize(const TunedConfig& w) {
    Writer out;
    for (const std::string* s : {&w.kernel, &w.shape, &w.device, &w.arch, &w.driver, &w.source_hash, &w.config})
        out.bytes(*s);
    std::uint64_t us = 0;
    std::memcpy(&us, &w.microseconds, sizeof us);
    out.number(us);
    return std::move(out.out);
}

TunedConfig deserialize_winner(std::string_view raw) {
    Reader r{raw};
    TunedConfig w;
    for (std::string* s : {&w.kernel, &w.shape, &w.device, &w.arch, &w.driver, &w.source_hash, &w.config})
        *s = std::string(r.bytes());
    const auto us = r.number<std::uint64_t>();
    std::memcpy(&w.microseconds, &us, sizeof us);
    if (!r.in.empty()) throw Reader::Short{};
    return w;
}

}  // namespace

std::string seal_entry(const CacheEntry& entry, std::string_view remote_key, const SigningKey& signer) {
    return seal(entry_magic, serialize(entry), remote_key, signer);
}

std::string seal_winner(const TunedConfig& winner, std::string_view remote_key, const SigningKey& signer) {
    return seal(winner_magic, serialize(winner), remote_key, signer);
}

OpenedEntry open_entry(std::string_view value, std::string_view remote_key, std::span<const PublicKey> trusted,
                       const CacheKey& expected) {
    try {
        Opened opened = open(entry_magic, value, remote_key, trusted);
        if (!opened.rejected.empty()) return {std::nullopt, std::move(opened.rejected)};
        CacheEntry entry = deserialize(opened.raw);
        if (!(entry.key == expected)) return {std::nullopt, "it holds the entry of another key"};
        return {std::move(entry), {}};
    } catch (const Reader::Short&) {
        return {std::nullopt, "malformed (cut short)"};
    }
}

OpenedWinner open_winner(std::string_view value, std::string_view remote_key, std::span<const PublicKey> trusted) {
    try {
        Opened opened = open(winner_magic, value, remote_key, trusted);
        if (!opened.rejected.empty()) return {std::nullopt, std::move(opened.rejected)};
        return {deserialize_winner(opened.raw), {}};
    } catch (const Reader::Short&) {
        return {std::nullopt, "malformed (cut short)"};
    }
}

}  // namespace kjit::detail
