// One input of a channel concatenation: src [B, C_SRC, HW] lands in dst at channels C_OFFSET …
// C_OFFSET + C_SRC of each image; images lie src_stride and dst_stride elements apart. A concat
// of k inputs is k launches of this kernel.
#include "kjit/grid.cuh"

template <int BLOCK>
__device__ __forceinline__ void concat_channels(const float* src, float* dst, int B, int C_SRC, int C_OFFSET,
                                                long long HW, long long src_stride, long long dst_stride)
{
    const long long image = (long long)C_SRC * HW, n = B * image;
    for (long long i = kjit::block_index() * BLOCK + threadIdx.x; i < n; i += kjit::grid_blocks() * BLOCK) {
        const long long b = i / image, e = i - b * image;  // e = c·HW + pixel
        dst[b * dst_stride + C_OFFSET * HW + e] = src[b * src_stride + e];
    }
}
