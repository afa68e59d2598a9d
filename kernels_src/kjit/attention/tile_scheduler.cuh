// The attention tile scheduler: which BLOCK_M query rows of which head a block computes, which
// key/value head serves them (grouped-query attention), and which key tiles they visit
// (key_tiles.cuh) — a block a query tile (the sm80 kernel), or many a block in a persistent grid
// (the Hopper kernel).
#pragma once
#include "kjit/attention/key_tiles.cuh"

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

/// The query tiles of a persistent grid — (tile, head, batch × key share), tiles fastest, so
/// that the blocks at work together share one head's keys in L2 — every gridDim.x-th from
/// blockIdx.x to a block. Causal tiles differ in cost (a head's last sees the most keys): they go
/// longest first and, where every block takes two or more, in pairs of a head's i-th longest and
/// i-th shortest, which cost about the same whatever i is, so that the stride leaves no block
/// with far more work than another.
/// One of a persistent block's query tiles: schedule unit `unit`'s first, or its second (a
/// causal pair's shorter tile).
struct TileIndex {
    int unit;
    bool second;
};

template <int BLOCK_M, bool CAUSAL>
struct PersistentSchedule {
    int m_tiles, heads, group, splits;
    int per_head, units;  // units (a tile, or a pair) a head, and in all
    bool paired;

    static __device__ __forceinline__ PersistentSchedule of(int batch, int heads, int kv_heads, int seq, int splits)
    {
        const int m_tiles = kjit::ceil_div(seq, BLOCK_M), heads_in_all = heads * batch * splits;
        const bool paired = CAUSAL && m_tiles * heads_in_all >= 2 * (int)gridDim.x;
        const int per_head = paired ? kjit::ceil_div(m_tiles, 2) : m_tiles;  // the host keeps the count an int
        return {m_tiles, heads, heads / kv_heads, splits, per_head, per_head * heads_in_all, paired};
    }

    /// f(tile) for each of this block's query tiles, in order.
    template <class F>
    __device__ __forceinline__ void for_each(F&& f) const
    {
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            f(TileIndex{u, false});
            if (paired && u % per_head != m_tiles - 1 - u % per_head) f(TileIndex{u, true});
        }
    }

    /// The query tile's work: one read again where holding it costs a pass registers.
    __device__ __forceinline__ Work work(TileIndex t) const
    {
        const int i = t.unit % per_head, rest = t.unit / per_head, head = rest % heads, z = rest / heads;
        const int m_tile = t.second ? i : CAUSAL ? m_tiles - 1 - i : i;
        return {m_tile * BLOCK_M, head, head / group, z / splits, z % splits, splits};
    }
};

}  // namespace attention
