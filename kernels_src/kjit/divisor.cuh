// Division by a small run-time divisor without the divide instruction, for index arithmetic.
#pragma once

namespace kjit {

/// n / d for the small divisors of a conv's index arithmetic (d ≤ 64, n·d < 2³²): one
/// multiply-high by ⌈2³²/d⌉.
struct Divisor {
    unsigned d, magic;
    __device__ explicit Divisor(unsigned divisor) : d(divisor), magic(0xffffffffu / divisor + 1) {}
    __device__ __forceinline__ unsigned div(unsigned n) const { return d == 1 ? n : __umulhi(n, magic); }
};

}  // namespace kjit
