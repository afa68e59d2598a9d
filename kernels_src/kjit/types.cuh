// Storage types for 16-bit floats, so kernels need no CUDA headers at run time.
// Kernels that compute in f16/bf16 convert with inline PTX (cvt.*); these only carry bits.
#pragma once

namespace kjit {
struct alignas(2) f16 {
    unsigned short bits;
};
struct alignas(2) bf16 {
    unsigned short bits;
};
}  // namespace kjit
