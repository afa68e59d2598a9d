// y ← α·x + β·y over n elements. The smallest shipped kernel: it exercises type constants,
// a header from kernels_src, 64-bit sizes and any grid size (grid-stride over tiles).
#include "kjit/grid.cuh"

template <typename T, int BLOCK, int ITEMS>
__device__ __forceinline__ void axpby(const T* x, T* y, T alpha, T beta, long long n)
{
    // A tile is BLOCK·ITEMS elements; thread t takes t, t+BLOCK, … so every load is coalesced.
    constexpr long long TILE = static_cast<long long>(BLOCK) * ITEMS;
    for (long long tile = kjit::block_index() * TILE; tile < n; tile += kjit::grid_blocks() * TILE) {
#pragma unroll
        for (int item = 0; item < ITEMS; ++item) {
            const long long i = tile + item * BLOCK + threadIdx.x;
            if (i < n) y[i] = alpha * x[i] + beta * y[i];
        }
    }
}
