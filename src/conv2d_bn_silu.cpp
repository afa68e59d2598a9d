// Conv2d + BN + SiLU: the two kernel classes (constants, validation, RuntimeOp), dispatch, the
// BatchNorm fold and the float64 reference.
#include <algorithm>
#include <climits>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <kjit/conv.hpp>
#include <kjit/error.hpp>

#include "log.hpp"
#include "op_checks.hpp"

namespace kjit {
namespace {

using detail::as_i32;
using detail::check_rank4;
using detail::non_null;
using detail::require;

constexpr int gemm_stages = 3;  // kernels_src/conv2d_bn_silu_gemm_forward.cu: gemm::STAGES

/// x, the three parameters and y, checked and visited in kernel order.
void visit_tensors(std::span<const Tensor> inputs, std::span<void* const> params, void* output, ArgVisitor& visitor) {
    require(inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", inputs.size());
    require(params.size() == 3, "conv2d_bn_silu takes 3 parameters (weight, bn_scale, bn_shift), {} given",
                                            params.size());
    visitor.visit_ptr(non_null(inputs[0].data, "input x"));
    visitor.visit_ptr(non_null(params[0], "parameter weight"));
    visitor.visit_ptr(non_null(params[1], "parameter bn_scale"));
    visitor.visit_ptr(non_null(params[2], "parameter bn_shift"));
    visitor.visit_ptr(non_null(output, "output y"));
}

constexpr std::string_view conv_param_names[] = {"weight", "bn_scale", "bn_shift"};

/// Rows of an NCHW output are (image, channel) pairs of OH·OW pixels.
std::size_t nchw_row_elems(ShapeView output_shape) {
    check_rank4(output_shape, "output y");
    return output_shape[2] * output_shape[3];
}


}  // namespace

// ---- shared helpers -------------------------------------------------------------------------

std::pair<int, int> conv2d_output_size(const Conv2dAttrs& a, const Conv2dShape& s) {
    require(s.batch > 0 && s.c_in > 0 && s.height > 0 && s.width > 0 && s.c_out > 0,
            "conv2d shape must be positive: batch {}, c_in {}, height {}, width {}, c_out {}", s.batch,
                        s.c_in, s.height, s.width, s.c_out);
    require(a.kernel_h > 0 && a.kernel_w > 0, "kernel size {}x{} must be positive", a.kernel_h, a.kernel_w);
    require(a.stride_h > 0 && a.stride_w > 0, "stride {}x{} must be positive", a.stride_h, a.stride_w);
    require(a.pad_h >= 0 && a.pad_w >= 0, "padding {}x{} must not be negative", a.pad_h, a.pad_w);
    require(a.dilation_h == 1 && a.dilation_w == 1,
            "dilation {}x{} is not supported: kjit's conv kernels take dilation 1", a.dilation_h,
                        a.dilation_w);
    require(a.groups > 0 && s.c_in % a.groups == 0 && s.c_out % a.groups == 0,
            "groups = {} must divide both c_in = {} and c_out = {}", a.groups, s.c_in, s.c_out);
    const int oh = (s.height + 2 * a.pad_h - a.kernel_h) / a.stride_h + 1;
    const int ow = (s.width + 2 * a.pad_w - a.kernel_w) / a.stride_w + 1;
    require(s.height + 2 * a.pad_h >= a.kernel_h && s.width + 2 * a.pad_w >= a.kernel_w,
            "a {}x{} kernel does not fit a {}x{} input padded by {}x{}", a.kernel_h, a.kernel_w, s.height,
                        s.width, a.pad_h, a.pad_w);
    return {oh, ow};
}

FoldedBatchNorm fold_batch_norm(std::span<const float> gamma, std::span<const float> beta, std::span<const float> mean,
                                std::span<const float> var, float eps) {
    const std::size_t n = gamma.size();
    require(beta.size() == n && mean.size() == n && var.size() == n,
            "BatchNorm tensors differ in length: gamma {}, beta {}, mean {}, var {}", n, beta.size(),
                        mean.size(), var.size());
    require(eps >= 0, "BatchNorm eps = {} must not be negative", eps);
    FoldedBatchNorm bn{std::vector<float>(n), std::vector<float>(n)};
    for (std::size_t c = 0; c < n; ++c) {
        require(var[c] + eps > 0, "BatchNorm channel {}: var + eps = {} must be positive", c, var[c] + eps);
        const double scale = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
        bn.scale[c] = static_cast<float>(scale);
        bn.shift[c] = static_cast<float>(beta[c] - scale * mean[c]);
    }
    return bn;
}

DeviceTraits DeviceTraits::of(const Device& device) {
    return {device.multiprocessor_count(), device.max_shared_bytes_per_block(), device.arch().major() >= 9};
}

// ---- GEMM tiles (both tensor-core kernels) ----------------------------------------------------

unsigned GemmTiles::threads() const { return 32u * static_cast<unsigned>(block_m / 32) * (block_n >= 64 ? 2u : 1u); }

unsigned GemmTiles::shared_bytes(int split_k) const {
    const int stage_floats = block_n * (block_k + 4) + block_k * (block_m + 8);
    const int partial_floats = split_k > 1 ? block_m * block_n : 0;
    return static_cast<unsigned>(std::max(gemm_stages * stage_floats, partial_floats) * 4);
}

void GemmTiles::validate(int max_shared_bytes, int split_k) const {
    require(block_m > 0 && block_n > 0 && block_k > 0 && group_m > 0,
            "GEMM tile constants must be positive: BLOCK_M {}, BLOCK_N {}, BLOCK_K {}, GROUP_M {}", block_m,
                        block_n, block_k, group_m);
    require(block_m == 32 || block_m == 64 || block_m == 128,
            "BLOCK_M = {} must be 32, 64 or 128: each warp owns 32 columns, at most 4 warps across",
                        block_m);
    require(block_n % 16 == 0 && block_n <= 256,
            "BLOCK_N = {} must be a multiple of 16 (the MMA tile's rows), at most 256", block_n);
    require(block_n < 64 || block_n % 32 == 0,
            "BLOCK_N = {} must be a multiple of 32 from 64 on: it is split over 2 warps of 16-row tiles",
                        block_n);
    require(block_k % 8 == 0 && block_k <= 64,
            "BLOCK_K = {} must be a multiple of 8 (the MMA's k), at most 64", block_k);
    require(split_k >= 1 && split_k <= 8,
            "split_k = {} must be between 1 and 8 (a portable thread-block cluster)", split_k);
    require(shared_bytes(split_k) <= static_cast<unsigned>(max_shared_bytes),
            "tiles {}x{}x{} need {} bytes of shared memory ({} stages{}): the target allows {}", block_m,
                        block_n, block_k, shared_bytes(split_k), gemm_stages, split_k > 1 ? ", split-K partials" : "",
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
std::vector<Constant> gemm_constants(const GemmTiles& t, int max_shared_bytes, int split_k) {
    t.validate(max_shared_bytes, split_k);
    return {{"BLOCK_M", std::int64_t{t.block_m}},
            {"BLOCK_N", std::int64_t{t.block_n}},
            {"BLOCK_K", std::int64_t{t.block_k}},
            {"GROUP_M", std::int64_t{t.group_m}}};
}
}  // namespace

// ---- 1x1 GEMM kernel --------------------------------------------------------------------------

Conv2dBnSiluGemmForward::Conv2dBnSiluGemmForward(int block_m, int block_n, int block_k, int group_m,
                                                 int max_shared_bytes, int split_k)
    : TypedKernel("conv2d_bn_silu_gemm_forward",
                  gemm_constants({block_m, block_n, block_k, group_m}, max_shared_bytes, split_k),
                  GemmTiles{block_m, block_n, block_k, group_m}.threads()),
      tiles_{block_m, block_n, block_k, group_m},
      split_k_(split_k) {}

std::vector<Shape> Conv2dBnSiluGemmForward::param_shapes(std::span<const ShapeView> input_shapes,
                                                         ShapeView output_shape) const {
    require(input_shapes.size() == 1, "conv2d_bn_silu takes 1 input");
    check_rank4(input_shapes[0], "input x");
    check_rank4(output_shape, "output y");
    const std::size_t c_out = output_shape[1], c_in = input_shapes[0][1];
    return {{c_out, c_in, 1, 1}, {c_out}, {c_out}};  // PyTorch's Conv2d weight layout
}

std::span<const std::string_view> Conv2dBnSiluGemmForward::param_names() const { return conv_param_names; }

std::size_t Conv2dBnSiluGemmForward::forward_output_row_elems(ShapeView output_shape) const {
    return nchw_row_elems(output_shape);
}

void Conv2dBnSiluGemmForward::pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output,
                                        ShapeView output_shape, int output_row_stride, ArgVisitor& visitor) const {
    check_rank4(output_shape, "output y");
    visit_tensors(inputs, params, output, visitor);
    const ShapeView x = inputs[0].shape;
    check_rank4(x, "input x");
    require(x[0] == output_shape[0] && x[2] == output_shape[2] && x[3] == output_shape[3],
            "a 1x1 stride-1 conv keeps batch and size: input [{}] vs output [{}]", fmt::join(x, ", "),
                        fmt::join(output_shape, ", "));
    const std::size_t m = x[2] * x[3];
    require(output_row_stride >= 0 && static_cast<std::size_t>(output_row_stride) >= m,
            "y_row_stride = {} is below the row length OH*OW = {}", output_row_stride, m);
    // Offsets are 64-bit in the kernel; each size must still fit its int32 argument.
    as_i32(x[0] * m, "B*OH*OW");
    visitor.visit_i32(as_i32(x[0], "B"));
    visitor.visit_i32(as_i32(x[1], "C_IN"));
    visitor.visit_i32(as_i32(output_shape[1], "C_OUT"));
    visitor.visit_i32(as_i32(m, "M"));
    visitor.visit_i32(output_row_stride);
}

Dims Conv2dBnSiluGemmForward::block() const { return {tiles_.threads(), 1, 1}; }

Dims Conv2dBnSiluGemmForward::grid(ShapeView output_shape) const {
    check_rank4(output_shape, "output y");
    const std::size_t p = output_shape[0] * output_shape[2] * output_shape[3];
    const std::size_t tiles = (p + tiles_.block_m - 1) / tiles_.block_m *
                              ((output_shape[1] + tiles_.block_n - 1) / tiles_.block_n) * split_k_;
    require(tiles <= INT32_MAX, "{} blocks exceed the grid's limit: split the batch", tiles);
    return {static_cast<unsigned>(tiles), 1, 1};
}

// ---- helpers of the general conv ops (implicit GEMM and direct) --------------------------------

namespace {

/// NCHW input and output of a general conv, checked against the attributes; the ints the
/// kernels take, in their order up to y_row_stride.
struct ConvCall {
    Conv2dShape shape;
    int oh, ow;
};

ConvCall resolve_call(const Conv2dAttrs& a, std::span<const Tensor> inputs, ShapeView output_shape,
                      int output_row_stride) {
    check_rank4(output_shape, "output y");
    require(inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", inputs.size());
    const ShapeView x = inputs[0].shape;
    check_rank4(x, "input x");
    const Conv2dShape s{as_i32(x[0], "B"), as_i32(x[1], "C_IN"), as_i32(x[2], "H"), as_i32(x[3], "W"),
                        as_i32(output_shape[1], "C_OUT")};
    const auto [oh, ow] = conv2d_output_size(a, s);
    require(output_shape[0] == x[0] && output_shape[2] == static_cast<std::size_t>(oh) &&
                output_shape[3] == static_cast<std::size_t>(ow),
            "output shape [{}] does not match the convolution's [{}, {}, {}, {}]",
                        fmt::join(output_shape, ", "), x[0], s.c_out, oh, ow);
    require(output_row_stride >= oh * ow,
            "y_row_stride = {} is below the row length OH*OW = {}", output_row_stride, oh * ow);
    as_i32(x[0] * x[1] * x[2] * x[3], "input elements");
    return {s, oh, ow};
}

void visit_conv_ints(const ConvCall& c, const Conv2dAttrs& a, int output_row_stride, ArgVisitor& visitor) {
    for (int v : {c.shape.batch, c.shape.c_in, c.shape.height, c.shape.width, c.shape.c_out, c.oh, c.ow, a.kernel_h,
                  a.kernel_w, a.stride_h, a.pad_h, a.groups, output_row_stride})
        visitor.visit_i32(v);
}


void require_one_stride_and_pad(const Conv2dAttrs& a) {
    require(a.stride_h == a.stride_w && a.pad_h == a.pad_w,
            "stride {}x{} and padding {}x{}: kjit's conv kernels take one stride and one padding for "
                        "both axes",
                        a.stride_h, a.stride_w, a.pad_h, a.pad_w);
    require(a.kernel_h > 0 && a.kernel_w > 0 && a.stride_h > 0 && a.pad_h >= 0 && a.groups > 0,
            "kernel size, stride and groups must be positive, padding not negative");
    require(a.dilation_h == 1 && a.dilation_w == 1,
            "dilation {}x{} is not supported: kjit's conv kernels take dilation 1", a.dilation_h,
                        a.dilation_w);
}

}  // namespace

// ---- what the general conv ops share ----------------------------------------------------------

std::vector<Shape> Conv2dOp::param_shapes(std::span<const ShapeView> input_shapes, ShapeView output_shape) const {
    require(input_shapes.size() == 1, "conv2d_bn_silu takes 1 input");
    check_rank4(input_shapes[0], "input x");
    check_rank4(output_shape, "output y");
    const std::size_t c_out = output_shape[1], cin_pg = input_shapes[0][1] / attrs_.groups;
    return {{c_out, cin_pg, static_cast<std::size_t>(attrs_.kernel_h), static_cast<std::size_t>(attrs_.kernel_w)},
            {c_out},
            {c_out}};
}

std::span<const std::string_view> Conv2dOp::param_names() const { return conv_param_names; }

std::size_t Conv2dOp::forward_output_row_elems(ShapeView output_shape) const { return nchw_row_elems(output_shape); }

Shape Conv2dOp::compute_concrete_output_shape(std::span<const ShapeView> input_shapes, ShapeView resolved) const {
    require(input_shapes.size() == 1, "conv2d_bn_silu takes 1 input");
    check_rank4(input_shapes[0], "input x");
    check_rank4(resolved, "output y");
    const ShapeView x = input_shapes[0];
    const Conv2dShape s{as_i32(x[0], "B"), as_i32(x[1], "C_IN"), as_i32(x[2], "H"), as_i32(x[3], "W"),
                        as_i32(resolved[1], "C_OUT")};
    const auto [oh, ow] = conv2d_output_size(attrs_, s);
    return {x[0], resolved[1], static_cast<std::size_t>(oh), static_cast<std::size_t>(ow)};
}

// ---- implicit-GEMM kernel (general convolutions on tensor cores) -------------------------------

Conv2dBnSiluForward::Conv2dBnSiluForward(const GemmTiles& tiles, const Conv2dAttrs& attrs, int max_shared_bytes,
                                         int split_k)
    : TypedKernel("conv2d_bn_silu_forward", gemm_constants(tiles, max_shared_bytes, split_k), tiles.threads()),
      Conv2dOp(attrs),
      tiles_(tiles),
      split_k_(split_k) {
    require_one_stride_and_pad(attrs);
}

void Conv2dBnSiluForward::pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output,
                                    ShapeView output_shape, int output_row_stride, ArgVisitor& visitor) const {
    const ConvCall call = resolve_call(attrs_, inputs, output_shape, output_row_stride);
    const int taps = attrs_.kernel_h * attrs_.kernel_w;
    require(taps <= 64, "a {}x{} kernel has {} taps: the implicit-GEMM kernel takes at most 64",
                                    attrs_.kernel_h, attrs_.kernel_w, taps);
    visit_tensors(inputs, params, output, visitor);
    visit_conv_ints(call, attrs_, output_row_stride, visitor);
}

Dims Conv2dBnSiluForward::block() const { return {tiles_.threads(), 1, 1}; }

Dims Conv2dBnSiluForward::grid(ShapeView output_shape) const {
    check_rank4(output_shape, "output y");
    const std::size_t p = output_shape[0] * output_shape[2] * output_shape[3];
    const std::size_t n = output_shape[1] / static_cast<std::size_t>(attrs_.groups);
    const std::size_t tiles =
        (p + tiles_.block_m - 1) / tiles_.block_m * ((n + tiles_.block_n - 1) / tiles_.block_n) * split_k_;
    require(tiles <= INT32_MAX && attrs_.groups <= 65535,
            "{} blocks x {} groups exceed the grid's limits: split the batch", tiles, attrs_.groups);
    return {static_cast<unsigned>(tiles), static_cast<unsigned>(attrs_.groups), 1};
}

// ---- direct kernel (depthwise, narrow groups) ----------------------------------------------------------------------------

unsigned Conv2dBnSiluDirectForward::threads(const DirectTiles& t) {
    return static_cast<unsigned>((t.block_oc / 4) * (t.block_ow / 4));
}

std::span<const DirectTiles> Conv2dBnSiluDirectForward::configurations() {
    static const std::vector<DirectTiles> list = [] {
        std::vector<DirectTiles> l;
        for (int oc : {16, 32, 64})
            for (int ow : {16, 32, 64})
                if (threads({oc, ow}) >= 32) l.push_back({oc, ow});
        return l;
    }();
    return list;
}

namespace {
DirectTiles validated(DirectTiles t) {
    require(t.block_oc > 0 && t.block_ow > 0,
            "direct tile constants must be positive: BLOCK_OC {}, BLOCK_OW {}", t.block_oc, t.block_ow);
    require(t.block_oc % 4 == 0 && t.block_ow % 4 == 0,
            "BLOCK_OC = {} and BLOCK_OW = {} must be multiples of 4 (each thread computes 4x4 outputs)",
                        t.block_oc, t.block_ow);
    const unsigned n = Conv2dBnSiluDirectForward::threads(t);
    require(n >= 32 && n <= 1024 && n % 32 == 0,
            "BLOCK_OC/4 * BLOCK_OW/4 = {} threads: must be a multiple of 32 between 32 and 1024", n);
    return t;
}
}  // namespace

Conv2dBnSiluDirectForward::Conv2dBnSiluDirectForward(int block_oc, int block_ow, const Conv2dAttrs& attrs,
                                         const Conv2dShape& shape, int max_shared_bytes)
    : TypedKernel("conv2d_bn_silu_direct_forward", {{"BLOCK_OC", std::int64_t{block_oc}}, {"BLOCK_OW", std::int64_t{block_ow}}},
                  threads(validated({block_oc, block_ow}))),
      Conv2dOp(attrs),
      tiles_{block_oc, block_ow},
      shape_(shape) {
    (void)conv2d_output_size(attrs, shape);
    require_one_stride_and_pad(attrs);
    // Shared-memory plan: per input channel staged, the input rows of every group a block can
    // touch plus that channel's weights for the block's output channels.
    const int cin_pg = shape.c_in / attrs.groups, cout_pg = shape.c_out / attrs.groups;
    const int groups_max = std::min(attrs.groups, (block_oc - 1) / cout_pg + 2);
    const int cols = (block_ow - 1) * attrs.stride_w + attrs.kernel_w;
    const long long per_channel =
        4LL * (1LL * groups_max * attrs.kernel_h * cols + 1LL * block_oc * attrs.kernel_h * attrs.kernel_w);
    const long long budget = std::min<long long>(max_shared_bytes, 64 * 1024);  // leaves room for 2+ blocks/SM
    require(per_channel <= max_shared_bytes,
            "a {}x{} kernel with BLOCK_OC {} / BLOCK_OW {} needs {} bytes of shared memory per input "
                        "channel: the target allows {}. Use smaller tiles",
                        attrs.kernel_h, attrs.kernel_w, block_oc, block_ow, per_channel, max_shared_bytes);
    step_channels_ = static_cast<int>(std::clamp<long long>(budget / per_channel, 1, std::min(cin_pg, 32)));
    shared_bytes_ = static_cast<unsigned>(step_channels_ * per_channel);
}

void Conv2dBnSiluDirectForward::pack_args(std::span<const Tensor> inputs, std::span<void* const> params,
                                          void* output, ShapeView output_shape, int output_row_stride,
                                          ArgVisitor& visitor) const {
    const ConvCall call = resolve_call(attrs_, inputs, output_shape, output_row_stride);
    require(call.shape.c_in == shape_.c_in && call.shape.c_out == shape_.c_out,
            "this op was planned for {} -> {} channels, not {} -> {}: dispatch a new op", shape_.c_in,
                        shape_.c_out, call.shape.c_in, call.shape.c_out);
    visit_tensors(inputs, params, output, visitor);
    visit_conv_ints(call, attrs_, output_row_stride, visitor);
    visitor.visit_i32(step_channels_);
}

Dims Conv2dBnSiluDirectForward::block() const { return {threads(tiles_), 1, 1}; }

Dims Conv2dBnSiluDirectForward::grid(ShapeView output_shape) const {
    check_rank4(output_shape, "output y");
    const std::size_t oc_tiles = (output_shape[1] + tiles_.block_oc - 1) / tiles_.block_oc;
    const std::size_t z = output_shape[0] * oc_tiles;
    require(output_shape[2] <= 65535 && z <= 65535,
            "grid ({}, {}) exceeds CUDA's 65535 limit on y/z: split the batch", output_shape[2], z);
    return {static_cast<unsigned>((output_shape[3] + tiles_.block_ow - 1) / tiles_.block_ow),
            static_cast<unsigned>(output_shape[2]), static_cast<unsigned>(z)};
}

// ---- dispatch ---------------------------------------------------------------------------------

namespace {

/// Estimated time of the GEMM on `sms` multiprocessors: the busiest SM's blocks times the cost of
/// one block — the larger of its tensor-core work and its operand traffic over its share of K,
/// plus a fixed latency and, with split-K, the cluster reduction.
double gemm_cost(const GemmTiles& t, int split_k, long long p, int n, int k, int sms) {
    const long long blocks = (p + t.block_m - 1) / t.block_m * ((n + t.block_n - 1) / t.block_n) * split_k;
    const long long per_sm = (blocks + sms - 1) / sms;
    const double math = static_cast<double>(t.block_m) * t.block_n / 512.0;  // TF32 MACs per clock per SM
    const double traffic = (t.block_m + t.block_n) * 4.0 / 64.0;              // L2 bytes per clock per SM
    const double reduction = split_k > 1 ? 500.0 * split_k + t.block_m * t.block_n / 32.0 : 0.0;
    return static_cast<double>(per_sm) * (static_cast<double>(k) / split_k * std::max(math, traffic) + 2000.0 + reduction);
}

}  // namespace

std::unique_ptr<RuntimeOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s,
                                                   const DeviceTraits& device) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    const int cin_pg = s.c_in / a.groups, cout_pg = s.c_out / a.groups;
    const bool pointwise = a.kernel_h == 1 && a.kernel_w == 1 && a.stride_h == 1 && a.stride_w == 1 &&
                           a.pad_h == 0 && a.pad_w == 0 && a.groups == 1;
    // Tensor cores pay when each group's GEMM is at least one MMA tile deep and tall.
    const bool wide_groups = cin_pg * a.kernel_h * a.kernel_w >= 16 && cout_pg >= 16 &&
                             a.kernel_h * a.kernel_w <= 64 && a.stride_h == a.stride_w && a.pad_h == a.pad_w;
    if (pointwise || wide_groups) {
        const long long p = 1LL * s.batch * oh * ow;
        const int k = cin_pg * a.kernel_h * a.kernel_w;
        const GemmTiles* best = nullptr;
        int best_split = 1;
        double best_cost = 0;
        for (const auto& t : GemmTiles::configurations())
            for (int split : {1, 2, 4, 8}) {
                if (split > 1 && (!device.clusters || k < 2 * split * t.block_k)) continue;
                if (t.shared_bytes(split) > static_cast<unsigned>(device.max_shared_bytes)) continue;
                const double cost = a.groups * gemm_cost(t, split, p, cout_pg, k, device.multiprocessors);
                if (!best || cost < best_cost) best = &t, best_split = split, best_cost = cost;
            }
        require(best != nullptr, "no GEMM configuration fits this device's shared memory");
        if (pointwise)
            return std::make_unique<Conv2dBnSiluGemmForward>(best->block_m, best->block_n, best->block_k,
                                                             best->group_m, device.max_shared_bytes, best_split);
        return std::make_unique<Conv2dBnSiluForward>(*best, a, device.max_shared_bytes, best_split);
    }
    // Direct: pixels per block from the row width; channels per block shrink until the grid
    // covers the device twice.
    const int block_ow = ow >= 48 ? 64 : ow >= 24 ? 32 : 16;
    int block_oc = 64;
    auto blocks = [&, oh = oh, ow = ow](int oc) {
        return 1LL * ((ow + block_ow - 1) / block_ow) * oh * s.batch * ((s.c_out + oc - 1) / oc);
    };
    while (block_oc > 16 && (blocks(block_oc) < 2LL * device.multiprocessors || block_oc / 2 >= s.c_out)) block_oc /= 2;
    if (Conv2dBnSiluDirectForward::threads({block_oc, block_ow}) < 32) block_oc = 32;
    return std::make_unique<Conv2dBnSiluDirectForward>(block_oc, block_ow, a, s, device.max_shared_bytes);
}

// ---- configurations as text (tuning, --config) -----------------------------------------------

std::string conv2d_problem_key(const Conv2dAttrs& a, const Conv2dShape& s) {
    return fmt::format("b{}_c{}x{}x{}_o{}_k{}x{}_s{}x{}_p{}x{}_g{}", s.batch, s.c_in, s.height, s.width, s.c_out,
                       a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.pad_h, a.pad_w, a.groups);
}

std::unique_ptr<RuntimeOp> make_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const std::string& config,
                                               const DeviceTraits& device) {
    std::map<std::string, int> values;
    std::istringstream words(config);
    for (std::string word; words >> word;) {
        const auto eq = word.find('=');
        int v = 0;
        const char* end = word.data() + word.size();
        if (eq == std::string::npos || std::from_chars(word.data() + eq + 1, end, v).ptr != end)
            throw UsageError(fmt::format("configuration item '{}': write KEY=INTEGER, e.g. BLOCK_M=64", word));
        if (!values.emplace(word.substr(0, eq), v).second)
            throw UsageError(fmt::format("configuration key {} is given twice", word.substr(0, eq)));
    }
    auto take = [&](const char* key, std::optional<int> fallback = std::nullopt) {
        const auto it = values.find(key);
        if (it == values.end()) {
            require(fallback.has_value(), "configuration '{}' lacks {}", config, key);
            return *fallback;
        }
        const int v = it->second;
        values.erase(it);
        return v;
    };
    std::unique_ptr<RuntimeOp> op;
    if (values.contains("BLOCK_OC")) {
        const int oc = take("BLOCK_OC"), ow = take("BLOCK_OW");
        op = std::make_unique<Conv2dBnSiluDirectForward>(oc, ow, a, s, device.max_shared_bytes);
    } else {
        const GemmTiles t{take("BLOCK_M"), take("BLOCK_N"), take("BLOCK_K"), take("GROUP_M", 8)};
        const int split = take("SPLIT_K", 1);
        require(split == 1 || device.clusters, "SPLIT_K > 1 needs thread-block clusters (sm_90 or newer)");
        const bool pointwise = a.kernel_h == 1 && a.kernel_w == 1 && a.stride_h == 1 && a.stride_w == 1 &&
                               a.pad_h == 0 && a.pad_w == 0 && a.groups == 1;
        if (pointwise)
            op = std::make_unique<Conv2dBnSiluGemmForward>(t.block_m, t.block_n, t.block_k, t.group_m,
                                                           device.max_shared_bytes, split);
        else
            op = std::make_unique<Conv2dBnSiluForward>(t, a, device.max_shared_bytes, split);
    }
    if (!values.empty())
        throw UsageError(fmt::format("configuration key {} is not one this kernel takes", values.begin()->first));
    return op;
}

std::string conv2d_bn_silu_config(const RuntimeOp& op) {
    auto gemm = [](const GemmTiles& t, int split) {
        return fmt::format("BLOCK_M={} BLOCK_N={} BLOCK_K={} GROUP_M={} SPLIT_K={}", t.block_m, t.block_n, t.block_k,
                           t.group_m, split);
    };
    if (const auto* g = dynamic_cast<const Conv2dBnSiluGemmForward*>(&op)) return gemm(g->tiles(), g->split_k());
    if (const auto* c = dynamic_cast<const Conv2dBnSiluForward*>(&op)) return gemm(c->tiles(), c->split_k());
    if (const auto* d = dynamic_cast<const Conv2dBnSiluDirectForward*>(&op))
        return fmt::format("BLOCK_OC={} BLOCK_OW={}", d->block_oc(), d->block_ow());
    throw UsageError("not a conv2d_bn_silu op");
}

std::vector<std::string> conv2d_bn_silu_candidates(const Conv2dAttrs& a, const Conv2dShape& s,
                                                   const DeviceTraits& device) {
    const auto chosen = dispatch_conv2d_bn_silu(a, s, device);
    std::vector<std::string> list;
    if (dynamic_cast<const Conv2dBnSiluDirectForward*>(chosen.get())) {
        for (const auto& t : Conv2dBnSiluDirectForward::configurations())
            list.push_back(fmt::format("BLOCK_OC={} BLOCK_OW={}", t.block_oc, t.block_ow));
        return list;
    }
    const auto [oh, ow] = conv2d_output_size(a, s);
    const long long p = 1LL * s.batch * oh * ow;
    for (const auto& t : GemmTiles::configurations())
        for (int split : {1, 2, 4, 8}) {
            const long long tiles = (p + t.block_m - 1) / t.block_m * ((s.c_out / a.groups + t.block_n - 1) / t.block_n);
            if (split > 1 && (!device.clusters || tiles * split > 4LL * device.multiprocessors)) continue;
            if (t.shared_bytes(split) > static_cast<unsigned>(device.max_shared_bytes)) continue;
            list.push_back(fmt::format("BLOCK_M={} BLOCK_N={} BLOCK_K={} GROUP_M={} SPLIT_K={}", t.block_m, t.block_n,
                                       t.block_k, t.group_m, split));
        }
    return list;
}

std::unique_ptr<RuntimeOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const Device& device,
                                                   Cache& cache) {
    const DeviceTraits traits = DeviceTraits::of(device);
    if (const auto winner = cache.find_tuned("conv2d_bn_silu", conv2d_problem_key(a, s), device.name(),
                                             device.arch().name())) {
        try {
            return make_conv2d_bn_silu(a, s, winner->config, traits);
        } catch (const UsageError& e) {
            detail::warn(fmt::format("ignoring the tuned configuration '{}' for {}: {}", winner->config,
                                     conv2d_problem_key(a, s), e.what()));
        }
    }
    return dispatch_conv2d_bn_silu(a, s, traits);
}

// ---- reference ----------------------------------------------------------------------------------

std::vector<double> conv2d_bn_silu_reference(std::span<const float> x, std::span<const float> w,
                                             std::span<const float> scale, std::span<const float> shift,
                                             const Conv2dAttrs& a, const Conv2dShape& s) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    const int cin_pg = s.c_in / a.groups, cout_pg = s.c_out / a.groups;
    require(x.size() == 1ULL * s.batch * s.c_in * s.height * s.width, "reference: x has the wrong size");
    require(w.size() == 1ULL * s.c_out * cin_pg * a.kernel_h * a.kernel_w, "reference: w has the wrong size");
    require(scale.size() == static_cast<std::size_t>(s.c_out) && shift.size() == scale.size(),
            "reference: bn_scale/bn_shift have the wrong size");
    std::vector<double> y(1ULL * s.batch * s.c_out * oh * ow);
    for (int b = 0; b < s.batch; ++b)
        for (int oc = 0; oc < s.c_out; ++oc) {
            const int g = oc / cout_pg;
            for (int i = 0; i < oh; ++i)
                for (int j = 0; j < ow; ++j) {
                    double acc = 0;
                    for (int ci = 0; ci < cin_pg; ++ci)
                        for (int kh = 0; kh < a.kernel_h; ++kh) {
                            const int ih = i * a.stride_h - a.pad_h + kh;
                            if (ih < 0 || ih >= s.height) continue;
                            for (int kw = 0; kw < a.kernel_w; ++kw) {
                                const int iw = j * a.stride_w - a.pad_w + kw;
                                if (iw < 0 || iw >= s.width) continue;
                                const double xv = x[((1ULL * b * s.c_in + g * cin_pg + ci) * s.height + ih) * s.width + iw];
                                const double wv = w[((1ULL * oc * cin_pg + ci) * a.kernel_h + kh) * a.kernel_w + kw];
                                acc += xv * wv;
                            }
                        }
                    const double v = static_cast<double>(scale[oc]) * acc + shift[oc];
                    y[((1ULL * b * s.c_out + oc) * oh + i) * ow + j] = v / (1.0 + std::exp(-v));
                }
        }
    return y;
}

}  // namespace kjit
