// Fused Conv2d (any kernel size, stride, padding, groups; dilation 1) + inference BatchNorm +
// SiLU as an implicit GEMM on tensor cores, one GEMM per group:
//   Y_g[n, j] = silu(scale[n] · Σ_k W_g[n, k] · patch_j[k] + shift[n])
// with k = (ci, kh, kw) over the group's input channels and j = (b, oh, ow). Patches are
// gathered from x straight into shared memory: the im2col matrix never exists. The GEMM
// (tile scheduler, mainloop, epilogue) is kjit/gemm.cuh; this file is its column policy.
#include "kjit/divisor.cuh"
#include "kjit/gemm.cuh"

namespace implicit_gemm {

using kjit::Divisor;

/// Image patches as GEMM columns. Each thread keeps one column j — an output pixel — for the
/// whole K loop, and gathers its patch rows k = (ci, kh, kw), zero outside the padded image.
template <int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct Columns {
    using T = gemm::Tiles<BLOCK_M, BLOCK_N, BLOCK_K>;
    const float* x;  // first input channel of this group in image 0
    long long P;     // columns: B·OH·OW
    int M, K, H, W, OW, stride, pad;
    long long x_image_stride;  // C_IN·H·W where x is tight
    long long y_image_stride;  // C_OUT·y_row_stride where y is
    Divisor taps, kw_count;    // KH·KW and KW
    // This thread's column: its image's input and the patch's top-left corner.
    const float* x_image = nullptr;
    int ih0 = 0, iw0 = 0;
    bool valid = false;

    __device__ __forceinline__ gemm::Column column(long long j) const
    {
        if (j >= P) return {0, 0, false};
        const long long b = j / M, m = j - b * M;
        return {b * x_image_stride, b * y_image_stride + m, true};
    }

    __device__ __forceinline__ void own(long long j)
    {
        valid = j < P;
        if (!valid) return;
        const long long b = j / M;
        const int m = static_cast<int>(j - b * M), oh = m / OW, ow = m - oh * OW;
        x_image = x + b * x_image_stride;
        ih0 = oh * stride - pad;
        iw0 = ow * stride - pad;
    }

    __device__ __forceinline__ void load(unsigned tile, int kt) const
    {
        constexpr int STEP = T::THREADS / BLOCK_M;
        constexpr int ROWS = (BLOCK_K + STEP - 1) / STEP;
        const int c = threadIdx.x % BLOCK_M, r0 = threadIdx.x / BLOCK_M, k0 = kt * BLOCK_K;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const int r = r0 + i * STEP;
            if (ROWS * STEP > BLOCK_K && r >= BLOCK_K) break;
            const unsigned k = k0 + r;
            const unsigned ci = taps.div(k), tap = k - ci * taps.d;
            const unsigned kh = kw_count.div(tap), kw = tap - kh * kw_count.d;
            const int ih = ih0 + static_cast<int>(kh), iw = iw0 + static_cast<int>(kw);
            const bool ok = valid && k < static_cast<unsigned>(K) &&
                            static_cast<unsigned>(ih) < static_cast<unsigned>(H) &&
                            static_cast<unsigned>(iw) < static_cast<unsigned>(W);
            const float* src = ok ? x_image + ((long long)ci * H + ih) * W + iw : x;
            kjit::copy_async<4>(tile + (r * T::X_STRIDE + c) * 4, src, ok);
        }
    }
};

}  // namespace implicit_gemm

template <int BLOCK_M, int BLOCK_N, int BLOCK_K, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_forward(const float* x, const float* w, const float* bn_scale,
                                                       const float* bn_shift, float* y, int B, int C_IN, int H, int W,
                                                       int C_OUT, int OH, int OW, int KH, int KW, int stride, int pad,
                                                       int groups, int y_row_stride, long long x_image_stride,
                                                       long long y_image_stride, const float* residual)
{
    const int g = blockIdx.y;  // one GEMM per group
    const int cin_pg = C_IN / groups, cout_pg = C_OUT / groups;
    const int M = OH * OW, K = cin_pg * KH * KW;
    const long long P = (long long)B * M;
    const gemm::Tile tile = gemm::this_tile<BLOCK_M, BLOCK_N, GROUP_M>(P, cout_pg);
    const long long col0 = tile.col0;
    const float* w_group = w + (long long)g * cout_pg * K;
    const gemm::Weights<BLOCK_M, BLOCK_N, BLOCK_K> weights{w_group, K, cout_pg, tile.row0,
                                                           K % 4 == 0 && gemm::aligned_16(w_group)};
    implicit_gemm::Columns<BLOCK_M, BLOCK_N, BLOCK_K> columns{x + (long long)g * cin_pg * H * W,
                                                              P,
                                                              M,
                                                              K,
                                                              H,
                                                              W,
                                                              OW,
                                                              stride,
                                                              pad,
                                                              x_image_stride,
                                                              y_image_stride,
                                                              implicit_gemm::Divisor(KH * KW),
                                                              implicit_gemm::Divisor(KW)};
    columns.own(col0 + threadIdx.x % BLOCK_M);
    const long long first_row = (long long)g * cout_pg;
    const long long first = first_row * y_row_stride;
    gemm::gemm_bn_silu(weights, columns, col0, bn_scale + first_row, bn_shift + first_row, y + first,
                       residual ? residual + first : nullptr, y_row_stride);
}
