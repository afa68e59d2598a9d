// The elementwise ops around the convolutions: add, channel concat, max pooling, nearest
// upsampling (kjit/ops.hpp). Each checks its tensors and packs its kernel's arguments.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/ops.hpp>

#include "op_checks.hpp"

namespace kjit {

using detail::as_i32;
using detail::check_rank4;
using detail::elementwise_grid;
using detail::non_null;
using detail::require;

namespace {

constexpr std::int64_t block_constant = elementwise_block;

/// Checks what every elementwise op's pack_args needs: the input count, the output shape the
/// op makes of its inputs, and tight output rows (the kernels write no other stride).
void check_call(const RuntimeOp& op, std::string_view name, std::span<const Tensor> inputs, ShapeView output_shape,
                int output_row_stride) {
    require(inputs.size() == op.n_activation_inputs(), "{} takes {} inputs, {} given", name, op.n_activation_inputs(),
            inputs.size());
    std::vector<ShapeView> shapes;
    for (const auto& t : inputs) shapes.push_back(t.shape);
    const Shape expected = op.compute_concrete_output_shape(shapes, output_shape);
    require(std::ranges::equal(expected, output_shape), "{}: output shape [{}] should be [{}]", name,
            fmt::join(output_shape, ", "), fmt::join(expected, ", "));
    require(output_row_stride == static_cast<int>(output_shape.back()),
            "{} writes tight rows: output_row_stride must be {}, not {}", name, output_shape.back(), output_row_stride);
}

}  // namespace

Dims ElementwiseOp::block() const { return {elementwise_block, 1, 1}; }
Dims ElementwiseOp::grid(ShapeView output_shape) const {
    return elementwise_grid(element_count(output_shape), elementwise_block);
}

// ---- add -------------------------------------------------------------------------------------------

AddOp::AddOp() : TypedKernel("add", {{"BLOCK", block_constant}}, elementwise_block) {}

Shape AddOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 2, "add takes 2 inputs, {} given", in.size());
    require(std::ranges::equal(in[0], in[1]), "add needs equal shapes: [{}] and [{}]", fmt::join(in[0], ", "),
            fmt::join(in[1], ", "));
    return Shape(in[0].begin(), in[0].end());
}

void AddOp::pack_args(std::span<const Tensor> inputs, std::span<void* const>, void* output, ShapeView output_shape,
                      int output_row_stride, ArgVisitor& visitor) const {
    check_call(*this, "add", inputs, output_shape, output_row_stride);
    visitor.visit_ptr(non_null(inputs[0].data, "input a"));
    visitor.visit_ptr(non_null(inputs[1].data, "input b"));
    visitor.visit_ptr(non_null(output, "output y"));
    visitor.visit_i64(static_cast<std::int64_t>(element_count(output_shape)));
}

// ---- concat along channels ---------------------------------------------------------------------------

ConcatChannelsOp::ConcatChannelsOp(std::size_t n_inputs)
    : TypedKernel("concat_channels", {{"BLOCK", block_constant}}, elementwise_block), n_inputs_(n_inputs) {
    require(n_inputs >= 1, "concat needs at least one input");
}

Shape ConcatChannelsOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == n_inputs_, "concat was made for {} inputs, {} given", n_inputs_, in.size());
    std::size_t channels = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        check_rank4(in[i], "a concat input");
        require(in[i][0] == in[0][0] && in[i][2] == in[0][2] && in[i][3] == in[0][3],
                "concat along channels needs equal batch and size: input {} is [{}], input 1 is [{}]", i + 1,
                fmt::join(in[i], ", "), fmt::join(in[0], ", "));
        channels += in[i][1];
    }
    return {in[0][0], channels, in[0][2], in[0][3]};
}

void ConcatChannelsOp::pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output,
                                 ShapeView output_shape, int output_row_stride, ArgVisitor& visitor) const {
    pack_args_for_launch(0, inputs, params, output, output_shape, output_row_stride, visitor);
}

void ConcatChannelsOp::pack_args_for_launch(std::size_t launch, std::span<const Tensor> inputs, std::span<void* const>,
                                            void* output, ShapeView output_shape, int output_row_stride,
                                            ArgVisitor& visitor) const {
    check_call(*this, "concat", inputs, output_shape, output_row_stride);
    require(launch < inputs.size(), "concat launch {} of {} inputs", launch, inputs.size());
    std::size_t offset = 0;
    for (std::size_t i = 0; i < launch; ++i) offset += inputs[i].shape[1];
    const ShapeView src = inputs[launch].shape;
    visitor.visit_ptr(non_null(inputs[launch].data, "a concat input"));
    visitor.visit_ptr(non_null(output, "output y"));
    visitor.visit_i32(as_i32(src[0], "B"));
    visitor.visit_i32(as_i32(src[1], "C_SRC"));
    visitor.visit_i32(as_i32(output_shape[1], "C_DST"));
    visitor.visit_i32(as_i32(offset, "C_OFFSET"));
    visitor.visit_i64(static_cast<std::int64_t>(src[2] * src[3]));
}

Dims ConcatChannelsOp::grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes, ShapeView) const {
    require(launch < input_shapes.size(), "concat launch {} of {} inputs", launch, input_shapes.size());
    return elementwise_grid(element_count(input_shapes[launch]), elementwise_block);
}

// ---- max pooling -----------------------------------------------------------------------------------------

MaxPool2dOp::MaxPool2dOp(int kernel, int stride, int pad)
    : TypedKernel("maxpool2d", {{"BLOCK", block_constant}}, elementwise_block), kernel_(kernel), stride_(stride), pad_(pad) {
    require(kernel >= 1 && stride >= 1 && pad >= 0 && pad <= kernel / 2,
            "maxpool2d kernel {} stride {} pad {}: kernel and stride must be positive, 0 <= pad <= kernel / 2", kernel,
            stride, pad);
}

Shape MaxPool2dOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 1, "maxpool2d takes 1 input, {} given", in.size());
    check_rank4(in[0], "maxpool2d input");
    const auto h = static_cast<long long>(in[0][2]) + 2 * pad_ - kernel_, w = static_cast<long long>(in[0][3]) + 2 * pad_ - kernel_;
    require(h >= 0 && w >= 0, "maxpool2d: a {}x{} input with padding {} is smaller than the {}x{} window", in[0][2],
            in[0][3], pad_, kernel_, kernel_);
    return {in[0][0], in[0][1], static_cast<std::size_t>(h / stride_ + 1), static_cast<std::size_t>(w / stride_ + 1)};
}

void MaxPool2dOp::pack_args(std::span<const Tensor> inputs, std::span<void* const>, void* output,
                            ShapeView output_shape, int output_row_stride, ArgVisitor& visitor) const {
    check_call(*this, "maxpool2d", inputs, output_shape, output_row_stride);
    const ShapeView x = inputs[0].shape;
    as_i32(element_count(x), "input elements");
    visitor.visit_ptr(non_null(inputs[0].data, "input x"));
    visitor.visit_ptr(non_null(output, "output y"));
    for (std::size_t v : {x[0], x[1], x[2], x[3], output_shape[2], output_shape[3]}) visitor.visit_i32(as_i32(v, "a size"));
    visitor.visit_i32(kernel_);
    visitor.visit_i32(stride_);
    visitor.visit_i32(pad_);
}

// ---- nearest upsampling -----------------------------------------------------------------------------------

UpsampleNearest2dOp::UpsampleNearest2dOp(int scale)
    : TypedKernel("upsample_nearest2d", {{"BLOCK", block_constant}, {"SCALE", std::int64_t{scale}}}, elementwise_block),
      scale_(scale) {
    require(scale >= 1 && scale <= 16, "upsample scale {} must be 1 to 16", scale);
}

Shape UpsampleNearest2dOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 1, "upsample_nearest2d takes 1 input, {} given", in.size());
    check_rank4(in[0], "upsample input");
    const auto s = static_cast<std::size_t>(scale_);
    return {in[0][0], in[0][1], in[0][2] * s, in[0][3] * s};
}

void UpsampleNearest2dOp::pack_args(std::span<const Tensor> inputs, std::span<void* const>, void* output,
                                    ShapeView output_shape, int output_row_stride, ArgVisitor& visitor) const {
    check_call(*this, "upsample_nearest2d", inputs, output_shape, output_row_stride);
    as_i32(element_count(output_shape), "output elements");
    const ShapeView x = inputs[0].shape;
    visitor.visit_ptr(non_null(inputs[0].data, "input x"));
    visitor.visit_ptr(non_null(output, "output y"));
    for (std::size_t v : {x[0], x[1], x[2], x[3]}) visitor.visit_i32(as_i32(v, "a size"));
}

}  // namespace kjit
