// Content hashing: cache keys (XXH3-128) and blob checksums (XXH3-64).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <kjit/kernel.hpp>

namespace kjit::detail {

/// Hash of the generated source and every kernels_src header it includes.
CacheKey source_digest(std::string_view source, const std::vector<SourceFile>& headers);

/// The cache key: source digest, canonical options (arch included), NVRTC version and build,
/// and kjit's cache schema version. Nothing else — no time, path or process.
CacheKey cache_key(const CacheKey& source_digest, const std::vector<std::string>& canonical_options,
                   std::string_view nvrtc_version);

/// Hash-map hasher for keys that already are hashes: their low half, nothing recomputed.
struct CacheKeyHash {
    std::size_t operator()(const CacheKey& k) const noexcept { return static_cast<std::size_t>(k.low); }
};

/// Checksum of a stored blob.
std::uint64_t checksum(std::span<const std::byte> bytes) noexcept;
inline std::uint64_t checksum(std::string_view text) noexcept { return checksum(std::as_bytes(std::span(text))); }

}  // namespace kjit::detail
