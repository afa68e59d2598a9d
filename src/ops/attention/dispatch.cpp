// Which attention tiles run a problem: dispatch's rule (kjit/attention.hpp), what `kjit run`
// prints of it, and the tuned winner `kjit tune flash_attention2` stored where there is one.
#include <kjit/attention.hpp>

#include <algorithm>

#include <fmt/format.h>
#include <kjit/tuning.hpp>

#include "jit/log.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

namespace {
/// ", the keys split in N shares (N blocks each, added up by a second kernel)" where they are.
std::string splits_text(const AttentionTiles& t) {
    return t.kv_splits > 1 ? fmt::format(
                                 ", the keys split in {} shares (as many blocks each, added up by a second "
                                 "kernel)",
                                 t.kv_splits)
                           : std::string();
}

/// 128 keys a step (on an H100, BLOCK_N=128 ran 1.3× BLOCK_N=64 at head dim 128: fewer passes of
/// the softmax's reductions and barriers per key), halved until the tiles fit shared memory.
AttentionTiles fitted(int block_m, const AttentionShape& s, const DeviceTraits& traits) {
    AttentionTiles t{block_m, 128};
    while (t.block_n > 32 && t.shared_bytes(s.head_dim) > static_cast<unsigned>(traits.max_shared_bytes))
        t.block_n /= 2;
    return t;
}
}  // namespace

int attention_kv_splits(const AttentionShape& shape, const AttentionTiles& t, const DeviceTraits& traits,
                        AttentionLayout layout) {
    const AttentionShape s = shape.as_run(layout);
    const long long grid = s.query_tiles(t.block_m);
    if (grid * 2 > traits.multiprocessors) return 1;  // at least half a wave already
    // Enough shares for about one wave. Where a head's queries do not fill one query tile
    // (decoding) a share may be one key tile: one query against 5000 keys in 8 heads took 16.2 µs
    // in 16 shares on an H100, 61.2 µs whole. Full query tiles keep 16 key tiles a share or more:
    // split into shares of 4 tiles or fewer they ran slower (16.3 against 14.4 µs, 8 heads of
    // 1024 queries and keys at head dim 64 in 2 shares; 13.2 against 12.1 µs, 512 causal at 128
    // in 4), of 32 or more faster (95 → 64 µs, 2 × 16 heads of 256 queries against 8192 keys in
    // 2 shares; 1096 → 165 µs, 8 heads of 200 against 100,000 in 8).
    const int tiles = s.key_tiles(t.block_n);
    const int most = s.seq < t.block_m ? tiles : tiles / 16;
    return static_cast<int>(std::clamp<long long>(std::min<long long>(traits.multiprocessors / grid, most), 1, 16));
}

namespace {
/// Dispatch's tiles before the keys are split.
AttentionTiles unsplit_tiles(const AttentionShape& s, const DeviceTraits& traits) {
    require(traits.arch.number() >= 80,
            "flash_attention2_forward needs sm_80 or newer (16-bit mma.sync); this device is {}", traits.arch.name());
    // On a 9.0 device the TMA + wgmma mainloop (head dims 64 and 128), 128 keys a step. On an
    // H100 at head dim 128, 128 query rows a block (two consumer warpgroups) ran 1.09× 192 rows
    // with 64 keys; at head dim 64, whose softmax weighs more against its matmuls, 192 rows (three
    // consumers taking turns) ran 1.06–1.20× 128 rows, where the grid still fills the device.
    if (traits.hopper() && s.head_dim % 64 == 0) {
        const bool three_consumers = s.head_dim == 64 && s.query_tiles(192) >= traits.multiprocessors;
        const AttentionTiles hopper{three_consumers ? 192 : 128, 128, true};
        if (hopper.shared_bytes(s.head_dim) <= static_cast<unsigned>(traits.max_shared_bytes)) return hopper;
    }
    // 128 query rows a block (8 warps) unless that leaves multiprocessors idle: then 64.
    const int block_m = s.query_tiles(128) >= traits.multiprocessors ? 128 : 64;
    return fitted(block_m, s, traits);
}
}  // namespace

AttentionTiles dispatch_attention(const AttentionShape& shape, const DeviceTraits& traits, AttentionLayout layout) {
    shape.validate();
    require(traits.arch.number() >= 80,
            "flash_attention2_forward needs sm_80 or newer (16-bit mma.sync); this device is {}", traits.arch.name());
    // The blocks the kernel runs: grouped query heads packed. Few, short query tiles and many keys
    // (decoding): the keys split over more blocks.
    const AttentionShape s = shape.as_run(layout);
    AttentionTiles t = unsplit_tiles(s, traits);
    t.kv_splits = attention_kv_splits(s, t, traits);
    t.validate(s.head_dim, traits);
    return t;
}

std::string attention_dispatch_reason(const AttentionShape& shape, const DeviceTraits& traits, AttentionLayout layout) {
    const AttentionTiles t = dispatch_attention(shape, traits, layout);
    const AttentionShape s = shape.as_run(layout);
    const std::string packed = s.heads == shape.heads ? std::string()
                                                      : fmt::format(
                                                            ", the {} query heads of each key/value head "
                                                            "packed into one head of {} rows",
                                                            shape.heads / shape.kv_heads, s.seq);
    if (t.sm90)
        return fmt::format(
            "TMA + wgmma mainloop (sm_90a), {} query rows a query tile, 64 a consumer warpgroup ({} query tiles "
            "for {} multiprocessors, at most one persistent block each{}), {} keys a step at head_dim {}{}",
            t.block_m, s.query_tiles(t.block_m), traits.multiprocessors, packed, t.block_n, s.head_dim, splits_text(t));
    return fmt::format(
        "mma.sync m16n8k16 mainloop, {} query rows a block ({} blocks for {} multiprocessors{}), {} keys "
        "a step at head_dim {}{}{}",
        t.block_m, s.query_tiles(t.block_m), traits.multiprocessors, packed, t.block_n, s.head_dim,
        traits.hopper() ? " (the wgmma mainloop takes head dims 64 and 128 only)" : "", splits_text(t));
}

std::string attention_tuning_key(const AttentionShape& s, AttentionLayout layout) {
    const bool runs_apart = s.as_run(layout) != s.as_run(AttentionLayout::bhsd);
    return runs_apart ? s.key() + "_bshd" : s.key();
}

AttentionPick pick_attention(const AttentionShape& s, const DeviceTraits& traits, const std::string& device_name,
                             const std::string& driver, Cache& cache, AttentionLayout layout) {
    const std::string key = attention_tuning_key(s, layout);
    for (const TunedConfig& winner :
         find_tuned(cache, std::string(attention_family), key, device_name, traits.arch.name(), driver)) {
        try {
            const AttentionTiles tiles = parse_attention_config(winner.config);
            tiles.validate(s.head_dim, traits);
            if (AttentionForwardOp(s.dtype, s.head_dim, s.causal, tiles).kernel().source_hash() == winner.source_hash)
                return {tiles, true};
            detail::warn(
                fmt::format("the tuned attention winner for {} was timed on an earlier kernel source (kjit "
                            "tune times it again): dispatch picks instead",
                            key));
        } catch (const UsageError& e) {
            detail::warn(fmt::format("ignoring the tuned attention configuration '{}' for {}: {}", winner.config, key,
                                     e.what()));
        }
    }
    return {dispatch_attention(s, traits, layout), false};
}

}  // namespace kjit
