// Fused 1×1 Conv2d (stride 1, no padding, groups 1) + inference BatchNorm + SiLU as a GEMM:
//   Y[n, j] = silu(scale[n] · Σ_k W[n, k] · X[k, j] + shift[n])
// with n an output channel, k an input channel and j = b·M + m a column over every pixel of
// every image: folding the batch into the columns keeps 7×7 layers from wasting their tiles.
// The GEMM (tile scheduler, mainloop, epilogue) is kjit/gemm.cuh; this file is its column policy.
#include "kjit/gemm.cuh"

namespace pointwise {

/// X as GEMM columns: column j = b·M + m is pixel m of image b, K rows M floats apart; images
/// x_image_stride (x) and y_image_stride (y) floats apart.
/// Each thread keeps one column (or 4-column chunk) for the whole K loop.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Columns {
    using T = gemm::Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    const float* x;
    long long P;  // columns: every pixel of every image
    int M, K;
    long long x_image_stride, y_image_stride;
    bool vector;        // 16-byte copies: M % 4 == 0, x_image_stride too, and x aligned
    gemm::Column mine;  // this thread's column (vector: first of 4)

    __device__ __forceinline__ gemm::Column column(long long j) const
    {
        if (j >= P) return {0, 0, false};
        const long long b = j / M, m = j - b * M;
        return {b * x_image_stride + m, b * y_image_stride + m, true};
    }

    __device__ __forceinline__ void load(unsigned tile, int kt) const
    {
        const int tid = threadIdx.x, k0 = kt * BLOCK_K;
        if (vector) {
            constexpr int CHUNKS = BLOCK_M / 4;
            const int c = tid % CHUNKS * 4, r0 = tid / CHUNKS;
            gemm::copy_rows<T::THREADS, 16, BLOCK_K, CHUNKS, T::X_STRIDE>(tile + (r0 * T::X_STRIDE + c) * 4,
                                                                          x + mine.x_offset + (long long)(k0 + r0) * M,
                                                                          M, r0, K - k0, mine.valid);
        } else {
            const int c = tid % BLOCK_M, r0 = tid / BLOCK_M;
            gemm::copy_rows<T::THREADS, 4, BLOCK_K, BLOCK_M, T::X_STRIDE>(tile + (r0 * T::X_STRIDE + c) * 4,
                                                                          x + mine.x_offset + (long long)(k0 + r0) * M,
                                                                          M, r0, K - k0, mine.valid);
        }
    }
};

}  // namespace pointwise

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_gemm_forward(const float* x, const float* w, const float* bn_scale,
                                                            const float* bn_shift, float* y, int B, int C_IN, int C_OUT,
                                                            int M, int y_row_stride, long long x_image_stride,
                                                            long long y_image_stride, const float* residual)
{
    const long long P = (long long)B * M;
    const gemm::Tile tile = gemm::this_tile<BLOCK_M, BLOCK_N, GROUP_M>(P, C_OUT);
    const long long col0 = tile.col0;
    const gemm::Weights<BLOCK_M, BLOCK_N, BLOCK_K> weights{w, C_IN, C_OUT, tile.row0,
                                                           C_IN % 4 == 0 && gemm::aligned_16(w)};
    pointwise::Columns<BLOCK_M, BLOCK_N, BLOCK_K> columns{
        x, P, M, C_IN, x_image_stride, y_image_stride, M % 4 == 0 && x_image_stride % 4 == 0 && gemm::aligned_16(x),
        {}};
    const int mine = columns.vector ? threadIdx.x % (BLOCK_M / 4) * 4 : threadIdx.x % BLOCK_M;
    columns.mine = columns.column(col0 + mine);
    gemm::gemm_bn_silu(weights, columns, col0, bn_scale, bn_shift, y, residual, y_row_stride);
}
