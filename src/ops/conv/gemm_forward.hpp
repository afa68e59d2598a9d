// Choosing between the two tensor-core conv ops, for dispatch and configuration text alike.
#pragma once
#include <memory>

#include <kjit/conv.hpp>

namespace kjit::detail {

/// 1×1, stride 1, unpadded, ungrouped: the layers the 1×1 GEMM kernel takes.
[[nodiscard]] bool is_pointwise(const Conv2dAttrs& a) noexcept;

/// The 1×1 GEMM op for pointwise layers, else the implicit-GEMM op, with these tiles.
[[nodiscard]] std::unique_ptr<GemmConvOp> make_gemm_conv(const Conv2dAttrs& a, const GemmTiles& tiles,
                                                         int max_shared_bytes, int split_k);

}  // namespace kjit::detail
