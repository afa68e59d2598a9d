// The tensor-core conv ops: tile constants and their rules, the grid and split-K clusters they
// share, and the argument order of the 1×1 GEMM and the implicit-GEMM kernels.
#include <algorithm>
#include <climits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/conv.hpp>

#include "kjit/ceil_div.cuh"
#include "kjit/gemm_geometry.cuh"
#include "ops/conv/conv_call.hpp"
#include "ops/conv/gemm_forward.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::as_i32;
using detail::check_rank4;
using detail::require;

// ---- tiles ------------------------------------------------------------------------------------

namespace {
constexpr GemmGeometry geometry(const GemmTiles& t) { return {t.block_m, t.block_n, t.block_k}; }
}  // namespace

unsigned GemmTiles::threads() const { return static_cast<unsigned>(geometry(*this).threads()); }

unsigned GemmTiles::shared_bytes(int split_k) const {
    return static_cast<unsigned>(geometry(*this).shared_floats(split_k) * sizeof(float));
}

void GemmTiles::validate(int max_shared_bytes, int split_k) const {
    require(block_m > 0 && block_n > 0 && block_k > 0 && group_m > 0,
            "GEMM tile constants must be positive: BLOCK_M {}, BLOCK_N {}, BLOCK_K {}, GROUP_M {}", block_m, block_n,
            block_k, group_m);
    require(block_m == 32 || block_m == 64 || block_m == 128,
            "BLOCK_M = {} must be 32, 64 or 128: each warp owns 32 columns, at most 4 warps across", block_m);
    require(block_n % 16 == 0 && block_n <= 256,
            "BLOCK_N = {} must be a multiple of 16 (the MMA tile's rows), at most 256", block_n);
    require(block_n < 64 || block_n % 32 == 0,
            "BLOCK_N = {} must be a multiple of 32 from 64 on: it is split over 2 warps of 16-row tiles", block_n);
    require(block_k % 8 == 0 && block_k <= 64, "BLOCK_K = {} must be a multiple of 8 (the MMA's k), at most 64",
            block_k);
    require(split_k >= 1 && split_k <= 8, "split_k = {} must be between 1 and 8 (a portable thread-block cluster)",
            split_k);
    require(shared_bytes(split_k) <= static_cast<unsigned>(max_shared_bytes),
            "tiles {}x{}x{} need {} bytes of shared memory ({} stages{}): the target allows {}", block_m, block_n,
            block_k, shared_bytes(split_k), GemmGeometry::stages, split_k > 1 ? ", split-K partials" : "",
            max_shared_bytes);
}

std::span<const GemmTiles> GemmTiles::configurations() {
    static const std::vector<GemmTiles> list = [] {
        std::vector<GemmTiles> l;
        for (int m : {32, 64, 128})
            for (int n : {16, 32, 64, 128})
                for (int k : {16, 32}) l.push_back({m, n, k, 8});
        return l;
    }();
    return list;
}

namespace {

/// The kernel `K` of body `name` for validated tiles.
template <class K>
K gemm_kernel(std::string name, const GemmTiles& t, int max_shared_bytes, int split_k) {
    t.validate(max_shared_bytes, split_k);
    return K(std::move(name),
             {{"BLOCK_M", std::int64_t{t.block_m}},
              {"BLOCK_N", std::int64_t{t.block_n}},
              {"BLOCK_K", std::int64_t{t.block_k}},
              {"GROUP_M", std::int64_t{t.group_m}}},
             t.threads());
}

constexpr Conv2dAttrs pointwise(float bn_eps) { return {.bn_eps = bn_eps}; }

}  // namespace

Dims GemmConvOp::grid(ShapeView output_shape) const {
    check_rank4(output_shape, "output y");
    const auto groups = static_cast<std::size_t>(attrs().groups);
    const std::size_t p = output_shape[0] * output_shape[2] * output_shape[3];
    const std::size_t n = output_shape[1] / groups;
    const std::size_t blocks = ceil_div<std::size_t>(p, tiles_.block_m) * ceil_div<std::size_t>(n, tiles_.block_n) *
                               static_cast<std::size_t>(split_k_);
    require(blocks <= INT32_MAX && groups <= 65535, "{} blocks x {} groups exceed the grid's limits: split the batch",
            blocks, groups);
    return {static_cast<unsigned>(blocks), static_cast<unsigned>(groups), 1};
}

// ---- 1x1 GEMM kernel --------------------------------------------------------------------------

Conv2dBnSiluGemmForward::Conv2dBnSiluGemmForward(int block_m, int block_n, int block_k, int group_m,
                                                 int max_shared_bytes, int split_k, float bn_eps)
    : GemmConvOp(gemm_kernel<KernelType>("conv2d_bn_silu_gemm_forward", {block_m, block_n, block_k, group_m},
                                         max_shared_bytes, split_k),
                 pointwise(bn_eps), {block_m, block_n, block_k, group_m}, split_k) {}

detail::PointwiseCall detail::resolve_pointwise_call(const OpCall& call) {
    check_rank4(call.output_shape, "output y");
    require(call.inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", call.inputs.size());
    const ShapeView x = call.inputs[0].shape, y = call.output_shape;
    check_rank4(x, "input x");
    require(x[0] == y[0] && x[2] == y[2] && x[3] == y[3],
            "a 1x1 stride-1 conv keeps batch and size: input [{}] vs output [{}]", fmt::join(x, ", "),
            fmt::join(y, ", "));
    const std::size_t m = x[2] * x[3];
    require(call.output_row_stride >= 0 && static_cast<std::size_t>(call.output_row_stride) >= m,
            "y_row_stride = {} is below the row length OH*OW = {}", call.output_row_stride, m);
    // Offsets are 64-bit in the kernels; each size must still fit its int32 argument.
    as_i32(x[0] * m, "B*OH*OW");
    return {as_i32(x[0], "B"), as_i32(x[1], "C_IN"), as_i32(y[1], "C_OUT"), as_i32(m, "M"), call.output_row_stride};
}

void Conv2dBnSiluGemmForward::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    const auto p = detail::resolve_pointwise_call(call);
    detail::visit_conv_tensors(call, visitor);
    visitor.visit_i32(p.batch);
    visitor.visit_i32(p.c_in);
    visitor.visit_i32(p.c_out);
    visitor.visit_i32(p.m);
    visitor.visit_i32(p.y_row_stride);
    detail::visit_image_strides(call, visitor);
}

// ---- implicit-GEMM kernel (general convolutions on tensor cores) -------------------------------

Conv2dBnSiluForward::Conv2dBnSiluForward(const GemmTiles& tiles, const Conv2dAttrs& attrs, int max_shared_bytes,
                                         int split_k)
    : GemmConvOp(gemm_kernel<KernelType>("conv2d_bn_silu_forward", tiles, max_shared_bytes, split_k), attrs, tiles,
                 split_k) {
    detail::require_general_attrs(attrs);
}

void Conv2dBnSiluForward::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    const auto conv = detail::resolve_conv_call(attrs(), call);
    const int taps = attrs().kernel_h * attrs().kernel_w;
    require(taps <= 64, "a {}x{} kernel has {} taps: the implicit-GEMM kernel takes at most 64", attrs().kernel_h,
            attrs().kernel_w, taps);
    detail::visit_conv_tensors(call, visitor);
    detail::visit_conv_ints(conv, attrs(), call.output_row_stride, visitor);
    detail::visit_image_strides(call, visitor);
}

// ---- the choice between them ------------------------------------------------------------------

bool detail::is_pointwise(const Conv2dAttrs& a) noexcept {
    return a.kernel_h == 1 && a.kernel_w == 1 && a.stride_h == 1 && a.stride_w == 1 && a.pad_h == 0 && a.pad_w == 0 &&
           a.groups == 1;
}

bool detail::worth_splitting(const GemmTiles& t, int split, long long columns, int n, int k,
                             const DeviceTraits& device) {
    if (split == 1) return true;
    const long long tiles = ceil_div<long long>(columns, t.block_m) * ceil_div(n, t.block_n);
    return device.clusters() && k >= 2 * split * t.block_k && tiles * split <= 4LL * device.multiprocessors;
}

std::unique_ptr<GemmConvOp> detail::make_gemm_conv(const Conv2dAttrs& a, const GemmTiles& t, int max_shared_bytes,
                                                   int split_k) {
    if (is_pointwise(a))
        return std::make_unique<Conv2dBnSiluGemmForward>(t.block_m, t.block_n, t.block_k, t.group_m, max_shared_bytes,
                                                         split_k, a.bn_eps);
    return std::make_unique<Conv2dBnSiluForward>(t, a, max_shared_bytes, split_k);
}

}  // namespace kjit
