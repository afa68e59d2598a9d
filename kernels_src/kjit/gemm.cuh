// The tensor-core GEMM of the conv kernels: Y[n, j] = silu(scale[n]·Σ_k W[n, k]·X[k, j] + shift[n]).
// W is row-major [N, K]; X is whatever a Columns policy gathers (the 1×1 kernel reads pixels
// directly, the general kernel gathers im2col patches). The parts, as CUTLASS splits them:
//   kjit/gemm/tile_scheduler.cuh  which tile and which share of K a block computes
//   kjit/gemm/mainloop_sm80.cuh   cp.async pipeline + mma.sync (sm_80/86/87/89, and sm_90 where TMA
//                                 cannot take a shape; the TMA + wgmma path is kjit/gemm_sm90.cuh)
//   kjit/gemm/epilogue.cuh        split-K reduction over a cluster, BN + SiLU, the store
// Split-K: launched in clusters of S blocks (sm_90+), the blocks of a cluster share one output
// tile, each takes 1/S of K, and block 0 sums the partial tiles — more blocks for small, deep
// layers, and no workspace.
#pragma once
#include "kjit/gemm/epilogue.cuh"
#include "kjit/gemm/mainloop_sm80.cuh"
#include "kjit/gemm/tile_scheduler.cuh"

namespace gemm {

/// One output tile: rows row0… of W's N, columns col0… of X; bn_scale, bn_shift, y and the
/// residual (added to y where not null) start at row 0 of this GEMM.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, class Columns>
__device__ __forceinline__ void gemm_bn_silu(const Weights<BLOCK_M, BLOCK_N, BLOCK_K>& weights, const Columns& columns,
                                             long long col0, const float* bn_scale, const float* bn_shift, float* y,
                                             const float* residual, int y_row_stride)
{
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    extern __shared__ __align__(16) float shared[];
    const SplitK split = this_split_k();
    const int warp = threadIdx.x / 32;
    const int warp_row = warp / T::WARPS_M * T::WARP_N;  // first channel of this warp in the tile
    const int warp_col = warp % T::WARPS_M * 32;         // first column of this warp in the tile
    Accumulators<BLOCK_M, BLOCK_N, BLOCK_K> acc = {};
    mainloop_sm80(acc, weights, columns, this_k_range<BLOCK_K>(weights.K, split), shared, warp_row, warp_col);
    if (!reduce_split_k<T::THREADS>(acc, shared, split)) return;
    store_bn_silu<BLOCK_M, BLOCK_N, BLOCK_K>(acc, weights.row0, weights.N, columns, col0, bn_scale, bn_shift, y,
                                             residual, y_row_stride, warp_row, warp_col);
}

}  // namespace gemm
