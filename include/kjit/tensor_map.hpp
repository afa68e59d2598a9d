// kjit/tensor_map.hpp — TMA tensor maps (sm_90+): a tiled view of a global tensor that a kernel
// copies boxes of, or an im2col view of a channels-last image batch that it copies a convolution's
// patches from, passed to it as a `TensorMap` parameter (a __grid_constant__ kjit::TensorMap).
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

/// The type of a tiled map's elements (TMA moves bytes; the type sets their size).
enum class TensorMapElement : std::uint8_t { f32, f16, bf16 };

/// A tiled map over a tensor of up to 5 dimensions, innermost (contiguous) first.
struct TiledTensorMap {
    const void* base = nullptr;
    std::span<const std::uint64_t> dims;          ///< elements per dimension
    std::span<const std::uint64_t> byte_strides;  ///< of dims[1], dims[2], … (dims[0] is contiguous)
    std::span<const std::uint32_t> box;           ///< elements per dimension of one copy
    TensorMapSwizzle swizzle = TensorMapSwizzle::bytes_128;
    TensorMapElement element = TensorMapElement::f32;

    /// Why TMA cannot take this map — the rule broken, in words — or "" when it can. Needs no driver.
    [[nodiscard]] std::string unsupported_reason() const;
    /// Encodes the map (elements outside the tensor read as zero) in the context that owns the
    /// tensor, from any thread. Throws UsageError with unsupported_reason(), or CudaError /
    /// NoDeviceError from the driver (a base the driver does not know: cuPointerGetAttribute).
    [[nodiscard]] TensorMap encode() const;
};

/// An im2col map over an NHWC f32 tensor, dims {C, W, H, N} innermost first: a copy reads
/// `pixels` consecutive window positions — along W, then H, then N, inside the bounding box —
/// shifted by the filter tap the kernel names, `channels` channels of each, zero where a read
/// leaves the tensor. For a convolution: lower corner −padding, upper corner padding −
/// (kernel − 1), element strides its stride; the positions are then its output pixels.
struct Im2colTensorMap {
    const void* base = nullptr;
    std::array<std::uint64_t, 4> dims{};                 ///< elements along C, W, H, N
    std::array<std::uint64_t, 3> byte_strides{};         ///< of W, H and N (C is contiguous)
    std::array<int, 2> lower_corner{};                   ///< W, H: the box's first corner from (0, 0)
    std::array<int, 2> upper_corner{};                   ///< W, H: its last from (W, H), exclusive
    std::array<std::uint32_t, 2> element_strides{1, 1};  ///< W, H: the step between positions
    std::uint32_t channels = 32;                         ///< per position and copy
    std::uint32_t pixels = 128;                          ///< positions per copy
    TensorMapSwizzle swizzle = TensorMapSwizzle::bytes_128;

    /// Why TMA cannot take this map — the rule broken, in words — or "" when it can. Needs no driver.
    [[nodiscard]] std::string unsupported_reason() const;
    /// Encodes the map as TiledTensorMap::encode does (cuTensorMapEncodeIm2col).
    [[nodiscard]] TensorMap encode() const;
};

}  // namespace kjit
