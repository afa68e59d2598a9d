// Index helpers shared by kernels: 64-bit so large tensors never overflow int32 arithmetic.
#pragma once
#include "kjit/ceil_div.cuh"

namespace kjit {
__device__ __forceinline__ long long block_index() { return blockIdx.x; }
__device__ __forceinline__ long long grid_blocks() { return gridDim.x; }
}  // namespace kjit
