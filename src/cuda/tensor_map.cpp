// TMA tensor maps: the rules TMA puts on a map, checked with readable reasons, then encoded by
// the driver (cuTensorMapEncodeTiled).
#include <kjit/tensor_map.hpp>

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/error.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {

static_assert(sizeof(TensorMap) == sizeof(CUtensorMap) && alignof(TensorMap) == alignof(CUtensorMap));

namespace {

constexpr std::uint64_t element_bytes = 4;  // f32

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

std::string TiledTensorMap::unsupported_reason() const {
    const std::size_t rank = dims.size();
    if (rank < 1 || rank > 5) return fmt::format("a tensor map has 1 to 5 dimensions, not {}", rank);
    if (byte_strides.size() != rank - 1 || box.size() != rank)
        return fmt::format("{} dimensions need {} strides and {} box sizes ({} and {} given)", rank, rank - 1, rank,
                           byte_strides.size(), box.size());
    if (reinterpret_cast<std::uintptr_t>(base) % 16)
        return fmt::format("the tensor's address {} is not 16-byte aligned", base);
    for (std::size_t i = 0; i < rank; ++i) {
        if (dims[i] == 0 || dims[i] > (1ull << 32))
            return fmt::format("dimension {} has {} elements: TMA takes 1 to 2^32", i, dims[i]);
        if (box[i] == 0 || box[i] > 256) return fmt::format("box dimension {} is {}: TMA takes 1 to 256", i, box[i]);
    }
    for (std::size_t i = 0; i + 1 < rank; ++i)
        if (byte_strides[i] % 16 || byte_strides[i] >= (1ull << 40))
            return fmt::format(
                "the stride of dimension {} is {} bytes: TMA needs a multiple of 16 below 2^40 "
                "(for f32 rows: a row length that is a multiple of 4)",
                i + 1, byte_strides[i]);
    const std::uint64_t inner = box[0] * element_bytes;
    if (inner % 16) return fmt::format("the inner box is {} bytes: TMA needs a multiple of 16", inner);
    if (const auto span = swizzle_span(swizzle); span && inner > span)
        return fmt::format("the inner box is {} bytes: {}-byte swizzling takes at most {}", inner, span, span);
    return {};
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
    // Encode in the context that owns the tensor, whichever is current on this thread.
    const auto& d = detail::driver();
    CUcontext owner = nullptr, current = nullptr;
    detail::check(d.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, reinterpret_cast<CUdeviceptr>(base)),
                  "cuPointerGetAttribute(CONTEXT) of the tensor map's base");
    detail::check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    const bool switch_context = owner && owner != current;
    if (switch_context) detail::check(d.cuCtxPushCurrent(owner), "cuCtxPushCurrent");
    CUtensorMap map;
    const CUresult encoded = d.cuTensorMapEncodeTiled(
        &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, const_cast<void*>(base), size, stride, box_size, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, driver_swizzle(swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (switch_context) {
        CUcontext popped = nullptr;
        detail::check(d.cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
    }
    detail::check(encoded, "cuTensorMapEncodeTiled");
    TensorMap out;
    std::memcpy(out.opaque.data(), &map, sizeof map);
    return out;
}

}  // namespace kjit
