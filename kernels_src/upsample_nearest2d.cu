// Nearest-neighbour upsampling by an integer SCALE, NCHW: y[b, c, h, w] = x[b, c, h / SCALE, w / SCALE];
// x's and y's images lie x_stride and y_stride elements apart.
#include "kjit/grid.cuh"

template <int BLOCK, int SCALE>
__device__ __forceinline__ void upsample_nearest2d(const float* x, float* y, int B, int C, int H, int W,
                                                   long long x_stride, long long y_stride)
{
    const int OH = H * SCALE, OW = W * SCALE;
    const long long n = (long long)B * C * OH * OW;
    for (long long i = kjit::block_index() * BLOCK + threadIdx.x; i < n; i += kjit::grid_blocks() * BLOCK) {
        const int ow = i % OW, oh = i / OW % OH;
        const long long plane = i / ((long long)OW * OH);
        const long long b = plane / C, c = plane - b * C;
        y[b * y_stride + (c * OH + oh) * OW + ow] = x[b * x_stride + (c * H + oh / SCALE) * W + ow / SCALE];
    }
}
