// y = a + b over B images of IMAGE elements each (residual connections). Each tensor's images lie
// its own stride apart (a channel slice of a concat's output has the concat's); one element per
// thread per step of a grid-stride loop, 64-bit indices.
#include "kjit/grid.cuh"

template <int BLOCK>
__device__ __forceinline__ void add(const float* a, const float* b, float* y, long long n, long long image,
                                    long long a_stride, long long b_stride, long long y_stride)
{
    for (long long i = kjit::block_index() * BLOCK + threadIdx.x; i < n; i += kjit::grid_blocks() * BLOCK) {
        const long long img = i / image, e = i - img * image;
        y[img * y_stride + e] = a[img * a_stride + e] + b[img * b_stride + e];
    }
}
