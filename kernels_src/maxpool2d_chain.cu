// Max pooling over K×K windows, stride 1, padding K/2 (the image keeps its size), applied `repeats`
// times, each to the last result, every result written: y1 = pool(x), y2 = pool(y1), … — the SPPF
// block's chained pools in one launch instead of `repeats`. A block holds planes_per_block whole
// planes in shared memory (at most CAPACITY elements); a K×K max is a K-tall max of K-wide ones,
// so each repeat is a row pass and a column pass there, with −∞ outside the image. NCHW; each
// tensor's images lie its own stride apart.
#include "kjit/grid.cuh"

namespace kjit {
/// Element `i` of plane `plane` (= b·C + c) of an NCHW tensor whose images lie `image_stride` apart.
__device__ __forceinline__ long long plane_element(long long plane, int C, int HW, long long image_stride, int i)
{
    const long long b = plane / C, c = plane - b * C;
    return b * image_stride + c * HW + i;
}
}  // namespace kjit

template <int BLOCK, int CAPACITY>
__device__ __forceinline__ void maxpool2d_chain(const float* x, float* y1, float* y2, float* y3, float* y4, int planes,
                                                int C, int H, int W, int K, int repeats, int planes_per_block,
                                                long long x_stride, long long y1_stride, long long y2_stride,
                                                long long y3_stride, long long y4_stride)
{
    __shared__ float pooled[CAPACITY];   // the current result (x before the first pass)
    __shared__ float row_max[CAPACITY];  // its K-wide maxima
    float* const y[] = {y1, y2, y3, y4};
    const long long y_stride[] = {y1_stride, y2_stride, y3_stride, y4_stride};
    const int HW = H * W, reach = K / 2;
    for (long long first = kjit::block_index() * planes_per_block; first < planes;
         first += kjit::grid_blocks() * planes_per_block) {
        const int n = (int)min((long long)planes_per_block, planes - first) * HW;  // elements this step
        for (int e = threadIdx.x; e < n; e += BLOCK)
            pooled[e] = x[kjit::plane_element(first + e / HW, C, HW, x_stride, e % HW)];
        __syncthreads();
        for (int r = 0; r < repeats; ++r) {
            for (int e = threadIdx.x; e < n; e += BLOCK) {
                const int w = e % W;
                float m = pooled[e];
                for (int d = max(-reach, -w); d <= min(reach, W - 1 - w); ++d) m = fmaxf(m, pooled[e + d]);
                row_max[e] = m;
            }
            __syncthreads();
            for (int e = threadIdx.x; e < n; e += BLOCK) {
                const int h = e % HW / W;
                float m = row_max[e];
                for (int d = max(-reach, -h); d <= min(reach, H - 1 - h); ++d) m = fmaxf(m, row_max[e + d * W]);
                pooled[e] = m;
                y[r][kjit::plane_element(first + e / HW, C, HW, y_stride[r], e % HW)] = m;
            }
            __syncthreads();
        }
    }
}
