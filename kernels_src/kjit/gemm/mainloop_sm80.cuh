// The sm80 mainloop (sm_80/86/87/89, and the fallback on sm_90): acc += W · X over this block's
// K tiles, a STAGES-deep cp.async pipeline feeding TF32 mma.sync m16n8k8 from shared memory; an
// FMA path with the same fragment ownership for archs without TF32 MMA (or with KJIT_GEMM_FMA).
// W is row-major [N, K] (Weights); X is whatever a Columns policy gathers: it provides
// load(stage, kt), filling a [BLOCK_K][BLOCK_M] stage.
#pragma once
#include "kjit/gemm/pipeline.cuh"
#include "kjit/gemm/tile_scheduler.cuh"
#include "kjit/gemm/tiles.cuh"
#include "kjit/ptx.cuh"

#if __CUDA_ARCH__ < 800 || defined(KJIT_GEMM_FMA)
#define KJIT_GEMM_USE_MMA 0
#else
#define KJIT_GEMM_USE_MMA 1
#endif

namespace gemm {

__device__ __forceinline__ bool aligned_16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

/// Copies ROWS rows, STEP = THREADS/CHUNKS apart from row r0, of one shared tile (rows STRIDE
/// floats apart): a short unrolled run of cp.async, rows at or past rows_left zero-filled.
template <int THREADS, int BYTES, int TILE_ROWS, int CHUNKS, int STRIDE>
__device__ __forceinline__ void copy_rows(unsigned dst, const float* src, long long src_row_step, int r0, int rows_left,
                                          bool column_ok)
{
    constexpr int STEP = THREADS / CHUNKS;
    constexpr int ROWS = (TILE_ROWS + STEP - 1) / STEP;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const int r = r0 + i * STEP;
        if (ROWS * STEP > TILE_ROWS && r >= TILE_ROWS) break;
        const bool ok = column_ok && r < rows_left;
        kjit::copy_async<BYTES>(dst + i * STEP * STRIDE * 4, ok ? src + i * STEP * src_row_step : src, ok);
    }
}

/// Copies one K-tile of W's rows row0… into a stage; each thread keeps one k-chunk.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Weights {
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    const float* w;
    int K, N, row0;
    bool vector;  // 16-byte copies when rows are 16-byte aligned

    __device__ __forceinline__ void load(unsigned tile, int kt) const
    {
        const int tid = threadIdx.x, k0 = kt * BLOCK_K;
        if (vector) {
            constexpr int CHUNKS = BLOCK_K / 4;
            const int c = tid % CHUNKS * 4, r0 = tid / CHUNKS;
            copy_rows<T::THREADS, 16, BLOCK_N, CHUNKS, T::W_STRIDE>(tile + (r0 * T::W_STRIDE + c) * 4,
                                                                    w + (long long)(row0 + r0) * K + k0 + c, K, r0,
                                                                    N - row0, k0 + c < K);
        } else {
            const int c = tid % BLOCK_K, r0 = tid / BLOCK_K;
            copy_rows<T::THREADS, 4, BLOCK_N, BLOCK_K, T::W_STRIDE>(tile + (r0 * T::W_STRIDE + c) * 4,
                                                                    w + (long long)(row0 + r0) * K + k0 + c, K, r0,
                                                                    N - row0, k0 + c < K);
        }
    }
};

/// acc += W_tile · X_tile for this warp's fragments, over one K-tile in shared memory.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
__device__ __forceinline__ void multiply_tile(float (&acc)[Tiles<BLOCK_M, BLOCK_N, BLOCK_K>::FRAGS_N][4][4],
                                              const float* w_tile, const float* x_tile, int warp_row, int warp_col)
{
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    const int g = threadIdx.x % 32 / 4;  // fragment row group
    const int q = threadIdx.x % 4;       // fragment column within the group
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += 8) {
#if KJIT_GEMM_USE_MMA
        unsigned a[T::FRAGS_N][4], b[T::FRAGS_M][2];
#pragma unroll
        for (int i = 0; i < T::FRAGS_N; ++i) {
            const float* row = w_tile + (warp_row + i * 16 + g) * T::W_STRIDE + kk + q;
            a[i][0] = kjit::to_tf32(row[0]);
            a[i][1] = kjit::to_tf32(row[8 * T::W_STRIDE]);
            a[i][2] = kjit::to_tf32(row[4]);
            a[i][3] = kjit::to_tf32(row[8 * T::W_STRIDE + 4]);
        }
#pragma unroll
        for (int j = 0; j < T::FRAGS_M; ++j) {
            const float* column = x_tile + (kk + q) * T::X_STRIDE + warp_col + j * 8 + g;
            b[j][0] = kjit::to_tf32(column[0]);
            b[j][1] = kjit::to_tf32(column[4 * T::X_STRIDE]);
        }
#pragma unroll
        for (int i = 0; i < T::FRAGS_N; ++i)
#pragma unroll
            for (int j = 0; j < T::FRAGS_M; ++j) kjit::mma_tf32(acc[i][j], a[i], b[j]);
#else
        // Same fragment ownership as the MMA path, each element a dot product of length 8.
#pragma unroll
        for (int i = 0; i < T::FRAGS_N; ++i)
#pragma unroll
            for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = warp_row + i * 16 + g + (e / 2) * 8;
                    const int c = warp_col + j * 8 + 2 * q + e % 2;
#pragma unroll
                    for (int t = 0; t < 8; ++t)
                        acc[i][j][e] = fmaf(w_tile[r * T::W_STRIDE + kk + t], x_tile[(kk + t) * T::X_STRIDE + c],
                                            acc[i][j][e]);
                }
#endif
    }
}

/// acc += W · X over `k` (this block's K tiles), through the cp.async pipeline.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, class Columns>
__device__ __forceinline__ void mainloop_sm80(Accumulators<BLOCK_M, BLOCK_N, BLOCK_K>& acc,
                                              const Weights<BLOCK_M, BLOCK_N, BLOCK_K>& weights, const Columns& columns,
                                              KRange k, float* shared, int warp_row, int warp_col)
{
    run_pipeline<BLOCK_M, BLOCK_N, BLOCK_K>(weights, columns, k, shared, [&](const float* w_tile, const float* x_tile) {
        multiply_tile<BLOCK_M, BLOCK_N, BLOCK_K>(acc, w_tile, x_tile, warp_row, warp_col);
    });
}

}  // namespace gemm
