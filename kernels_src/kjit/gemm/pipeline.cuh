// The cp.async pipeline the sm80 mainloop runs over a block's K tiles: STAGES shared-memory stages,
// each one K tile of W ([STAGES][W_STAGE] floats) and of X ([STAGES][X_STAGE] after them);
// STAGES-1 tiles in flight while one is multiplied.
#pragma once
#include "kjit/gemm/tile_scheduler.cuh"
#include "kjit/gemm/tiles.cuh"
#include "kjit/ptx.cuh"

namespace gemm {

/// Runs the pipeline over `k`: weights.load and columns.load fill a stage (at shared addresses);
/// multiply(w_tile, x_tile) works on a tile once it is in. Copies past the last K tile may still
/// be in flight on return (empty groups).
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, class Weights, class Columns, class Multiply>
__device__ __forceinline__ void run_pipeline(const Weights& weights, const Columns& columns, KRange k, float* shared,
                                             Multiply&& multiply)
{
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    float* w_tiles = shared;                        // [STAGES][W_STAGE]
    float* x_tiles = shared + STAGES * T::W_STAGE;  // [STAGES][X_STAGE]
    const unsigned w_stages = kjit::shared_address(w_tiles), x_stages = kjit::shared_address(x_tiles);
    auto load = [&](int stage, int kt) {
        weights.load(w_stages + stage * T::W_STAGE * 4, k.begin + kt);
        columns.load(x_stages + stage * T::X_STAGE * 4, k.begin + kt);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k.count) load(s, s);
        kjit::copy_commit();
    }
    for (int kt = 0; kt < k.count; ++kt) {
        kjit::copy_wait<STAGES - 2>();
        __syncthreads();  // tile kt is in; every warp is done with the stage refilled below
        if (kt + STAGES - 1 < k.count) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        kjit::copy_commit();
        const int s = kt % STAGES;
        multiply(w_tiles + s * T::W_STAGE, x_tiles + s * T::X_STAGE);
    }
}

}  // namespace gemm
