// Element conversions between f32, f16 and bf16, rounding to nearest even, in PTX so kernels
// need no CUDA headers at run time.
#pragma once
#include "kjit/types.cuh"

namespace kjit {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(f16 x)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
    return f;
}
__device__ __forceinline__ float to_float(bf16 x) { return __uint_as_float(unsigned(x.bits) << 16); }  // exact

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x)
{
    return x;
}
template <>
__device__ __forceinline__ f16 from_float<f16>(float x)
{
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
    return h;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x)
{
    bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
    return h;
}

}  // namespace kjit
