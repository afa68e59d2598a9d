// Fused 1×1 Conv2d (stride 1, no padding, groups 1) + inference BatchNorm + SiLU as a GEMM:
//   Y[n, j] = silu(scale[n] · Σ_k W[n, k] · X[k, j] + shift[n])
// with n an output channel, k an input channel and j = b·M + m a column over every pixel of
// every image: folding the batch into the columns keeps 7×7 layers from wasting their tiles.
// TF32 tensor cores (mma.sync m16n8k8) fed by a STAGES-deep cp.async pipeline; an FMA path
// for archs without them (or with KJIT_GEMM_FMA defined, so tests can run it anywhere).
#include "kjit/bn_silu.cuh"
#include "kjit/grid.cuh"
#include "kjit/ptx.cuh"

#if __CUDA_ARCH__ < 800 || defined(KJIT_GEMM_FMA)
#define KJIT_GEMM_USE_MMA 0
#else
#define KJIT_GEMM_USE_MMA 1
#endif

namespace gemm {

constexpr int STAGES = 3;

/// Block layout from the tile shape. Each warp owns 32 columns and WARP_N channels; kjit's host
/// side (Conv2dBnSiluGemmForward) derives the same numbers for the launch.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Tiles {
    static constexpr int WARPS_M = BLOCK_M / 32;
    static constexpr int WARPS_N = BLOCK_N >= 64 ? 2 : 1;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int WARP_N = BLOCK_N / WARPS_N;
    static constexpr int FRAGS_N = WARP_N / 16;  // 16-channel MMA tiles per warp
    static constexpr int FRAGS_M = 4;            // 8-column MMA tiles per warp
    // Shared tiles, padded so fragment reads hit 32 distinct banks.
    static constexpr int W_STRIDE = BLOCK_K + 4;  // W tile: [BLOCK_N][BLOCK_K]
    static constexpr int X_STRIDE = BLOCK_M + 8;  // X tile: [BLOCK_K][BLOCK_M]
    static constexpr int W_STAGE = BLOCK_N * W_STRIDE;
    static constexpr int X_STAGE = BLOCK_K * X_STRIDE;
};

/// Where a thread's columns start in X and Y: folding (b, m) into j once, not per element.
struct Column {
    long long x_offset;  // b·K·M + m
    long long y_offset;  // b·N·y_row_stride + m
    bool valid;
};

__device__ __forceinline__ Column column(long long j, long long P, int M, int K, int N, int y_row_stride)
{
    if (j >= P) return {0, 0, false};
    const long long b = j / M;
    const long long m = j - b * M;
    return {b * K * M + m, b * N * (long long)y_row_stride + m, true};
}

__device__ __forceinline__ bool aligned_16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15) == 0; }

/// Copies one K-tile of W (rows row0…) and X (columns col0…) into a pipeline stage. Each thread
/// owns a fixed chunk column (W: 4 or 1 k; X: 4 or 1 columns) and a fixed set of rows, so the
/// per-tile work is a pointer bump and a short unrolled run of cp.async.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Loader {
    using T = Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    const float* w;
    const float* x;
    int K, N, M, row0;
    bool w_vector, x_vector;  // 16-byte copies when rows are 16-byte aligned
    Column col;               // this thread's X column (vector: first of 4)

    /// ROWS rows, STEP apart from row r0, of a shared tile with rows STRIDE floats apart.
    template <int BYTES, int TILE_ROWS, int CHUNKS, int STRIDE>
    __device__ __forceinline__ static void rows(unsigned dst, const float* src, long long src_row_step, int r0,
                                                int rows_left, bool column_ok)
    {
        constexpr int STEP = T::THREADS / CHUNKS;
        constexpr int ROWS = (TILE_ROWS + STEP - 1) / STEP;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const int r = r0 + i * STEP;
            if (ROWS * STEP > TILE_ROWS && r >= TILE_ROWS) break;
            const bool ok = column_ok && r < rows_left;
            kjit::copy_async<BYTES>(dst + i * STEP * STRIDE * 4, ok ? src + i * STEP * src_row_step : src, ok);
        }
    }

    __device__ __forceinline__ void load(unsigned w_tile, unsigned x_tile, int kt) const
    {
        const int tid = threadIdx.x;
        const int k0 = kt * BLOCK_K;
        if (w_vector) {
            constexpr int CHUNKS = BLOCK_K / 4;
            const int c = tid % CHUNKS * 4, r0 = tid / CHUNKS;
            rows<16, BLOCK_N, CHUNKS, T::W_STRIDE>(w_tile + (r0 * T::W_STRIDE + c) * 4, w + (long long)(row0 + r0) * K + k0 + c,
                                                   K, r0, N - row0, k0 + c < K);
        } else {
            const int c = tid % BLOCK_K, r0 = tid / BLOCK_K;
            rows<4, BLOCK_N, BLOCK_K, T::W_STRIDE>(w_tile + (r0 * T::W_STRIDE + c) * 4, w + (long long)(row0 + r0) * K + k0 + c,
                                                   K, r0, N - row0, k0 + c < K);
        }
        if (x_vector) {
            constexpr int CHUNKS = BLOCK_M / 4;
            const int c = tid % CHUNKS * 4, r0 = tid / CHUNKS;
            rows<16, BLOCK_K, CHUNKS, T::X_STRIDE>(x_tile + (r0 * T::X_STRIDE + c) * 4, x + col.x_offset + (long long)(k0 + r0) * M,
                                                   M, r0, K - k0, col.valid);
        } else {
            const int c = tid % BLOCK_M, r0 = tid / BLOCK_M;
            rows<4, BLOCK_K, BLOCK_M, T::X_STRIDE>(x_tile + (r0 * T::X_STRIDE + c) * 4, x + col.x_offset + (long long)(k0 + r0) * M,
                                                   M, r0, K - k0, col.valid);
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
                        acc[i][j][e] = fmaf(w_tile[r * T::W_STRIDE + kk + t], x_tile[(kk + t) * T::X_STRIDE + c], acc[i][j][e]);
                }
#endif
    }
}

}  // namespace gemm

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_gemm_forward(const float* x, const float* w, const float* bn_scale,
                                                            const float* bn_shift, float* y, int B, int C_IN,
                                                            int C_OUT, int M, int y_row_stride)
{
    using T = gemm::Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    extern __shared__ __align__(16) float shared[];
    float* w_tiles = shared;                            // [STAGES][W_STAGE]
    float* x_tiles = shared + gemm::STAGES * T::W_STAGE;  // [STAGES][X_STAGE]

    const int K = C_IN, N = C_OUT;
    const long long P = (long long)B * M;  // columns: every pixel of every image
    const kjit::TileCoord tile = kjit::grouped_tile(blockIdx.x, (int)kjit::ceil_div<long long>(P, BLOCK_M),
                                                    kjit::ceil_div(N, BLOCK_N), GROUP_M);
    const long long col0 = (long long)tile.m * BLOCK_M;
    const int row0 = tile.n * BLOCK_N;

    // Loader: one X column (or 4-column chunk) per thread for the whole K loop.
    const bool x_vector = M % 4 == 0 && gemm::aligned_16(x);
    const int x_col = x_vector ? threadIdx.x % (BLOCK_M / 4) * 4 : threadIdx.x % BLOCK_M;
    const gemm::Loader<BLOCK_M, BLOCK_N, BLOCK_K> loader{
        w, x, K, N, M, row0, K % 4 == 0 && gemm::aligned_16(w), x_vector,
        gemm::column(col0 + x_col, P, M, K, N, y_row_stride)};
    const unsigned w_stages = kjit::shared_address(w_tiles), x_stages = kjit::shared_address(x_tiles);

    const int warp = threadIdx.x / 32;
    const int warp_row = warp / T::WARPS_M * T::WARP_N;  // first channel of this warp in the tile
    const int warp_col = warp % T::WARPS_M * 32;         // first column of this warp in the tile
    float acc[T::FRAGS_N][T::FRAGS_M][4] = {};

    // Pipeline: STAGES-1 K-tiles in flight while one is multiplied.
    const int k_tiles = kjit::ceil_div(K, BLOCK_K);
#pragma unroll
    for (int s = 0; s < gemm::STAGES - 1; ++s) {
        if (s < k_tiles) loader.load(w_stages + s * T::W_STAGE * 4, x_stages + s * T::X_STAGE * 4, s);
        kjit::copy_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        kjit::copy_wait<gemm::STAGES - 2>();
        __syncthreads();  // tile kt is in; every warp is done with the stage refilled below
        const int next = kt + gemm::STAGES - 1;
        if (next < k_tiles) {
            const int s = next % gemm::STAGES;
            loader.load(w_stages + s * T::W_STAGE * 4, x_stages + s * T::X_STAGE * 4, next);
        }
        kjit::copy_commit();
        const int s = kt % gemm::STAGES;
        gemm::multiply_tile<BLOCK_M, BLOCK_N, BLOCK_K>(acc, w_tiles + s * T::W_STAGE, x_tiles + s * T::X_STAGE,
                                                       warp_row, warp_col);
    }

    // Epilogue: BN + SiLU in registers, straight to y; nothing outside y's valid region.
    const int g = threadIdx.x % 32 / 4, q = threadIdx.x % 4;
    gemm::Column cols[T::FRAGS_M][2];
#pragma unroll
    for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            cols[j][h] = gemm::column(col0 + warp_col + j * 8 + 2 * q + h, P, M, K, N, y_row_stride);
#pragma unroll
    for (int i = 0; i < T::FRAGS_N; ++i)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int n = row0 + warp_row + i * 16 + g + half * 8;
            if (n >= N) continue;
            const float scale = bn_scale[n], shift = bn_shift[n];
            float* y_row = y + (long long)n * y_row_stride;
#pragma unroll
            for (int j = 0; j < T::FRAGS_M; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    if (cols[j][h].valid) y_row[cols[j][h].y_offset] = kjit::bn_silu(acc[i][j][half * 2 + h], scale, shift);
        }
}
