// The fused epilogue of the conv kernels: inference BatchNorm folded to scale/shift, then SiLU.
#pragma once

namespace kjit {

/// v = scale·acc + shift;  y = v·sigmoid(v) = v / (1 + e^−v).
__device__ __forceinline__ float bn_silu(float acc, float scale, float shift)
{
    const float v = fmaf(scale, acc, shift);
    return v / (1.0f + __expf(-v));
}

}  // namespace kjit
