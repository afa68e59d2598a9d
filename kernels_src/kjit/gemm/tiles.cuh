// The sm80 mainloop's tile: how a block's warps split a BLOCK_M × BLOCK_N output tile into
// mma.sync fragments (the geometry the host shares, kjit/gemm_geometry.cuh), the accumulators
// each thread holds, and where an output column's pixels sit.
#pragma once
#include "kjit/gemm_geometry.cuh"

namespace gemm {

constexpr int STAGES = kjit::GemmGeometry::stages;

/// Block layout from the tile shape (kjit/gemm_geometry.cuh, which the host shares).
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Tiles {
    static constexpr kjit::GemmGeometry G{BLOCK_M, BLOCK_N, BLOCK_K};
    static constexpr int WARPS_M = G.warps_m();
    static constexpr int WARPS_N = G.warps_n();
    static constexpr int THREADS = G.threads();
    static constexpr int WARP_N = G.warp_n();
    static constexpr int FRAGS_N = WARP_N / 16;  // 16-channel MMA tiles per warp
    static constexpr int FRAGS_M = 4;            // 8-column MMA tiles per warp
    static constexpr int W_STRIDE = G.w_stride();
    static constexpr int X_STRIDE = G.x_stride();
    static constexpr int W_STAGE = G.w_stage();
    static constexpr int X_STAGE = G.x_stage();
};

/// One thread's accumulators: FRAGS_N × FRAGS_M fragments of 4 (see kjit::mma_tf32).
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
using Accumulators = float[Tiles<BLOCK_M, BLOCK_N, BLOCK_K>::FRAGS_N][Tiles<BLOCK_M, BLOCK_N, BLOCK_K>::FRAGS_M][4];

/// Where column j's pixels sit: the start of its input (policy-specific) and of its output.
struct Column {
    long long x_offset;
    long long y_offset;
    bool valid;
};

}  // namespace gemm
