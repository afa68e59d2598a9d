// The attention tile scheduler: which BLOCK_M query rows of which head a block computes, which
// key/value head serves it (grouped-query attention), and which key tiles it visits — all of
// them, or with split-KV (few query tiles, many keys) its share, the combine kernel
// (flash_attention2_combine.cu) adding the shares up — and of those, which a range of its rows
// sees (a Hopper consumer warpgroup's).
#pragma once
#include "kjit/ceil_div.cuh"

namespace attention {

struct Work {
    int m0;  // first query row
    int head, kv_head, batch;
    int split, splits;  // which share of the key tiles, of how many (split-KV: 1 share unless few blocks)
};

/// A block per (query tile, head, batch × key split). Causal blocks go longest first — the last
/// query tiles visit the most key tiles — so the final wave is of short ones.
template <int BLOCK_M, bool CAUSAL>
__device__ __forceinline__ Work this_work(int heads, int kv_heads, int splits)
{
    const int m_tile = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int head = blockIdx.y;
    return {m_tile * BLOCK_M,         head,  head / (heads / kv_heads), (int)blockIdx.z / splits,
            (int)blockIdx.z % splits, splits};
}

/// Key tiles [begin, end) of BLOCK_N keys, the block's share of those its rows see; from
/// `first_masked` on, some key a row of the block sees is masked (past the keys' end, or after
/// the row when causal: query i sees keys j ≤ i, torch's is_causal).
struct KeyTiles {
    int begin, end, first_masked;
    __device__ __forceinline__ int count() const { return end - begin; }
};

/// The part of the block's share that its rows row0 … row0 + rows − 1 see (a Hopper consumer
/// warpgroup's): none where they start past the queries' end; under the causal mask, the tiles up
/// to their last row's diagonal, and masking from their first row's on.
template <int BLOCK_M, int BLOCK_N, bool CAUSAL>
__device__ __forceinline__ KeyTiles key_tiles(const Work& w, int seq, int kv_seq, int row0, int rows)
{
    const auto seen = [&](int row) { return CAUSAL ? min(kv_seq, row + 1) : kv_seq; };  // keys a row sees
    const int count = kjit::ceil_div(seen(min(seq, w.m0 + BLOCK_M) - 1), BLOCK_N);
    const int share = kjit::ceil_div(count, w.splits), begin = min(count, w.split * share);
    const int end = min(count, begin + share), last = min(seq, row0 + rows) - 1;
    if (last < row0) return {begin, begin, begin};
    return {begin, min(end, kjit::ceil_div(seen(last), BLOCK_N)), seen(row0) / BLOCK_N};
}

/// The block's share: what its producer loads.
template <int BLOCK_M, int BLOCK_N, bool CAUSAL>
__device__ __forceinline__ KeyTiles key_tiles(const Work& w, int seq, int kv_seq)
{
    return key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq, w.m0, BLOCK_M);
}

}  // namespace attention
