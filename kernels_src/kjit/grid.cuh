// Index helpers shared by kernels: 64-bit so large tensors never overflow int32 arithmetic.
#pragma once
#include "kjit/ceil_div.cuh"

namespace kjit {
__device__ __forceinline__ long long block_index() { return blockIdx.x; }
__device__ __forceinline__ long long grid_blocks() { return gridDim.x; }

struct TileCoord {
    int m;  // tile index along the GROUP_M-swizzled axis
    int n;
};

/// The tile a 1-D program id computes, swizzled so GROUP_M consecutive programs share their
/// `n` tiles' operands in L2 (the grouping of Triton's matmul tutorial).
__device__ __forceinline__ TileCoord grouped_tile(int pid, int tiles_m, int tiles_n, int group_m)
{
    const int per_group = group_m * tiles_n;
    const int first_m = (pid / per_group) * group_m;
    const int group_size = min(tiles_m - first_m, group_m);
    const int in_group = pid % per_group;
    return {first_m + in_group % group_size, in_group / group_size};
}
}  // namespace kjit
