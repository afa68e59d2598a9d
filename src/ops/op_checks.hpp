// Argument checks the RuntimeOps share: each throws UsageError saying what is wrong and what to
// do, and costs nothing (no formatting) when the check holds.
#pragma once
#include <climits>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>
#include <kjit/error.hpp>
#include <kjit/runtime_op.hpp>

#include "kjit/ceil_div.cuh"

namespace kjit::detail {

template <class... A>
void require(bool ok, fmt::format_string<A...> message, A&&... args) {
    if (!ok) throw UsageError(fmt::format(message, std::forward<A>(args)...));
}

/// A size as the kernels' int32 arguments, or a UsageError saying which size is too large.
inline std::int32_t as_i32(std::size_t v, std::string_view what) {
    require(v <= static_cast<std::size_t>(INT32_MAX),
            "{} = {} does not fit the kernel's 32-bit size arguments (max {}): split the batch or the layer", what, v,
            INT32_MAX);
    return static_cast<std::int32_t>(v);
}

inline void* non_null(void* p, std::string_view what) {
    require(p != nullptr, "{} is a null pointer: pass a device buffer", what);
    return p;
}

inline void check_rank4(ShapeView s, std::string_view what) {
    require(s.size() == 4, "{} must be NCHW (4 dimensions), got {} dimensions", what, s.size());
}

/// Blocks for a grid-stride loop over `n` elements: enough to fill any device, never more
/// than the work.
inline Dims elementwise_grid(std::size_t n, unsigned block) {
    const std::size_t blocks = ceil_div<std::size_t>(n, block);
    return {static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, 1u << 16))), 1, 1};
}

}  // namespace kjit::detail
