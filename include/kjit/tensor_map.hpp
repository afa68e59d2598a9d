// kjit/tensor_map.hpp — TMA tensor maps (sm_90+): a tiled view of a global tensor that a kernel
// copies boxes of, passed to it as a `TensorMap` parameter (a __grid_constant__ kjit::TensorMap).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace kjit {

/// An encoded tensor map: 128 opaque bytes, as the driver writes them (aligned as CUtensorMap).
struct alignas(128) TensorMap {
    std::array<std::uint64_t, 16> opaque{};
};

/// How TMA lays a box's rows out in shared memory (the wgmma descriptor's swizzle must match).
enum class TensorMapSwizzle : std::uint8_t { none, bytes_32, bytes_64, bytes_128 };

/// A tiled map over an f32 tensor of up to 5 dimensions, innermost (contiguous) first.
struct TiledTensorMap {
    const void* base = nullptr;
    std::span<const std::uint64_t> dims;          ///< elements per dimension
    std::span<const std::uint64_t> byte_strides;  ///< of dims[1], dims[2], … (dims[0] is contiguous)
    std::span<const std::uint32_t> box;           ///< elements per dimension of one copy
    TensorMapSwizzle swizzle = TensorMapSwizzle::bytes_128;

    /// Why TMA cannot take this map — the rule broken, in words — or "" when it can. Needs no driver.
    [[nodiscard]] std::string unsupported_reason() const;
    /// Encodes the map (elements outside the tensor read as zero) in the context that owns the
    /// tensor, from any thread. Throws UsageError with unsupported_reason(), or CudaError /
    /// NoDeviceError from the driver (a base the driver does not know: cuPointerGetAttribute).
    [[nodiscard]] TensorMap encode() const;
};

}  // namespace kjit
