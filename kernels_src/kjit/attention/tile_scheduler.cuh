// The attention tile scheduler: which BLOCK_M query rows of which head a block computes, which
// key/value head serves it (grouped-query attention), and which key tiles it visits.
#pragma once

namespace attention {

struct Work {
    int m0;  // first query row
    int head, kv_head, batch;
};

/// A block per (query tile, head, batch). Causal blocks go longest first — the last query
/// tiles visit the most key tiles — so the final wave is of short ones.
template <int BLOCK_M, bool CAUSAL>
__device__ __forceinline__ Work this_work(int heads, int kv_heads)
{
    const int m_tile = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int head = blockIdx.y;
    return {m_tile * BLOCK_M, head, head / (heads / kv_heads), (int)blockIdx.z};
}

/// Key tiles [0, count) of BLOCK_N keys; from `first_masked` on, some key a row of the block
/// sees is masked (past the keys' end, or after the row when causal: query i sees keys j ≤ i,
/// torch's is_causal).
struct KeyTiles {
    int count, first_masked;
};
template <int BLOCK_M, int BLOCK_N, bool CAUSAL>
__device__ __forceinline__ KeyTiles key_tiles(int m0, int kv_seq)
{
    const int end = CAUSAL ? min(kv_seq, m0 + BLOCK_M) : kv_seq;  // keys the last row sees
    const int full = CAUSAL ? min(kv_seq, m0 + 1) : kv_seq;       // keys every row sees
    return {(end + BLOCK_N - 1) / BLOCK_N, full / BLOCK_N};
}

}  // namespace attention
