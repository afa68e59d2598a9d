// The channels-last Hopper conv op: NHWC shapes and parameters, the im2col map it reads x
// through, the maps of W and y, and its persistent grid.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/conv.hpp>

#include "kjit/ceil_div.cuh"
#include "ops/conv/gemm_forward.hpp"
#include "ops/op_checks.hpp"
#include "ops/tensor_map_cache.hpp"

namespace kjit {

using detail::as_i32;
using detail::check_rank4;
using detail::require;

namespace {

using u64 = std::uint64_t;
using u32 = std::uint32_t;

/// One call: the tensors, the layer's sizes, and the maps TMA reads and writes them through
/// (y's only where TMA can write it).
struct NhwcPlan {
    const void* x = nullptr;
    const void* w = nullptr;
    void* y = nullptr;
    Conv2dShape s{};
    int oh = 0, ow = 0, y_row_stride = 0;
    std::array<u64, 3> w_dims{};
    std::array<u64, 2> w_strides{}, y_dims{};
    std::array<u64, 1> y_strides{};
    std::array<u32, 3> w_box{};
    std::array<u32, 2> y_box{};
    Im2colTensorMap x_map;
    bool y_by_tma = false;

    [[nodiscard]] TiledTensorMap w_map() const { return {w, w_dims, w_strides, w_box, TensorMapSwizzle::bytes_128}; }
    [[nodiscard]] TiledTensorMap y_map() const { return {y, y_dims, y_strides, y_box, TensorMapSwizzle::bytes_128}; }
    /// Why TMA cannot store y, or "". Besides the map's own rules: TMA writes a row's last
    /// channels in whole 16-byte groups (on the H200, 1x1 520->130 with pixel rows of 132 floats:
    /// channels 130 and 131 of every pixel written), so C_OUT must be a multiple of 4.
    [[nodiscard]] std::string y_store_reason() const {
        if (s.c_out % 4)
            return fmt::format(
                "C_OUT = {} is not a multiple of 4: TMA stores a pixel's last channels in whole "
                "16-byte groups and would write past them",
                s.c_out);
        return y_map().unsupported_reason();
    }
    [[nodiscard]] bool same_maps(const NhwcPlan& o) const {
        return x == o.x && w == o.w && y == o.y && s.batch == o.s.batch && s.c_in == o.s.c_in &&
               s.height == o.s.height && s.width == o.s.width && s.c_out == o.s.c_out &&
               y_row_stride == o.y_row_stride && y_by_tma == o.y_by_tma;
    }
};

/// The plan of a layer (pointers null where only the shapes matter), or why TMA cannot take it.
std::string plan(const Conv2dAttrs& a, const Sm90Tiles& t, const Conv2dShape& s, int y_row_stride, NhwcPlan& p) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    if (1LL * s.batch * oh * ow >= (1LL << 31))
        return "the channels-last kernel counts output pixels in 32 bits: this layer has 2^31 or more";
    if (s.c_in % 4)
        return fmt::format(
            "TMA needs C_IN a multiple of 4 (16-byte pixels of x and rows of W), this layer has {}; "
            "pad the channels with zeros",
            s.c_in);
    p.s = s, p.oh = oh, p.ow = ow, p.y_row_stride = y_row_stride;
    const u64 cin = s.c_in, taps = 1ULL * a.kernel_h * a.kernel_w, pixels = 1ULL * s.batch * oh * ow;
    p.x_map = {.dims = {cin, u64(s.width), u64(s.height), u64(s.batch)},
               .byte_strides = {4 * cin, 4 * cin * s.width, 4 * cin * s.width * s.height},
               .lower_corner = {-a.pad_w, -a.pad_h},
               .upper_corner = {a.pad_w - (a.kernel_w - 1), a.pad_h - (a.kernel_h - 1)},
               .element_strides = {u32(a.stride_w), u32(a.stride_h)},
               .channels = Sm90Geometry::block_k,
               .pixels = u32(t.block_m)};
    p.w_dims = {cin, taps, u64(s.c_out)};
    p.w_strides = {4 * cin, 4 * cin * taps};
    p.w_box = {Sm90Geometry::block_k, 1, u32(t.block_n)};
    p.y_dims = {u64(s.c_out), pixels};
    p.y_strides = {4ULL * y_row_stride};
    p.y_box = {Sm90Geometry::box, Sm90Geometry::box};
    for (const auto& [why, what] :
         {std::pair{p.x_map.unsupported_reason(), "input x"}, {p.w_map().unsupported_reason(), "weight"}})
        if (!why.empty()) return fmt::format("TMA cannot read {} of this layer: {}", what, why);
    return {};
}

/// A layer's sizes from its NHWC input x [B, H, W, C_IN] and its output channels.
Conv2dShape nhwc_shape(ShapeView x, std::size_t c_out) {
    return {as_i32(x[0], "B"), as_i32(x[3], "C_IN"), as_i32(x[1], "H"), as_i32(x[2], "W"), as_i32(c_out, "C_OUT")};
}

/// The plan of a call, its tensors checked against each other and its pointers filled in.
NhwcPlan plan(const Conv2dAttrs& a, const Sm90Tiles& t, const OpCall& call) {
    require(call.inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", call.inputs.size());
    require(call.params.size() == 3, "conv2d_bn_silu takes 3 parameters (weight, bn_scale, bn_shift), {} given",
            call.params.size());
    const ShapeView x = call.inputs[0].shape, y = call.output_shape;
    check_rank4(x, "input x");
    check_rank4(y, "output y");
    const Conv2dShape s = nhwc_shape(x, y[3]);
    const auto [oh, ow] = conv2d_output_size(a, s);
    require(y[0] == x[0] && y[1] == static_cast<std::size_t>(oh) && y[2] == static_cast<std::size_t>(ow),
            "output shape [{}] does not match the channels-last convolution's [{}, {}, {}, {}]", fmt::join(y, ", "),
            x[0], oh, ow, s.c_out);
    require(call.output_row_stride >= s.c_out, "y_row_stride = {} is below the row length C_OUT = {}",
            call.output_row_stride, s.c_out);
    NhwcPlan p;
    if (auto why = plan(a, t, s, call.output_row_stride, p); !why.empty()) throw UsageError(why);
    p.x = p.x_map.base = detail::non_null(call.inputs[0].data, "input x");
    p.w = detail::non_null(call.params[0], "parameter weight");
    p.y = detail::non_null(call.output, "output y");
    for (const auto& [why, what] :
         {std::pair{p.x_map.unsupported_reason(), "input x"}, {p.w_map().unsupported_reason(), "weight"}})
        if (!why.empty()) throw UsageError(fmt::format("TMA cannot read {}: {}", what, why));
    p.y_by_tma = p.y_store_reason().empty();  // else the kernel stores y itself
    return p;
}

std::string hopper_attrs_reason(const Conv2dAttrs& a) {
    if (a.groups != 1)
        return fmt::format("the channels-last kernel takes ungrouped layers, this one has {} groups", a.groups);
    if (a.dilation_h != 1 || a.dilation_w != 1) return "the channels-last kernel takes dilation 1";
    return {};
}

const Conv2dAttrs& checked(const Conv2dAttrs& a) {
    if (auto why = hopper_attrs_reason(a); !why.empty()) throw UsageError(why);
    return a;
}

}  // namespace

class Conv2dBnSiluNhwcTmaForward::MapCache : public detail::TensorMapCache<NhwcPlan> {};

Conv2dBnSiluNhwcTmaForward::Conv2dBnSiluNhwcTmaForward(const Sm90Tiles& tiles, const Conv2dAttrs& attrs,
                                                       const DeviceTraits& device)
    : Conv2dOp(detail::sm90_kernel("conv2d_bn_silu_nhwc_tma_forward", KernelType::signature(), tiles, device),
               checked(attrs)),
      tiles_(tiles),
      multiprocessors_(device.multiprocessors),
      maps_(std::make_unique<MapCache>()) {}

Conv2dBnSiluNhwcTmaForward::~Conv2dBnSiluNhwcTmaForward() = default;

std::vector<Shape> Conv2dBnSiluNhwcTmaForward::param_shapes(std::span<const ShapeView> inputs, ShapeView y) const {
    require(inputs.size() == 1, "conv2d_bn_silu takes 1 input");
    check_rank4(inputs[0], "input x");
    check_rank4(y, "output y");
    const std::size_t c_out = y[3];
    return {
        {c_out, static_cast<std::size_t>(attrs().kernel_h), static_cast<std::size_t>(attrs().kernel_w), inputs[0][3]},
        {c_out},
        {c_out}};
}

std::size_t Conv2dBnSiluNhwcTmaForward::forward_output_row_elems(ShapeView y) const {
    check_rank4(y, "output y");
    return y[3];
}

Shape Conv2dBnSiluNhwcTmaForward::compute_concrete_output_shape(std::span<const ShapeView> inputs,
                                                                ShapeView resolved) const {
    require(inputs.size() == 1, "conv2d_bn_silu takes 1 input");
    check_rank4(inputs[0], "input x");
    check_rank4(resolved, "output y");
    const ShapeView x = inputs[0];
    const auto [oh, ow] = conv2d_output_size(attrs(), nhwc_shape(x, resolved[3]));
    return {x[0], static_cast<std::size_t>(oh), static_cast<std::size_t>(ow), resolved[3]};
}

void Conv2dBnSiluNhwcTmaForward::prepare_param(std::size_t index, std::span<float> values) const {
    if (index == weight_slot) detail::round_to_tf32(values);
}

void Conv2dBnSiluNhwcTmaForward::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    const NhwcPlan p = plan(attrs(), tiles_, call);
    const auto& maps = maps_->get(p, [](const NhwcPlan& q) {
        return detail::CallMaps<NhwcPlan>{q, q.x_map.encode(), q.w_map().encode(),
                                          q.y_by_tma ? q.y_map().encode() : TensorMap{}};
    });
    visitor.visit_tensor_map(maps.x);
    visitor.visit_tensor_map(maps.w);
    visitor.visit_tensor_map(maps.y);
    visitor.visit_ptr(p.y);
    visitor.visit_ptr(detail::non_null(call.params[1], "parameter bn_scale"));
    visitor.visit_ptr(detail::non_null(call.params[2], "parameter bn_shift"));
    const Conv2dAttrs& a = attrs();
    for (int v : {p.s.batch, p.s.c_in, p.s.c_out, p.oh, p.ow, a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.pad_h,
                  a.pad_w, p.y_row_stride, int{p.y_by_tma}})
        visitor.visit_i32(v);
}

Dims Conv2dBnSiluNhwcTmaForward::grid(ShapeView y) const {
    check_rank4(y, "output y");
    return detail::sm90_grid(tiles_, ceil_div<std::size_t>(y[0] * y[1] * y[2], Sm90Geometry::box), y[3],
                             multiprocessors_);
}

std::string conv2d_nhwc_tma_unsupported_reason(const Conv2dAttrs& a, const Conv2dShape& s, const DeviceTraits& device) {
    if (!device.hopper()) return fmt::format("TMA + wgmma needs a 9.0 device, this is {}", device.arch.name());
    if (auto why = hopper_attrs_reason(a); !why.empty()) return why;
    NhwcPlan p;
    return plan(a, Sm90Tiles{128, 128, 4, 8}, s, s.c_out, p);
}

std::string conv2d_nhwc_tma_y_store_reason(const Conv2dAttrs& a, const Conv2dShape& s, int y_row_stride) {
    NhwcPlan p;
    if (auto why = plan(checked(a), Sm90Tiles{128, 128, 4, 8}, s, y_row_stride, p); !why.empty()) throw UsageError(why);
    return p.y_store_reason();
}

std::vector<Sm90Tiles> conv2d_bn_silu_nhwc_candidates(const Conv2dAttrs& a, const Conv2dShape& s,
                                                      const DeviceTraits& device) {
    if (auto why = conv2d_nhwc_tma_unsupported_reason(a, s, device); !why.empty()) throw UsageError(why);
    const auto [oh, ow] = conv2d_output_size(a, s);
    const long long boxes = ceil_div(1LL * s.batch * oh * ow, 32LL);
    return detail::sm90_split_candidates(boxes, detail::nhwc_k(a, s), s.c_out, 0, device, 1);  // ungrouped
}

}  // namespace kjit
