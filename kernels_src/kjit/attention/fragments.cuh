// The 16-bit tensor-core pieces of the attention mainloop (sm_80+): the m16n8k16 MMA with fp32
// accumulation, ldmatrix fragment loads from shared memory, two floats packed into one register
// of 16-bit values, and the base-2 exponential. Fragment ownership, per the PTX ISA, with
// g = lane / 4 and t = lane % 4: A (16×16, row) a = {A[g][2t..], A[g+8][2t..], A[g][2t+8..],
// A[g+8][2t+8..]}, B (16×8, col) b = {B[2t..][g], B[2t+8..][g]}, D (16×8)
// d = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}.
#pragma once
#include "kjit/types.cuh"

namespace attention {

/// d += a · b for one 16×8×16 tile of T (kjit::f16 or kjit::bf16) values, fp32 accumulation.
template <class T>
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);

#define KJIT_ATTENTION_MMA(T, PTX_TYPE)                                                                   \
    template <>                                                                                           \
    __device__ __forceinline__ void mma<T>(float(&d)[4], const unsigned(&a)[4], unsigned b0, unsigned b1) \
    {                                                                                                     \
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX_TYPE "." PTX_TYPE                       \
                     ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                       \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                     \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                     \
    }
KJIT_ATTENTION_MMA(kjit::f16, "f16")
KJIT_ATTENTION_MMA(kjit::bf16, "bf16")
#undef KJIT_ATTENTION_MMA

/// Four 8×8 matrices of 16-bit values from shared memory: lanes 8i … 8i+7 give the row
/// addresses of matrix i; each lane receives row lane / 4, elements 2(lane % 4) and the next.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned address)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}
/// The same, each matrix transposed (a column-major B fragment from row-major rows).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

/// {lo, hi} rounded to nearest into one register of two T, lo in the low half (as mma reads it).
template <class T>
__device__ __forceinline__ unsigned pack(float lo, float hi);

template <>
__device__ __forceinline__ unsigned pack<kjit::f16>(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
template <>
__device__ __forceinline__ unsigned pack<kjit::bf16>(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/// 2^x (the softmax's exponential, with log2 e folded into the scale).
__device__ __forceinline__ float exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float log2(float x)
{
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/// −∞ without <cmath> (NVRTC has none).
__device__ __forceinline__ float minus_infinity() { return __int_as_float(0xff800000); }

}  // namespace attention
