// One input of a channel concatenation: src [B, C_SRC, HW] lands in dst [B, C_DST, HW] at
// channels C_OFFSET … C_OFFSET + C_SRC. A concat of k inputs is k launches of this kernel.
#include "kjit/grid.cuh"

template <int BLOCK>
__device__ __forceinline__ void concat_channels(const float* src, float* dst, int B, int C_SRC, int C_DST, int C_OFFSET,
                                                long long HW)
{
    const long long n = (long long)B * C_SRC * HW;
    for (long long i = kjit::block_index() * BLOCK + threadIdx.x; i < n; i += kjit::grid_blocks() * BLOCK) {
        const long long pixel = i % HW, row = i / HW;  // row = b·C_SRC + c
        const long long b = row / C_SRC, c = row % C_SRC;
        dst[(b * C_DST + C_OFFSET + c) * HW + pixel] = src[i];
    }
}
