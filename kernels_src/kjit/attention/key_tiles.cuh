// Which key tiles an attention block visits: all those its query rows see, or with split-KV (few
// query tiles, many keys) its share, the combine kernel (flash_attention2_combine.cu) adding the
// shares up — and of those, which a range of its rows sees (a Hopper consumer warpgroup's). Both
// sides compile this one definition — NVRTC for the kernels (tile_scheduler.cuh), the host compiler
// for the tests — so plain constexpr C++ only (NVRTC's -default-device makes these device functions).
#pragma once
#include "kjit/ceil_div.cuh"

namespace attention {

struct Work {
    int m0;  // first query row
    int head, kv_head, batch;
    int split, splits;  // which share of the key tiles, of how many (split-KV: 1 share unless few blocks)
};

/// Key tiles [begin, end) of BLOCK_N keys, the block's share of those its rows see; from
/// `first_masked` on, some key a row of the block sees is masked (past the keys' end, or after
/// the row when causal: query i sees keys j ≤ i, torch's is_causal).
struct KeyTiles {
    int begin, end, first_masked;
    constexpr int count() const { return end - begin; }
};

/// The part of the block's share that its rows row0 … row0 + rows − 1 see (a Hopper consumer
/// warpgroup's): none where they start past the queries' end; under the causal mask, the tiles up
/// to their last row's diagonal — none where that lies before the share — and masking from their
/// first row's on.
template <int BLOCK_M, int BLOCK_N, bool CAUSAL>
constexpr KeyTiles key_tiles(const Work& w, int seq, int kv_seq, int row0, int rows)
{
    const auto least = [](int a, int b) { return a < b ? a : b; };
    const auto seen = [&](int row) { return CAUSAL ? least(kv_seq, row + 1) : kv_seq; };  // keys a row sees
    const int count = kjit::ceil_div(seen(least(seq, w.m0 + BLOCK_M) - 1), BLOCK_N);
    const int share = kjit::ceil_div(count, w.splits), begin = least(count, w.split * share);
    const int end = least(count, begin + share), last = least(seq, row0 + rows) - 1;
    if (last < row0) return {begin, begin, begin};
    const int sees = kjit::ceil_div(seen(last), BLOCK_N);
    return {begin, sees < begin ? begin : least(end, sees), seen(row0) / BLOCK_N};
}

/// The block's share: what its producer loads.
template <int BLOCK_M, int BLOCK_N, bool CAUSAL>
constexpr KeyTiles key_tiles(const Work& w, int seq, int kv_seq)
{
    return key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq, w.m0, BLOCK_M);
}

}  // namespace attention
