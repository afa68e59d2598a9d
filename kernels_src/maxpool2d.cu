// Max pooling over K×K windows with a stride and implicit −∞ padding, NCHW; x's and y's images
// lie x_stride and y_stride elements apart. One output per thread per step of a grid-stride loop.
#include "kjit/grid.cuh"

template <int BLOCK>
__device__ __forceinline__ void maxpool2d(const float* x, float* y, int B, int C, int H, int W, int OH, int OW, int K,
                                          int stride, int pad, long long x_stride, long long y_stride)
{
    const long long n = (long long)B * C * OH * OW;
    for (long long i = kjit::block_index() * BLOCK + threadIdx.x; i < n; i += kjit::grid_blocks() * BLOCK) {
        const int ow = i % OW, oh = i / OW % OH;
        const long long plane = i / ((long long)OW * OH);  // b·C + c
        const long long b = plane / C, c = plane - b * C;
        const float* in = x + b * x_stride + c * H * W;
        const int h0 = oh * stride - pad, w0 = ow * stride - pad;
        float best = -__int_as_float(0x7f800000);  // −∞: padding never wins
        for (int kh = max(0, -h0); kh < K && h0 + kh < H; ++kh)
            for (int kw = max(0, -w0); kw < K && w0 + kw < W; ++kw) best = fmaxf(best, in[(h0 + kh) * W + w0 + kw]);
        y[b * y_stride + (c * OH + oh) * OW + ow] = best;
    }
}
