// The tensor-core GEMM core of the conv kernels: Y[n, j] = silu(scale[n]·Σ_k W[n, k]·X[k, j] +
// shift[n]). W is row-major [N, K]; X is whatever a Columns policy gathers (the 1×1 kernel reads
// pixels directly, the general kernel gathers im2col patches). TF32 mma.sync m16n8k8 fed by a
// STAGES-deep cp.async pipeline; an FMA path for archs without it (or with KJIT_GEMM_FMA).
// Split-K: when launched in clusters of S blocks (sm_90+), the S blocks of a cluster share one
// output tile, each takes 1/S of K, and block 0 sums the partial tiles through distributed
// shared memory before the epilogue — more blocks for small, deep layers, and no workspace.
#pragma once
#include "kjit/bn_silu.cuh"
#include "kjit/gemm_geometry.cuh"
#include "kjit/grid.cuh"
#include "kjit/ptx.cuh"

#if __CUDA_ARCH__ < 800 || defined(KJIT_GEMM_FMA)
#define KJIT_GEMM_USE_MMA 0
#else
#define KJIT_GEMM_USE_MMA 1
#endif

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

/// Where column j's pixels sit: the start of its input (policy-specific) and of its output.
struct Column {
    long long x_offset;
    long long y_offset;
    bool valid;
};

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

/// The output tile this block works on: one per cluster (blocks of a cluster split its K).
__device__ __forceinline__ int tile_index() { return blockIdx.x / kjit::cluster_size(); }

/// One output tile: rows row0… of W's N, columns col0… of X. `columns` copies X's K-tiles and
/// says where each output column goes; bn_scale, bn_shift and y start at row 0 of this GEMM.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K, class Columns>
__device__ __forceinline__ void gemm_bn_silu(const Weights<BLOCK_M, BLOCK_N, BLOCK_K>& weights, const Columns& columns,
                                             long long col0, const float* bn_scale, const float* bn_shift, float* y,
                                             int y_row_stride)
{
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    extern __shared__ __align__(16) float shared[];
    float* w_tiles = shared;                        // [STAGES][W_STAGE]
    float* x_tiles = shared + STAGES * T::W_STAGE;  // [STAGES][X_STAGE]
    const unsigned w_stages = kjit::shared_address(w_tiles), x_stages = kjit::shared_address(x_tiles);

    const int warp = threadIdx.x / 32;
    const int warp_row = warp / T::WARPS_M * T::WARP_N;  // first channel of this warp in the tile
    const int warp_col = warp % T::WARPS_M * 32;         // first column of this warp in the tile
    float acc[T::FRAGS_N][T::FRAGS_M][4] = {};

    // This block's share of K: all of it, or 1/split of it inside a split-K cluster.
    const int split = kjit::cluster_size(), rank = kjit::cluster_rank();
    const int all_k_tiles = kjit::ceil_div(weights.K, BLOCK_K);
    const int per_block = kjit::ceil_div(all_k_tiles, split);
    const int kt_begin = min(all_k_tiles, rank * per_block);
    const int k_tiles = min(all_k_tiles, kt_begin + per_block) - kt_begin;

    // Pipeline: STAGES-1 K-tiles in flight while one is multiplied.
    auto load = [&](int stage, int kt) {
        weights.load(w_stages + stage * T::W_STAGE * 4, kt_begin + kt);
        columns.load(x_stages + stage * T::X_STAGE * 4, kt_begin + kt);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load(s, s);
        kjit::copy_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        kjit::copy_wait<STAGES - 2>();
        __syncthreads();  // tile kt is in; every warp is done with the stage refilled below
        if (kt + STAGES - 1 < k_tiles) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        kjit::copy_commit();
        const int s = kt % STAGES;
        multiply_tile<BLOCK_M, BLOCK_N, BLOCK_K>(acc, w_tiles + s * T::W_STAGE, x_tiles + s * T::X_STAGE, warp_row,
                                                 warp_col);
    }

    // Split-K: every block parks its partial tile in its own shared memory (the pipeline's,
    // free now); block 0 adds the others' through the cluster, then finishes alone.
    if (split > 1) {
        kjit::copy_wait<0>();
        __syncthreads();
        // partial[slot][thread], slot = (i·FRAGS_M + j)·4 + e: conflict-free, the same in every block.
        float* partial = shared;
#pragma unroll
        for (int i = 0; i < T::FRAGS_N; ++i)
#pragma unroll
            for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    partial[((i * T::FRAGS_M + j) * 4 + e) * T::THREADS + threadIdx.x] = acc[i][j][e];
        kjit::cluster_sync();
        if (rank == 0) {
            const unsigned mine = kjit::shared_address(partial + threadIdx.x);
            for (int other = 1; other < split; ++other)
#pragma unroll
                for (int i = 0; i < T::FRAGS_N; ++i)
#pragma unroll
                    for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e)
                            acc[i][j][e] += kjit::load_from_cluster_block(
                                mine + ((i * T::FRAGS_M + j) * 4 + e) * T::THREADS * 4, other);
        }
        kjit::cluster_sync();  // the others stay until block 0 has read their partials
        if (rank != 0) return;
    }

    // Epilogue: BN + SiLU in registers, straight to y; nothing outside y's valid region.
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
            const int n = weights.row0 + warp_row + i * 16 + g + half * 8;
            if (n >= weights.N) continue;
            const float scale = bn_scale[n], shift = bn_shift[n];
            float* y_row = y + (long long)n * y_row_stride;
#pragma unroll
            for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    if (cols[j][h].valid)
                        y_row[cols[j][h].y_offset] = kjit::bn_silu(acc[i][j][half * 2 + h], scale, shift);
        }
}

}  // namespace gemm
