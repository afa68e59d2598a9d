// The query tiles of the Hopper attention kernel's persistent grid: which of them each block
// takes, in what order. Both sides compile this one definition — NVRTC for the kernel
// (tile_scheduler.cuh), the host compiler for the tests — so plain constexpr C++ only, the grid
// passed in.
#pragma once
#include "kjit/attention/key_tiles.cuh"

namespace attention {

/// One of a persistent block's query tiles: unit `unit`'s longer tile, or its shorter.
struct TileIndex {
    int unit;
    bool second;
};

/// The query tiles of a persistent grid — (tile, head, batch × key share), tiles fastest, so
/// that the blocks at work together share one head's keys in L2 — every blocks-th unit from the
/// block's index on to a block. Causal tiles differ in cost (a head's last sees the most keys):
/// they go longest first and, where every block takes two or more, in pairs. A pair of heads'
/// 2·m tiles make m units, the k-th longest of them with the k-th shortest, one from each head:
/// each unit then costs about m + 1 tiles' worth of keys whatever k is, and so whatever stride
/// the grid takes (a head's own tiles, m odd, would leave its middle tile alone at half the
/// cost, and a grid of 132 blocks over 6 units a head gives one block in 6 only those).
template <int BLOCK_M, bool CAUSAL>
struct PersistentSchedule {
    int m_tiles, heads, heads_in_all, group, splits;  // heads_in_all: heads × batch × key shares
    int units, blocks;                                // blocks: the grid's
    bool paired;

    static constexpr PersistentSchedule of(int batch, int heads, int kv_heads, int seq, int splits, int blocks)
    {
        const int m_tiles = kjit::ceil_div(seq, BLOCK_M), heads_in_all = heads * batch * splits;
        const bool paired = CAUSAL && m_tiles * heads_in_all >= 2 * blocks;
        // the host keeps the tile count an int; paired units number at most half of it plus m_tiles
        const int units = paired ? kjit::ceil_div(heads_in_all, 2) * m_tiles : m_tiles * heads_in_all;
        return {m_tiles, heads, heads_in_all, heads / kv_heads, splits, units, blocks, paired};
    }

    /// f(tile) for each of block `block`'s query tiles, in order.
    template <class F>
    constexpr void for_each(int block, F&& f) const
    {
        for (int u = block; u < units; u += blocks)
            for (int i = 0; i <= (int)paired; ++i) {  // one call site: the pass is inlined once
                const TileIndex t{u, i == 1};
                if (place(t).head < heads_in_all) f(t);  // the last pair of an odd count of heads has one
            }
    }

    /// The query tile's work: one read again where holding it costs a pass registers.
    constexpr Work work(TileIndex t) const
    {
        const Place p = place(t);
        const int head = p.head % heads, z = p.head / heads;
        return {p.m_tile * BLOCK_M, head, head / group, z / splits, z % splits, splits};
    }

private:
    struct Place {
        int m_tile, head;  // head: over heads × batch × key shares
    };

    /// Unpaired, a head's tiles in turn (causal: longest first). Paired, the k-th unit of a pair of
    /// heads holds the k-th longest of their tiles (m − 1 − ⌊k/2⌋ of head k mod 2) and the k-th
    /// shortest (⌊k/2⌋ of the other head).
    constexpr Place place(TileIndex t) const
    {
        const int rest = t.unit / m_tiles;
        if (!paired) return {CAUSAL ? m_tiles - 1 - t.unit % m_tiles : t.unit % m_tiles, rest};
        // k turns a step each pair of heads: a grid that is a multiple of m units still meets every k
        const int k = (t.unit + rest) % m_tiles;
        if (!t.second) return {m_tiles - 1 - k / 2, 2 * rest + k % 2};
        return {k / 2, 2 * rest + (k % 2 ^ 1)};
    }
};

}  // namespace attention
