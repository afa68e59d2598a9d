// The row codec of the kernels table.
#include "jit/cache/entry_row.hpp"

#include <charconv>

#include <fmt/format.h>

#include "jit/cache/schema.hpp"
#include "jit/cache_key.hpp"

namespace kjit::detail {
namespace {

namespace column = schema::column;

/// Checksum over the row's text fields and resource numbers (everything but the blobs).
std::uint64_t meta_checksum(const CacheEntry& e) {
    const auto& r = e.compiled.resources;
    return checksum(fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{} {} {} {} {} {} {}", e.key.hex(), e.readable_id,
                                e.kernel_name, e.arch, e.nvrtc_version, e.options, r.registers, r.spill_store_bytes,
                                r.spill_load_bytes, r.shared_static_bytes, r.stack_frame_bytes, r.constant_bytes,
                                r.barriers));
}

/// SQLite integers are signed: checksums are stored as their two's-complement bits.
std::int64_t as_sql(std::uint64_t v) { return static_cast<std::int64_t>(v); }

/// The resource numbers, each with its column.
template <class Report, class Visit>
void each_resource(Report& r, Visit&& visit) {
    visit(column::registers, r.registers);
    visit(column::spill_store_bytes, r.spill_store_bytes);
    visit(column::spill_load_bytes, r.spill_load_bytes);
    visit(column::shared_static_bytes, r.shared_static_bytes);
    visit(column::stack_frame_bytes, r.stack_frame_bytes);
    visit(column::constant_bytes, r.constant_bytes);
    visit(column::barriers, r.barriers);
}

}  // namespace

void bind_entry(sqlite::Statement& s, const CacheEntry& e, std::int64_t now) {
    const auto& c = e.compiled;
    auto bind = [&](int col, const auto& value) { s.bind_one(col + 1, value); };
    bind(column::key, e.key.hex());
    bind(column::readable_id, e.readable_id);
    bind(column::kernel_name, e.kernel_name);
    bind(column::arch, e.arch);
    bind(column::nvrtc_version, e.nvrtc_version);
    bind(column::options, e.options);
    bind(column::ptx, std::as_bytes(std::span(c.ptx)));
    bind(column::cubin, sqlite::Bytes(c.cubin));
    bind(column::log, c.log);
    each_resource(c.resources, [&](int col, int value) { bind(col, value); });
    bind(column::compile_ms, c.compile_ms);
    bind(column::created_at, e.created_at ? e.created_at : now);
    bind(column::last_used_at, e.last_used_at ? e.last_used_at : now);
    bind(column::hit_count, e.hit_count);
    bind(column::ptx_checksum, as_sql(checksum(c.ptx)));
    bind(column::cubin_checksum, as_sql(checksum(c.cubin)));
    bind(column::log_checksum, as_sql(checksum(c.log)));
    bind(column::meta_checksum, as_sql(meta_checksum(e)));
}

DecodedEntry decode_entry(const sqlite::Statement& s, Cache::Blobs blobs) {
    DecodedEntry d;
    CacheEntry& e = d.entry;
    e.key = parse_key(s.text(column::key));
    e.readable_id = s.text(column::readable_id);
    e.kernel_name = s.text(column::kernel_name);
    e.arch = s.text(column::arch);
    e.nvrtc_version = s.text(column::nvrtc_version);
    e.options = s.text(column::options);
    e.compiled.ptx = s.text(column::ptx);
    const auto cubin = s.blob(column::cubin);
    e.compiled.cubin.assign(cubin.begin(), cubin.end());
    e.compiled.log = s.text(column::log);
    each_resource(e.compiled.resources, [&](int col, int& field) { field = static_cast<int>(s.integer(col)); });
    e.compiled.compile_ms = s.real(column::compile_ms);
    e.created_at = s.integer(column::created_at);
    e.last_used_at = s.integer(column::last_used_at);
    e.hit_count = s.integer(column::hit_count);
    const bool all = blobs == Cache::Blobs::all;
    if (all && as_sql(checksum(e.compiled.ptx)) != s.integer(column::ptx_checksum)) d.failed_checksum = "ptx";
    else if (as_sql(checksum(e.compiled.cubin)) != s.integer(column::cubin_checksum)) d.failed_checksum = "cubin";
    else if (all && as_sql(checksum(e.compiled.log)) != s.integer(column::log_checksum)) d.failed_checksum = "log";
    else if (as_sql(meta_checksum(e)) != s.integer(column::meta_checksum)) d.failed_checksum = "metadata";
    return d;
}

CacheKey parse_key(std::string_view hex) {
    CacheKey k;
    auto half = [&](std::string_view h, std::uint64_t& out) {
        return std::from_chars(h.data(), h.data() + h.size(), out, 16).ptr == h.data() + h.size();
    };
    if (hex.size() != 32 || !half(hex.substr(0, 16), k.high) || !half(hex.substr(16), k.low)) return {};
    return k;
}

}  // namespace kjit::detail
