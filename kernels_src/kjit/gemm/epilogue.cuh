// The epilogue the GEMM mainloops share: the split-K reduction of a cluster's partial tiles
// through distributed shared memory, then BN + SiLU in registers, straight to y — nothing
// outside y's valid region is written.
#pragma once
#include "kjit/bn_silu.cuh"
#include "kjit/gemm/tile_scheduler.cuh"
#include "kjit/gemm/tiles.cuh"
#include "kjit/ptx.cuh"

namespace gemm {

/// Calls f(element, flat index) for every element of a (nested) accumulator array, unrolled:
/// the flat index of acc[i][j][e] is (i·J + j)·E + e.
template <class F, int N>
__device__ __forceinline__ void for_each_accumulator(float (&a)[N], F&& f, int base = 0)
{
#pragma unroll
    for (int i = 0; i < N; ++i) f(a[i], base * N + i);
}
template <class F, class Inner, int N>
__device__ __forceinline__ void for_each_accumulator(Inner (&a)[N], F&& f, int base = 0)
{
#pragma unroll
    for (int i = 0; i < N; ++i) for_each_accumulator(a[i], f, base * N + i);
}

/// Split-K inside a cluster of `split` blocks of THREADS: every block parks its partial tile in
/// its own shared memory (the pipeline's, free once every copy is in); block 0 adds the others'
/// through the cluster. Returns whether this block goes on to the epilogue (block 0 only).
template <int THREADS, class Acc>
__device__ __forceinline__ bool reduce_split_k(Acc& acc, float* shared, SplitK s)
{
    const int split = s.split, rank = s.rank;
    if (split == 1) return true;
    kjit::copy_wait<0>();
    __syncthreads();
    // partial[slot][thread], slot the accumulator's flat index: conflict-free, the same in every block.
    float* partial = shared;
    for_each_accumulator(acc, [&](float& v, int slot) { partial[slot * THREADS + threadIdx.x] = v; });
    kjit::cluster_sync();
    if (rank == 0) {
        const unsigned mine = kjit::shared_address(partial + threadIdx.x);
        for (int other = 1; other < split; ++other)
            for_each_accumulator(
                acc, [&](float& v, int slot) { v += kjit::load_from_cluster_block(mine + slot * THREADS * 4, other); });
    }
    kjit::cluster_sync();  // the others stay until block 0 has read their partials
    return rank == 0;
}

/// y[n][col] = silu(scale[n]·acc + shift[n]) (+ residual[n][col], a fused residual add, where
/// there is one) for this thread's fragments of the tile whose first row is `row0` (of N) and
/// first column `col0`; `columns` says where each column's output goes.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, class Columns>
__device__ __forceinline__ void store_bn_silu(const Accumulators<BLOCK_M, BLOCK_N, BLOCK_K>& acc, int row0, int N,
                                              const Columns& columns, long long col0, const float* bn_scale,
                                              const float* bn_shift, float* y, const float* residual, int y_row_stride,
                                              int warp_row, int warp_col)
{
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    const int g = threadIdx.x % 32 / 4, q = threadIdx.x % 4;
    Column cols[T::FRAGS_M][2];
#pragma unroll
    for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) cols[j][h] = columns.column(col0 + warp_col + j * 8 + 2 * q + h);
#pragma unroll
    for (int i = 0; i < T::FRAGS_N; ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int n = row0 + warp_row + i * 16 + g + half * 8;
            if (n >= N) continue;
            const float scale = bn_scale[n], shift = bn_shift[n];
            const long long row = (long long)n * y_row_stride;
#pragma unroll
            for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    if (cols[j][h].valid) {
                        const long long at = row + cols[j][h].y_offset;
                        float v = kjit::bn_silu(acc[i][j][half * 2 + h], scale, shift);
                        if (residual) v += __ldg(residual + at);
                        y[at] = v;
                    }
        }
}

}  // namespace gemm
