// ⌈a / b⌉ for positive integers: one definition for kernels (NVRTC) and host code alike.
#pragma once

namespace kjit {
template <class T>
constexpr T ceil_div(T a, T b)
{
    return (a + b - 1) / b;
}
}  // namespace kjit
