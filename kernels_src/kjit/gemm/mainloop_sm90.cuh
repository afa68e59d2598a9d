// The sm90 mainloop (sm_90a): acc += W · X over this block's K tiles with TF32 wgmma. wgmma
// wants both shared operands K-major; X's tile is pixel-major, so the warpgroups compute
// Yᵀ = Xᵀ · Wᵀ: A = Xᵀ (64 pixels × 8 of K) is read from the X stage into registers, B = W
// (BLOCK_N channels × 8 of K) is read by the tensor cores through a descriptor from a stage laid
// out as wgmma's core matrices. The stages are filled by the same cp.async pipeline and Columns
// policies as the sm80 mainloop; each warpgroup owns 64 columns of the tile.
#pragma once
#include "kjit/gemm/pipeline.cuh"
#include "kjit/gemm/tile_scheduler.cuh"
#include "kjit/gemm/tiles.cuh"
#include "kjit/ptx.cuh"
#include "kjit/ptx_sm90.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KJIT_GEMM_SM90 1
#else
#define KJIT_GEMM_SM90 0
#endif

namespace gemm {

/// Tiles the wgmma mainloop takes: whole warpgroups of 64 columns (the sm80 layout's threads for
/// BLOCK_N ≥ 64 are exactly BLOCK_M / 64 warpgroups) and a wgmma N it has an instruction for.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
constexpr bool sm90_tile =
    BLOCK_M % 64 == 0 && (BLOCK_N == 64 || BLOCK_N == 128) && Tiles<BLOCK_M, BLOCK_N, BLOCK_K>::THREADS == 2 * BLOCK_M;

/// The W stage as wgmma's no-swizzle K-major core matrices: element (n, k) of the BLOCK_N × BLOCK_K
/// stage sits in core matrix (n / 8, k / 4), 8 rows of 4 floats (128 bytes); the K cores of an
/// 8-row group are adjacent (leading byte offset 128), groups BLOCK_K / 4 cores apart.
template <int BLOCK_K>
struct CoreLayout {
    static constexpr unsigned LEADING_BYTES = 128;
    static constexpr unsigned STRIDE_BYTES = BLOCK_K / 4 * 128;
    __device__ static constexpr int offset(int n, int k)
    {
        return (n / 8) * (BLOCK_K * 8) + (k / 4) * 32 + (n % 8) * 4 + k % 4;
    }
};

/// Copies one K tile of W's rows row0… into a stage in the core-matrix layout.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Sm90Weights {
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    using L = CoreLayout<BLOCK_K>;
    const float* w;
    int K, N, row0;
    bool vector;  // 16-byte copies when rows are 16-byte aligned

    __device__ __forceinline__ void load(unsigned tile, int kt) const
    {
        const int k0 = kt * BLOCK_K;
        if (vector) {
            constexpr int CHUNKS = BLOCK_K / 4;  // 16-byte pieces of a row: one core-matrix row each
#pragma unroll
            for (int i = 0; i < BLOCK_N * CHUNKS / T::THREADS; ++i) {
                const int piece = threadIdx.x + i * T::THREADS, n = piece / CHUNKS, k = piece % CHUNKS * 4;
                const bool ok = row0 + n < N && k0 + k < K;
                kjit::copy_async<16>(tile + L::offset(n, k) * 4, ok ? w + (long long)(row0 + n) * K + k0 + k : w, ok);
            }
        } else {
#pragma unroll 4
            for (int i = 0; i < BLOCK_N * BLOCK_K / T::THREADS; ++i) {
                const int e = threadIdx.x + i * T::THREADS, n = e / BLOCK_K, k = e % BLOCK_K;
                const bool ok = row0 + n < N && k0 + k < K;
                kjit::copy_async<4>(tile + L::offset(n, k) * 4, ok ? w + (long long)(row0 + n) * K + k0 + k : w, ok);
            }
        }
    }
};

#if KJIT_GEMM_SM90
/// acc += Xᵀ_tile · Wᵀ_tile for this warpgroup's 64 columns, over one K tile in shared memory.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
__device__ __forceinline__ void multiply_tile_sm90(Sm90Accumulators<BLOCK_N>& acc, unsigned w_tile, const float* x_tile)
{
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    using L = CoreLayout<BLOCK_K>;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float* x = x_tile + threadIdx.x / 128 * 64 + threadIdx.x / 32 % 4 * 16 + g;  // pixel 16w + g
    unsigned a[BLOCK_K / 8][4];
#pragma unroll
    for (int s = 0; s < BLOCK_K / 8; ++s) {
        const float* row = x + (s * 8 + t) * T::X_STRIDE;
        a[s][0] = kjit::to_tf32(row[0]);
        a[s][1] = kjit::to_tf32(row[8]);
        a[s][2] = kjit::to_tf32(row[4 * T::X_STRIDE]);
        a[s][3] = kjit::to_tf32(row[4 * T::X_STRIDE + 8]);
    }
    kjit::wgmma_fence();  // the A fragments above, the accumulators of the last tile
#pragma unroll
    for (int s = 0; s < BLOCK_K / 8; ++s)
        kjit::wgmma_tf32<BLOCK_N>(acc, a[s],
                                  kjit::wgmma_descriptor(w_tile + s * 2 * 128, L::LEADING_BYTES, L::STRIDE_BYTES));
    kjit::wgmma_commit();
    kjit::wgmma_wait<0>();  // the stage is refilled once every warp passes the next barrier
}
#endif

/// acc += W · X over `k`, through the same cp.async pipeline as the sm80 mainloop.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, class Columns>
__device__ __forceinline__ void mainloop_sm90(Sm90Accumulators<BLOCK_N>& acc,
                                              const Sm90Weights<BLOCK_M, BLOCK_N, BLOCK_K>& weights,
                                              const Columns& columns, KRange k, float* shared)
{
#if KJIT_GEMM_SM90
    run_pipeline<BLOCK_M, BLOCK_N, BLOCK_K>(
        weights, columns, k, shared, [] { kjit::fence_proxy_async(); },  // this thread's copies, for wgmma
        [&](const float*, unsigned w_tile, const float* x_tile) {
            multiply_tile_sm90<BLOCK_M, BLOCK_N, BLOCK_K>(acc, w_tile, x_tile);
        });
#endif
}

}  // namespace gemm
