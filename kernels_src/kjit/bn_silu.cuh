// The fused epilogue of the conv kernels: inference BatchNorm folded to scale/shift, then SiLU.
#pragma once

namespace kjit {

/// v = scale·acc + shift;  y = v·sigmoid(v) = v / (1 + e^−v). The fast exponential and
/// division (a few ulp) keep an epilogue of many outputs per thread cheap; where e^−v
/// overflows, the quotient is the limit, 0.
__device__ __forceinline__ float bn_silu(float acc, float scale, float shift)
{
    const float v = fmaf(scale, acc, shift);
    return __fdividef(v, 1.0f + __expf(-v));
}

}  // namespace kjit
