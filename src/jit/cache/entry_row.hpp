// The row codec: a CacheEntry as one row of the kernels table, with the checksums that let
// every read prove what it read.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <kjit/cache.hpp>

#include "jit/cache/sqlite.hpp"

namespace kjit::detail {

/// Binds every column of `e` to a schema::insert_sql() statement; created and last-used times
/// that are unset become `now`. The blobs are bound in place: `e` must outlive the step.
void bind_entry(sqlite::Statement& insert, const CacheEntry& e, std::int64_t now);

/// The entry in the current row of a SELECT of schema::select_list(), and the name of the first
/// checksum it fails ("" when every blob read and the metadata match).
struct DecodedEntry {
    CacheEntry entry;
    std::string failed_checksum;
};
[[nodiscard]] DecodedEntry decode_entry(const sqlite::Statement& row, Cache::Blobs blobs = Cache::Blobs::all);

/// The key of a row: 32 hex digits (anything else reads as a key no entry has).
[[nodiscard]] CacheKey parse_key(std::string_view hex);

}  // namespace kjit::detail
