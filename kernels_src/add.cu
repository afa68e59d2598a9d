// y = a + b over n elements (residual connections). One element per thread per step of a
// grid-stride loop, 64-bit indices.
#include "kjit/grid.cuh"

template <int BLOCK>
__device__ __forceinline__ void add(const float* a, const float* b, float* y, long long n)
{
    for (long long i = kjit::block_index() * BLOCK + threadIdx.x; i < n; i += kjit::grid_blocks() * BLOCK)
        y[i] = a[i] + b[i];
}
