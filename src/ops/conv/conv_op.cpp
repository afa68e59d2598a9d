// What every conv op shares: output size, parameters (with the BatchNorm fold), row layout,
// and the checks and argument order of the general kernels.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/conv.hpp>

#include "ops/conv/conv_call.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::as_i32;
using detail::check_rank4;
using detail::non_null;
using detail::require;

std::pair<int, int> conv2d_output_size(const Conv2dAttrs& a, const Conv2dShape& s) {
    require(s.batch > 0 && s.c_in > 0 && s.height > 0 && s.width > 0 && s.c_out > 0,
            "conv2d shape must be positive: batch {}, c_in {}, height {}, width {}, c_out {}", s.batch, s.c_in,
            s.height, s.width, s.c_out);
    require(a.kernel_h > 0 && a.kernel_w > 0, "kernel size {}x{} must be positive", a.kernel_h, a.kernel_w);
    require(a.stride_h > 0 && a.stride_w > 0, "stride {}x{} must be positive", a.stride_h, a.stride_w);
    require(a.pad_h >= 0 && a.pad_w >= 0, "padding {}x{} must not be negative", a.pad_h, a.pad_w);
    require(a.dilation_h == 1 && a.dilation_w == 1,
            "dilation {}x{} is not supported: kjit's conv kernels take dilation 1", a.dilation_h, a.dilation_w);
    require(a.groups > 0 && s.c_in % a.groups == 0 && s.c_out % a.groups == 0,
            "groups = {} must divide both c_in = {} and c_out = {}", a.groups, s.c_in, s.c_out);
    const int oh = (s.height + 2 * a.pad_h - a.kernel_h) / a.stride_h + 1;
    const int ow = (s.width + 2 * a.pad_w - a.kernel_w) / a.stride_w + 1;
    require(s.height + 2 * a.pad_h >= a.kernel_h && s.width + 2 * a.pad_w >= a.kernel_w,
            "a {}x{} kernel does not fit a {}x{} input padded by {}x{}", a.kernel_h, a.kernel_w, s.height, s.width,
            a.pad_h, a.pad_w);
    return {oh, ow};
}

// ---- Conv2dOp -------------------------------------------------------------------------------

namespace {
constexpr std::string_view conv_param_names[] = {"weight", "bn_scale", "bn_shift"};
constexpr std::size_t bn_scale_slot = 1, bn_shift_slot = 2;
}  // namespace

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

std::optional<ParamFold> Conv2dOp::param_fold(std::span<const Shape> param_shapes) const {
    require(param_shapes.size() == 3, "conv2d_bn_silu has 3 parameter slots, {} shapes given", param_shapes.size());
    const float eps = attrs_.bn_eps;
    return ParamFold{{"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
                     param_shapes[bn_scale_slot],
                     {bn_scale_slot, bn_shift_slot},
                     [eps](std::span<const std::vector<float>> bn) {
                         auto folded = fold_batch_norm(bn[0], bn[1], bn[2], bn[3], eps);
                         return std::vector<std::vector<float>>{std::move(folded.scale), std::move(folded.shift)};
                     }};
}

std::size_t Conv2dOp::forward_output_row_elems(ShapeView output_shape) const {
    check_rank4(output_shape, "output y");  // rows are (image, channel) pairs of OH·OW pixels
    return output_shape[2] * output_shape[3];
}

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

// ---- what the kernels' arguments share --------------------------------------------------------

void detail::visit_conv_tensors(const OpCall& call, ArgVisitor& visitor) {
    require(call.inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", call.inputs.size());
    require(call.params.size() == 3, "conv2d_bn_silu takes 3 parameters (weight, bn_scale, bn_shift), {} given",
            call.params.size());
    visitor.visit_ptr(non_null(call.inputs[0].data, "input x"));
    visitor.visit_ptr(non_null(call.params[0], "parameter weight"));
    visitor.visit_ptr(non_null(call.params[1], "parameter bn_scale"));
    visitor.visit_ptr(non_null(call.params[2], "parameter bn_shift"));
    visitor.visit_ptr(non_null(call.output, "output y"));
}

detail::ConvCall detail::resolve_conv_call(const Conv2dAttrs& a, const OpCall& call) {
    check_rank4(call.output_shape, "output y");
    require(call.inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", call.inputs.size());
    const ShapeView x = call.inputs[0].shape;
    check_rank4(x, "input x");
    const Conv2dShape s{as_i32(x[0], "B"), as_i32(x[1], "C_IN"), as_i32(x[2], "H"), as_i32(x[3], "W"),
                        as_i32(call.output_shape[1], "C_OUT")};
    const auto [oh, ow] = conv2d_output_size(a, s);
    require(call.output_shape[0] == x[0] && call.output_shape[2] == static_cast<std::size_t>(oh) &&
                call.output_shape[3] == static_cast<std::size_t>(ow),
            "output shape [{}] does not match the convolution's [{}, {}, {}, {}]", fmt::join(call.output_shape, ", "),
            x[0], s.c_out, oh, ow);
    require(call.output_row_stride >= oh * ow, "y_row_stride = {} is below the row length OH*OW = {}",
            call.output_row_stride, oh * ow);
    as_i32(x[0] * x[1] * x[2] * x[3], "input elements");
    return {s, oh, ow};
}

detail::ImageStrides detail::image_strides(const OpCall& call) {
    require(call.inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", call.inputs.size());
    const Tensor& x = call.inputs[0];
    check_rank4(x.shape, "input x");
    check_rank4(call.output_shape, "output y");
    const std::size_t x_image = x.shape[1] * x.shape[2] * x.shape[3],
                      y_image = call.output_shape[1] * static_cast<std::size_t>(std::max(call.output_row_stride, 0));
    require(image_stride_of(x) >= x_image, "input x: image stride {} is below its images' {} elements", x.image_stride,
            x_image);
    require(call.output_image_stride == 0 || call.output_image_stride >= y_image,
            "output y: image stride {} is below its images' C_OUT*y_row_stride = {} elements", call.output_image_stride,
            y_image);
    const std::size_t y_stride = call.output_image_stride ? call.output_image_stride : y_image;
    return {static_cast<std::int64_t>(image_stride_of(x)), static_cast<std::int64_t>(y_stride)};
}

void detail::visit_image_strides(const OpCall& call, ArgVisitor& visitor) {
    const ImageStrides s = image_strides(call);
    visitor.visit_i64(s.x);
    visitor.visit_i64(s.y);
    visitor.visit_ptr(const_cast<void*>(call.residual));  // the kernel's `const float* residual`
}

void detail::visit_conv_ints(const ConvCall& c, const Conv2dAttrs& a, int output_row_stride, ArgVisitor& visitor) {
    for (int v : {c.shape.batch, c.shape.c_in, c.shape.height, c.shape.width, c.shape.c_out, c.oh, c.ow, a.kernel_h,
                  a.kernel_w, a.stride_h, a.pad_h, a.groups, output_row_stride})
        visitor.visit_i32(v);
}

void detail::require_general_attrs(const Conv2dAttrs& a) {
    require(a.stride_h == a.stride_w && a.pad_h == a.pad_w,
            "stride {}x{} and padding {}x{}: kjit's conv kernels take one stride and one padding for both axes",
            a.stride_h, a.stride_w, a.pad_h, a.pad_w);
    require(a.kernel_h > 0 && a.kernel_w > 0 && a.stride_h > 0 && a.pad_h >= 0 && a.groups > 0,
            "kernel size, stride and groups must be positive, padding not negative");
    require(a.dilation_h == 1 && a.dilation_w == 1,
            "dilation {}x{} is not supported: kjit's conv kernels take dilation 1", a.dilation_h, a.dilation_w);
}

}  // namespace kjit
