// The cache key: XXH3-128 over everything that changes the binary; blob checksums (XXH3-64).
#include "jit/cache_key.hpp"

#include <fmt/format.h>
#include <kjit/cache.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kjit {

std::string CacheKey::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

namespace detail {
namespace {

/// Streams length-prefixed fields, so ("ab","c") and ("a","bc") hash differently.
class Hasher {
public:
    Hasher() { XXH3_128bits_reset(&state_); }
    Hasher& field(std::string_view bytes) {
        const std::uint64_t size = bytes.size();
        XXH3_128bits_update(&state_, &size, sizeof size);
        XXH3_128bits_update(&state_, bytes.data(), bytes.size());
        return *this;
    }
    Hasher& field(const CacheKey& key) {
        XXH3_128bits_update(&state_, &key.high, sizeof key.high);
        XXH3_128bits_update(&state_, &key.low, sizeof key.low);
        return *this;
    }
    CacheKey digest() const {
        const XXH128_hash_t h = XXH3_128bits_digest(&state_);
        return {h.high64, h.low64};
    }

private:
    XXH3_state_t state_;
};

}  // namespace

CacheKey source_digest(std::string_view source, const std::vector<SourceFile>& headers) {
    Hasher h;
    h.field("source").field(source);
    for (const auto& header : headers) h.field("header").field(header.name).field(header.content);
    return h.digest();
}

CacheKey cache_key(const CacheKey& source_digest, const std::vector<std::string>& canonical_options,
                   std::string_view nvrtc_version) {
    Hasher h;
    h.field(fmt::format("kjit-cache-schema-{}", cache_schema_version));
    h.field(nvrtc_version);
    h.field(source_digest);
    for (const auto& option : canonical_options) h.field(option);
    return h.digest();
}

std::uint64_t checksum(std::span<const std::byte> bytes) noexcept { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace detail
}  // namespace kjit
