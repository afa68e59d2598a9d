// The elementwise ops around the convolutions: add, channel concat, max pooling, nearest
// upsampling, cast (kjit/elementwise.hpp). Each checks its tensors and packs its kernel's arguments.
#include <kjit/elementwise.hpp>

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/op_checks.hpp"

namespace kjit {

using detail::as_i32;
using detail::check_rank4;
using detail::elementwise_grid;
using detail::non_null;
using detail::require;

namespace {
constexpr std::int64_t block_constant = elementwise_block;

/// The kernel `Kernel` of body `name`, compiled for elementwise_block threads.
template <class K>
K elementwise_kernel(std::string name, std::vector<Constant> extra = {}) {
    std::vector<Constant> constants{{"BLOCK", block_constant}};
    constants.insert(constants.end(), extra.begin(), extra.end());
    return K(std::move(name), std::move(constants), elementwise_block);
}
}  // namespace

Dims ElementwiseOp::grid(ShapeView output_shape) const {
    return elementwise_grid(element_count(output_shape), elementwise_block);
}

void ElementwiseOp::check_call(const OpCall& call) const {
    const std::string_view name = kernel_.name();
    require(call.inputs.size() == n_inputs_, "{} takes {} inputs, {} given", name, n_inputs_, call.inputs.size());
    std::vector<ShapeView> shapes;
    for (const auto& t : call.inputs) shapes.push_back(t.shape);
    const Shape expected = compute_concrete_output_shape(shapes, call.output_shape);
    require(std::ranges::equal(expected, call.output_shape), "{}: output shape [{}] should be [{}]", name,
            fmt::join(call.output_shape, ", "), fmt::join(expected, ", "));
    require(call.output_row_stride == static_cast<int>(call.output_shape.back()),
            "{} writes tight rows: output_row_stride must be {}, not {}", name, call.output_shape.back(),
            call.output_row_stride);
    const auto check_stride = [&](const Tensor& t, std::string_view what) {
        const std::size_t image = element_count(t.shape) / t.shape[0];
        require(image_stride_of(t) >= image, "{}: {}'s images are {} elements, its image stride {} is shorter", name,
                what, image, t.image_stride);
    };
    for (const Tensor& t : call.inputs) check_stride(t, "an input");
    check_stride({call.output, call.output_shape, call.output_image_stride}, "the output");
}

namespace {
/// Elements from one image of the call's output to the next.
std::int64_t output_stride(const OpCall& call) {
    return static_cast<std::int64_t>(image_stride_of({call.output, call.output_shape, call.output_image_stride}));
}
std::int64_t input_stride(const OpCall& call, std::size_t i) {
    return static_cast<std::int64_t>(image_stride_of(call.inputs[i]));
}

/// The arguments of a kernel that maps its inputs to y element by element (add, cast): the
/// inputs (`names` in order), y, the element count, an image's, then each tensor's image stride.
void pack_pointwise(const OpCall& call, ArgVisitor& visitor, std::initializer_list<const char*> names) {
    for (std::size_t i = 0; const char* name : names) visitor.visit_ptr(non_null(call.inputs[i++].data, name));
    visitor.visit_ptr(non_null(call.output, "output y"));
    const std::size_t n = element_count(call.output_shape);
    visitor.visit_i64(static_cast<std::int64_t>(n));
    visitor.visit_i64(static_cast<std::int64_t>(n / call.output_shape[0]));
    for (std::size_t i = 0; i < names.size(); ++i) visitor.visit_i64(input_stride(call, i));
    visitor.visit_i64(output_stride(call));
}
}  // namespace

// ---- add -------------------------------------------------------------------------------------------

AddOp::AddOp() : ElementwiseOp(elementwise_kernel<KernelType>("add"), 2) {}

Shape AddOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 2, "add takes 2 inputs, {} given", in.size());
    require(std::ranges::equal(in[0], in[1]), "add needs equal shapes: [{}] and [{}]", fmt::join(in[0], ", "),
            fmt::join(in[1], ", "));
    return Shape(in[0].begin(), in[0].end());
}

void AddOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    check_call(call);
    pack_pointwise(call, visitor, {"input a", "input b"});
}

// ---- concat along channels ---------------------------------------------------------------------------

ConcatChannelsOp::ConcatChannelsOp(std::size_t n_inputs)
    : ElementwiseOp(elementwise_kernel<KernelType>("concat_channels"), n_inputs) {
    require(n_inputs >= 1, "concat needs at least one input");
}

Shape ConcatChannelsOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == n_activation_inputs(), "concat was made for {} inputs, {} given", n_activation_inputs(),
            in.size());
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

void ConcatChannelsOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    pack_args_for_launch(0, call, visitor);
}

void ConcatChannelsOp::pack_args_for_launch(std::size_t launch, const OpCall& call, ArgVisitor& visitor) const {
    check_call(call);
    require(launch < call.inputs.size(), "concat launch {} of {} inputs", launch, call.inputs.size());
    std::size_t offset = 0;
    for (std::size_t i = 0; i < launch; ++i) offset += call.inputs[i].shape[1];
    const ShapeView src = call.inputs[launch].shape;
    visitor.visit_ptr(non_null(call.inputs[launch].data, "a concat input"));
    visitor.visit_ptr(non_null(call.output, "output y"));
    visitor.visit_i32(as_i32(src[0], "B"));
    visitor.visit_i32(as_i32(src[1], "C_SRC"));
    visitor.visit_i32(as_i32(offset, "C_OFFSET"));
    visitor.visit_i64(static_cast<std::int64_t>(src[2] * src[3]));
    visitor.visit_i64(input_stride(call, launch));
    visitor.visit_i64(output_stride(call));
}

Dims ConcatChannelsOp::grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes, ShapeView) const {
    require(launch < input_shapes.size(), "concat launch {} of {} inputs", launch, input_shapes.size());
    return elementwise_grid(element_count(input_shapes[launch]), elementwise_block);
}

// ---- cast ------------------------------------------------------------------------------------------

namespace {
Kernel cast_kernel(Scalar from, Scalar to) {
    const auto floating = [](Scalar t) { return t == Scalar::f32 || t == Scalar::f16 || t == Scalar::bf16; };
    require(floating(from) && floating(to), "cast converts between f32, f16 and bf16, not {} to {}", short_name(from),
            short_name(to));
    require(from != to, "a cast from {} to itself does nothing: leave it out", short_name(from));
    const auto i64 = ParamType{Scalar::i64};
    return Kernel(KernelSpec{
        "cast",
        {{"BLOCK", block_constant}, {"SRC", from}, {"DST", to}},
        {{"x", {from, true}}, {"y", {to, true}}, {"n", i64}, {"image", i64}, {"x_stride", i64}, {"y_stride", i64}},
        elementwise_block});
}
}  // namespace

CastOp::CastOp(Scalar from, Scalar to) : ElementwiseOp(cast_kernel(from, to), 1), from_(from), to_(to) {}

Shape CastOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 1, "cast takes 1 input, {} given", in.size());
    require(!in[0].empty(), "cast needs a tensor of at least one dimension");
    return Shape(in[0].begin(), in[0].end());
}

void CastOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    check_call(call);
    pack_pointwise(call, visitor, {"input x"});
}

// ---- max pooling -----------------------------------------------------------------------------------------

MaxPool2dOp::MaxPool2dOp(int kernel, int stride, int pad)
    : ElementwiseOp(elementwise_kernel<KernelType>("maxpool2d"), 1), window_(kernel), stride_(stride), pad_(pad) {
    require(kernel >= 1 && stride >= 1 && pad >= 0 && pad <= kernel / 2,
            "maxpool2d kernel {} stride {} pad {}: kernel and stride must be positive, 0 <= pad <= kernel / 2", kernel,
            stride, pad);
}

Shape MaxPool2dOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 1, "maxpool2d takes 1 input, {} given", in.size());
    check_rank4(in[0], "maxpool2d input");
    const auto h = static_cast<long long>(in[0][2]) + 2 * pad_ - window_;
    const auto w = static_cast<long long>(in[0][3]) + 2 * pad_ - window_;
    require(h >= 0 && w >= 0, "maxpool2d: a {}x{} input with padding {} is smaller than the {}x{} window", in[0][2],
            in[0][3], pad_, window_, window_);
    return {in[0][0], in[0][1], static_cast<std::size_t>(h / stride_ + 1), static_cast<std::size_t>(w / stride_ + 1)};
}

void MaxPool2dOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    check_call(call);
    const ShapeView x = call.inputs[0].shape;
    as_i32(element_count(x), "input elements");
    visitor.visit_ptr(non_null(call.inputs[0].data, "input x"));
    visitor.visit_ptr(non_null(call.output, "output y"));
    for (std::size_t v : {x[0], x[1], x[2], x[3], call.output_shape[2], call.output_shape[3]})
        visitor.visit_i32(as_i32(v, "a size"));
    visitor.visit_i32(window_);
    visitor.visit_i32(stride_);
    visitor.visit_i32(pad_);
    visitor.visit_i64(input_stride(call, 0));
    visitor.visit_i64(output_stride(call));
}

namespace {
/// Whether `op` is the size-keeping pool over `window` that MaxPool2dChainOp repeats, on planes
/// of `input` it can hold.
bool repeats_pool(const RuntimeOp& op, int window, ShapeView input) {
    const auto* pool = dynamic_cast<const MaxPool2dOp*>(&op);
    return pool && pool->window() == window && pool->stride() == 1 && 2 * pool->pad() + 1 == window &&
           input.size() == 4 && input[2] * input[3] <= MaxPool2dChainOp::max_plane;
}
}  // namespace

std::unique_ptr<RuntimeOp> MaxPool2dOp::chained_with(const RuntimeOp& next, ShapeView input) const {
    if (!repeats_pool(*this, window_, input) || !repeats_pool(next, window_, input)) return nullptr;
    return std::make_unique<MaxPool2dChainOp>(window_, 2);
}

// ---- chained size-keeping max pools ----------------------------------------------------------------------

namespace {
/// Whole planes a block of maxpool2d_chain pools at once: about one element per thread.
std::size_t planes_per_block(std::size_t plane) { return std::max<std::size_t>(1, elementwise_block / plane); }
}  // namespace

MaxPool2dChainOp::MaxPool2dChainOp(int window, int repeats)
    : ElementwiseOp(
          elementwise_kernel<KernelType>("maxpool2d_chain", {{"CAPACITY", static_cast<std::int64_t>(max_plane)}}), 1),
      window_(window),
      repeats_(repeats) {
    require(window >= 1 && window % 2 == 1 && repeats >= 2 && repeats <= max_repeats,
            "maxpool2d_chain window {} repeats {}: the window must be odd and 2 <= repeats <= {}", window, repeats,
            max_repeats);
}

Shape MaxPool2dChainOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 1, "maxpool2d_chain takes 1 input, {} given", in.size());
    check_rank4(in[0], "maxpool2d_chain input");
    require(in[0][2] * in[0][3] <= max_plane,
            "maxpool2d_chain: a {}x{} plane is over the {} elements a block holds: run the pools one by one", in[0][2],
            in[0][3], max_plane);
    return Shape(in[0].begin(), in[0].end());
}

Dims MaxPool2dChainOp::grid(ShapeView out) const {
    check_rank4(out, "maxpool2d_chain output");
    const std::size_t per_block = planes_per_block(out[2] * out[3]);
    return elementwise_grid(ceil_div<std::size_t>(out[0] * out[1], per_block), 1);
}

void MaxPool2dChainOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    check_call(call);
    require(call.chained_outputs.size() + 1 == static_cast<std::size_t>(repeats_),
            "maxpool2d_chain of {} pools writes {} chained outputs, {} given", repeats_, repeats_ - 1,
            call.chained_outputs.size());
    const ShapeView x = call.inputs[0].shape;
    std::array<Tensor, max_repeats> y{};
    y[0] = {non_null(call.output, "output y1"), call.output_shape, call.output_image_stride};
    for (std::size_t r = 0; r < call.chained_outputs.size(); ++r) {
        const Tensor& t = call.chained_outputs[r];
        require(std::ranges::equal(t.shape, call.output_shape) && image_stride_of(t) >= element_count(x) / x[0],
                "maxpool2d_chain: chained output {} is [{}] at image stride {}; every output is [{}]", r + 1,
                fmt::join(t.shape, ", "), image_stride_of(t), fmt::join(call.output_shape, ", "));
        y[r + 1] = {non_null(t.data, "a chained output"), t.shape, t.image_stride};
    }
    visitor.visit_ptr(non_null(call.inputs[0].data, "input x"));
    for (const Tensor& t : y) visitor.visit_ptr(t.data);
    for (std::size_t v : {x[0] * x[1], x[1], x[2], x[3]}) visitor.visit_i32(as_i32(v, "a size"));
    visitor.visit_i32(window_);
    visitor.visit_i32(repeats_);
    visitor.visit_i32(static_cast<std::int32_t>(planes_per_block(x[2] * x[3])));
    visitor.visit_i64(input_stride(call, 0));
    for (const Tensor& t : y) visitor.visit_i64(t.data ? static_cast<std::int64_t>(image_stride_of(t)) : 0);
}

std::unique_ptr<RuntimeOp> MaxPool2dChainOp::chained_with(const RuntimeOp& next, ShapeView input) const {
    if (repeats_ == max_repeats || !repeats_pool(next, window_, input)) return nullptr;
    return std::make_unique<MaxPool2dChainOp>(window_, repeats_ + 1);
}

// ---- nearest upsampling -----------------------------------------------------------------------------------

UpsampleNearest2dOp::UpsampleNearest2dOp(int scale)
    : ElementwiseOp(elementwise_kernel<KernelType>("upsample_nearest2d", {{"SCALE", std::int64_t{scale}}}), 1),
      scale_(scale) {
    require(scale >= 1 && scale <= 16, "upsample scale {} must be 1 to 16", scale);
}

Shape UpsampleNearest2dOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    require(in.size() == 1, "upsample_nearest2d takes 1 input, {} given", in.size());
    check_rank4(in[0], "upsample input");
    const auto s = static_cast<std::size_t>(scale_);
    return {in[0][0], in[0][1], in[0][2] * s, in[0][3] * s};
}

void UpsampleNearest2dOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    check_call(call);
    as_i32(element_count(call.output_shape), "output elements");
    const ShapeView x = call.inputs[0].shape;
    visitor.visit_ptr(non_null(call.inputs[0].data, "input x"));
    visitor.visit_ptr(non_null(call.output, "output y"));
    for (std::size_t v : {x[0], x[1], x[2], x[3]}) visitor.visit_i32(as_i32(v, "a size"));
    visitor.visit_i64(input_stride(call, 0));
    visitor.visit_i64(output_stride(call));
}

}  // namespace kjit
