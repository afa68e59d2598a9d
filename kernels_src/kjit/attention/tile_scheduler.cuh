// The attention tile scheduler: which BLOCK_M query rows of which head a block computes, which
// key/value head serves them (grouped-query attention), and which key tiles they visit
// (key_tiles.cuh) — a block a query tile (the sm80 kernel), or many a block in a persistent grid
// (the Hopper kernel, persistent_schedule.cuh).
#pragma once
#include "kjit/attention/key_tiles.cuh"
#include "kjit/attention/persistent_schedule.cuh"

namespace attention {

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

}  // namespace attention
