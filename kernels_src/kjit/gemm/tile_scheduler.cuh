// The tile scheduler: which output tile a block computes — GROUP_M-swizzled over a 1-D grid so
// neighbouring blocks share operands in L2 — or which sequence of them a persistent block does,
// and which share of its K, when a thread-block cluster of S blocks splits one tile's K
// (split-K, sm_90+; a cluster of one block elsewhere).
#pragma once
#include "kjit/ceil_div.cuh"
#include "kjit/ptx.cuh"

namespace gemm {

/// A tile's place in the tile grid: m along the swizzled (column) axis, n along the rows.
struct TileCoord {
    int m;
    int n;
};

/// The tile a 1-D program id computes, swizzled so GROUP_M consecutive programs share their `n`
/// tiles' operands in L2 (the grouping of Triton's matmul tutorial).
__device__ __forceinline__ TileCoord grouped_tile(int pid, int tiles_m, int tiles_n, int group_m)
{
    const int per_group = group_m * tiles_n;
    const int first_m = (pid / per_group) * group_m;
    const int group_size = min(tiles_m - first_m, group_m);
    const int in_group = pid % per_group;
    return {first_m + in_group % group_size, in_group / group_size};
}

/// The tiles of a persistent grid: block i computes tiles i, i + gridDim.x, … of count(), each
/// placed by grouped_tile.
struct PersistentTiles {
    int tiles_m, tiles_n, group_m;
    __device__ __forceinline__ int count() const { return tiles_m * tiles_n; }
    __device__ __forceinline__ TileCoord at(int pid) const { return grouped_tile(pid, tiles_m, tiles_n, group_m); }
};

/// The first column and row of this block's BLOCK_M × BLOCK_N tile of a `columns` × `rows`
/// output: one tile per cluster (the blocks of a cluster split its K).
struct Tile {
    long long col0;
    int row0;
};
template <int BLOCK_M, int BLOCK_N, int GROUP_M>
__device__ __forceinline__ Tile this_tile(long long columns, int rows)
{
    const TileCoord t = grouped_tile(blockIdx.x / kjit::cluster_size(),
                                     (int)kjit::ceil_div<long long>(columns, BLOCK_M), kjit::ceil_div(rows, BLOCK_N),
                                     GROUP_M);
    return {(long long)t.m * BLOCK_M, t.n * BLOCK_N};
}

/// This block's place in its split-K cluster: `split` blocks share a tile, this is block `rank`.
struct SplitK {
    int split;
    int rank;
};
__device__ __forceinline__ SplitK this_split_k() { return {(int)kjit::cluster_size(), (int)kjit::cluster_rank()}; }

/// K tiles [begin, begin + count) of BLOCK_K each.
struct KRange {
    int begin;
    int count;
};
/// This block's K tiles: all of a K-long reduction, or 1/split of them inside a split-K cluster.
template <int BLOCK_K>
__device__ __forceinline__ KRange this_k_range(int K, SplitK s)
{
    const int split = s.split, rank = s.rank;
    const int all_k_tiles = kjit::ceil_div(K, BLOCK_K);
    const int per_block = kjit::ceil_div(all_k_tiles, split);
    const int begin = min(all_k_tiles, rank * per_block);
    return {begin, min(all_k_tiles, begin + per_block) - begin};
}

}  // namespace gemm
