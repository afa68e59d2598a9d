// The 16-bit warpgroup MMAs of the Hopper attention mainloop (sm_90a): D (64 × N, fp32) += A · B
// over k = 16, A and B through shared-memory descriptors (both K-major: S = Q·Kᵀ), or A from
// registers and B N-major (the descriptor transposed: O += P·V with V's rows along K). The
// register fragments and accumulator layouts are mma.sync m16n8k16's, a warp per 16 rows.
#pragma once
#include "kjit/types.cuh"

namespace attention {

/// ACCUMULATE false: D = A · B, whatever D held (scale-d 0), so the caller need not clear it.
template <class T, int N, bool ACCUMULATE = true>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], unsigned long long a, unsigned long long b);
template <class T, int N>
__device__ __forceinline__ void wgmma_rs_n_major(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b);

// The accumulators of one 64 × N wgmma (N/2 floats a thread): their constraints and names.
#define KJIT_D8(o)                                                                                                  \
    "+f"(d[o + 0]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), \
        "+f"(d[o + 7])
#define KJIT_D_32 KJIT_D8(0), KJIT_D8(8), KJIT_D8(16), KJIT_D8(24)
#define KJIT_D_64 KJIT_D_32, KJIT_D8(32), KJIT_D8(40), KJIT_D8(48), KJIT_D8(56)
#define KJIT_NAMES_32                                                                                                \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31"
#define KJIT_NAMES_64                                                                                                \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
    "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

// D (+)= A · B from two descriptors for one (type, N, accumulate): scale-d ACCUMULATE (1 or 0), no
// negation or transposition. Operand numbers follow the N/2 accumulators.
#define KJIT_WGMMA_SS(T, PTX_TYPE, N, HALF, SS_A, SS_B, ACCUMULATE, SCALE_D)                                        \
    template <>                                                                                                     \
    __device__ __forceinline__ void wgmma_ss<T, N, ACCUMULATE>(float(&d)[HALF], unsigned long long a,               \
                                                               unsigned long long b)                                \
    {                                                                                                               \
        asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TYPE "." PTX_TYPE " {" KJIT_NAMES_##HALF \
                     "}, " SS_A ", " SS_B ", " SCALE_D ", 1, 1, 0, 0;\n"                                            \
                     : KJIT_D_##HALF                                                                                \
                     : "l"(a), "l"(b));                                                                             \
    }
// One (type, N): both descriptor forms, and the register form with B transposed (imm-trans-b 1).
#define KJIT_WGMMA_16BIT(T, PTX_TYPE, N, HALF, SS_A, SS_B, RS_A, RS_B)                                              \
    KJIT_WGMMA_SS(T, PTX_TYPE, N, HALF, SS_A, SS_B, true, "1")                                                      \
    KJIT_WGMMA_SS(T, PTX_TYPE, N, HALF, SS_A, SS_B, false, "0")                                                     \
    template <>                                                                                                     \
    __device__ __forceinline__ void wgmma_rs_n_major<T, N>(float(&d)[HALF], const unsigned(&a)[4],                  \
                                                           unsigned long long b)                                    \
    {                                                                                                               \
        asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TYPE "." PTX_TYPE " {" KJIT_NAMES_##HALF \
                     "}, " RS_A ", " RS_B ", 1, 1, 1, 1;\n"                                                         \
                     : KJIT_D_##HALF                                                                                \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                                         \
    }
KJIT_WGMMA_16BIT(kjit::bf16, "bf16", 64, 32, "%32", "%33", "{%32, %33, %34, %35}", "%36")
KJIT_WGMMA_16BIT(kjit::bf16, "bf16", 128, 64, "%64", "%65", "{%64, %65, %66, %67}", "%68")
KJIT_WGMMA_16BIT(kjit::f16, "f16", 64, 32, "%32", "%33", "{%32, %33, %34, %35}", "%36")
KJIT_WGMMA_16BIT(kjit::f16, "f16", 128, 64, "%64", "%65", "{%64, %65, %66, %67}", "%68")
#undef KJIT_WGMMA_16BIT
#undef KJIT_WGMMA_SS
#undef KJIT_D8
#undef KJIT_D_32
#undef KJIT_D_64
#undef KJIT_NAMES_32
#undef KJIT_NAMES_64

/// Pins registers an asynchronous wgmma writes: the compiler takes an MMA to be done once issued,
/// so without this it could move their uses before the wgmma_wait that makes them ready.
template <int ROWS, int COLS>
__device__ __forceinline__ void fence_registers(float (&r)[ROWS][COLS])
{
    for (int i = 0; i < ROWS; ++i)
        for (int j = 0; j < COLS; ++j) asm volatile("" : "+f"(r[i][j])::"memory");
}

}  // namespace attention
