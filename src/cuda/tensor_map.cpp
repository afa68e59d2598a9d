// TMA tensor maps: the rules TMA puts on a map, checked with readable reasons, then encoded by
// the driver (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col).
#include <kjit/tensor_map.hpp>

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/error.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {

static_assert(sizeof(TensorMap) == sizeof(CUtensorMap) && alignof(TensorMap) == alignof(CUtensorMap));

namespace {

constexpr std::uint64_t f32_bytes = 4;  // im2col maps are over f32 tensors

constexpr std::uint64_t element_bytes(TensorMapElement e) { return e == TensorMapElement::f32 ? 4 : 2; }

CUtensorMapDataType driver_type(TensorMapElement e) {
    switch (e) {
        case TensorMapElement::f32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
        case TensorMapElement::f16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
        case TensorMapElement::bf16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    }
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

/// The widest inner box row a swizzle mode allows, in bytes (0: no limit beyond 256 elements).
constexpr std::uint64_t swizzle_span(TensorMapSwizzle s) {
    switch (s) {
        case TensorMapSwizzle::none: return 0;
        case TensorMapSwizzle::bytes_32: return 32;
        case TensorMapSwizzle::bytes_64: return 64;
        case TensorMapSwizzle::bytes_128: return 128;
    }
    return 0;
}

CUtensorMapSwizzle driver_swizzle(TensorMapSwizzle s) {
    switch (s) {
        case TensorMapSwizzle::none: return CU_TENSOR_MAP_SWIZZLE_NONE;
        case TensorMapSwizzle::bytes_32: return CU_TENSOR_MAP_SWIZZLE_32B;
        case TensorMapSwizzle::bytes_64: return CU_TENSOR_MAP_SWIZZLE_64B;
        case TensorMapSwizzle::bytes_128: return CU_TENSOR_MAP_SWIZZLE_128B;
    }
    return CU_TENSOR_MAP_SWIZZLE_NONE;
}

}  // namespace

namespace {

/// What both kinds of map share: a 16-byte aligned base, sizes TMA can index, 16-byte strides.
std::string layout_reason(const void* base, std::span<const std::uint64_t> dims,
                          std::span<const std::uint64_t> byte_strides) {
    if (reinterpret_cast<std::uintptr_t>(base) % 16)
        return fmt::format("the tensor's address {} is not 16-byte aligned", base);
    for (std::size_t i = 0; i < dims.size(); ++i)
        if (dims[i] == 0 || dims[i] > (1ull << 32))
            return fmt::format("dimension {} has {} elements: TMA takes 1 to 2^32", i, dims[i]);
    for (std::size_t i = 0; i < byte_strides.size(); ++i)
        if (byte_strides[i] % 16 || byte_strides[i] >= (1ull << 40))
            return fmt::format(
                "the stride of dimension {} is {} bytes: TMA needs a multiple of 16 below 2^40 "
                "(rows whose length is a multiple of 16 bytes: 4 f32 or 8 16-bit values)",
                i + 1, byte_strides[i]);
    return {};
}

/// Why a box row of `inner` bytes cannot be copied with `swizzle` ("" when it can).
std::string inner_box_reason(std::uint64_t inner, TensorMapSwizzle swizzle) {
    if (inner % 16) return fmt::format("the inner box is {} bytes: TMA needs a multiple of 16", inner);
    if (const auto span = swizzle_span(swizzle); span && inner > span)
        return fmt::format("the inner box is {} bytes: {}-byte swizzling takes at most {}", inner, span, span);
    return {};
}

/// Runs the driver's `encode` (named `call`) in the context that owns the tensor at `base`,
/// whichever is current on this thread, and returns its map.
template <class Encode>
TensorMap encode_in_owner_context(const void* base, const char* call, Encode encode) {
    const auto& d = detail::driver();
    CUcontext owner = nullptr, current = nullptr;
    detail::check(d.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, reinterpret_cast<CUdeviceptr>(base)),
                  "cuPointerGetAttribute(CONTEXT) of the tensor map's base");
    detail::check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    const bool switch_context = owner && owner != current;
    if (switch_context) detail::check(d.cuCtxPushCurrent(owner), "cuCtxPushCurrent");
    CUtensorMap map;
    const CUresult encoded = encode(d, &map);
    if (switch_context) {
        CUcontext popped = nullptr;
        detail::check(d.cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
    }
    detail::check(encoded, call);
    TensorMap out;
    std::memcpy(out.opaque.data(), &map, sizeof map);
    return out;
}

}  // namespace

std::string TiledTensorMap::unsupported_reason() const {
    const std::size_t rank = dims.size();
    if (rank < 1 || rank > 5) return fmt::format("a tensor map has 1 to 5 dimensions, not {}", rank);
    if (byte_strides.size() != rank - 1 || box.size() != rank)
        return fmt::format("{} dimensions need {} strides and {} box sizes ({} and {} given)", rank, rank - 1, rank,
                           byte_strides.size(), box.size());
    if (auto why = layout_reason(base, dims, byte_strides); !why.empty()) return why;
    for (std::size_t i = 0; i < rank; ++i)
        if (box[i] == 0 || box[i] > 256) return fmt::format("box dimension {} is {}: TMA takes 1 to 256", i, box[i]);
    return inner_box_reason(box[0] * element_bytes(element), swizzle);
}

TensorMap TiledTensorMap::encode() const {
    if (auto why = unsupported_reason(); !why.empty()) throw UsageError("tensor map: " + why);
    const auto rank = static_cast<cuuint32_t>(dims.size());
    cuuint64_t size[5], stride[4];
    cuuint32_t box_size[5], element_strides[5];
    for (cuuint32_t i = 0; i < rank; ++i) {
        size[i] = dims[i];
        box_size[i] = box[i];
        element_strides[i] = 1;
        if (i + 1 < rank) stride[i] = byte_strides[i];
    }
    return encode_in_owner_context(base, "cuTensorMapEncodeTiled", [&](const detail::Driver& d, CUtensorMap* map) {
        return d.cuTensorMapEncodeTiled(map, driver_type(element), rank, const_cast<void*>(base), size, stride,
                                        box_size, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        driver_swizzle(swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    });
}

std::string Im2colTensorMap::unsupported_reason() const {
    if (auto why = layout_reason(base, dims, byte_strides); !why.empty()) return why;
    for (int i = 0; i < 2; ++i) {
        const char* axis = i == 0 ? "W" : "H";
        // A rank-4 map's corners are 8-bit offsets.
        if (lower_corner[i] < -128 || lower_corner[i] > 127 || upper_corner[i] < -128 || upper_corner[i] > 127)
            return fmt::format(
                "the bounding box's corners along {} are {} and {}: TMA takes -128 to 127 (padding and "
                "kernel size up to about 128)",
                axis, lower_corner[i], upper_corner[i]);
        if (static_cast<long long>(dims[i + 1]) + upper_corner[i] - lower_corner[i] <= 0)
            return fmt::format("the bounding box along {} is empty: the kernel does not fit the padded input", axis);
        if (element_strides[i] < 1 || element_strides[i] > 8)
            return fmt::format("the element stride along {} is {}: TMA takes 1 to 8", axis, element_strides[i]);
    }
    if (channels == 0 || channels > 256) return fmt::format("{} channels per position: TMA takes 1 to 256", channels);
    if (pixels == 0 || pixels > 256)
        return fmt::format("{} positions per copy: kjit asks TMA for 1 to 256 (what every driver takes)", pixels);
    return inner_box_reason(std::uint64_t{channels} * f32_bytes, swizzle);
}

TensorMap Im2colTensorMap::encode() const {
    if (auto why = unsupported_reason(); !why.empty()) throw UsageError("im2col tensor map: " + why);
    const cuuint64_t size[4] = {dims[0], dims[1], dims[2], dims[3]};
    const cuuint64_t stride[3] = {byte_strides[0], byte_strides[1], byte_strides[2]};
    const cuuint32_t steps[4] = {1, element_strides[0], element_strides[1], 1};
    return encode_in_owner_context(base, "cuTensorMapEncodeIm2col", [&](const detail::Driver& d, CUtensorMap* map) {
        return d.cuTensorMapEncodeIm2col(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, const_cast<void*>(base), size, stride,
                                         lower_corner.data(), upper_corner.data(), channels, pixels, steps,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, driver_swizzle(swizzle),
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    });
}

}  // namespace kjit
