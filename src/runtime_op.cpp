// RuntimeOp's defaults, and running an op's launches through a Runtime.
#include <algorithm>

#include <fmt/format.h>
#include <kjit/error.hpp>
#include <kjit/runtime.hpp>
#include <kjit/runtime_op.hpp>

namespace kjit {
namespace {
[[noreturn]] void no_backward(const char* what) {
    throw UsageError(fmt::format("{}: this op has no backward pass (has_backward() is false)", what));
}
}  // namespace

std::vector<Shape> RuntimeOp::param_shapes(std::span<const ShapeView>, ShapeView) const { return {}; }
std::span<const std::string_view> RuntimeOp::param_names() const { return {}; }
std::size_t RuntimeOp::forward_output_row_elems(ShapeView output_shape) const {
    return output_shape.empty() ? 1 : output_shape.back();
}
std::size_t RuntimeOp::forward_output_row_stride(ShapeView output_shape) const {
    return forward_output_row_elems(output_shape);
}
std::optional<std::vector<std::byte>> RuntimeOp::param_init_data(std::size_t) const { return std::nullopt; }
Shape RuntimeOp::compute_concrete_output_shape(std::span<const ShapeView>, ShapeView resolved) const {
    return Shape(resolved.begin(), resolved.end());
}

std::size_t RuntimeOp::n_launches() const { return 1; }
void RuntimeOp::pack_args_for_launch(std::size_t, std::span<const Tensor> inputs, std::span<void* const> params,
                                     void* output, ShapeView output_shape, int output_row_stride,
                                     ArgVisitor& visitor) const {
    pack_args(inputs, params, output, output_shape, output_row_stride, visitor);
}
Dims RuntimeOp::grid_for_launch(std::size_t, std::span<const ShapeView>, ShapeView output_shape) const {
    return grid(output_shape);
}

bool RuntimeOp::has_backward() const { return false; }
std::size_t RuntimeOp::backward_grad_output_row_stride(ShapeView output_shape) const {
    return output_shape.empty() ? 1 : output_shape.back();
}
void RuntimeOp::pack_backward_args(std::span<const Tensor>, std::span<void* const>, void*, ShapeView, void*, int,
                                   std::span<void* const>, std::span<void* const>, ArgVisitor&) const {
    no_backward("pack_backward_args");
}
Dims RuntimeOp::backward_block() const { no_backward("backward_block"); }
Dims RuntimeOp::backward_grid(std::span<const ShapeView>, ShapeView) const { no_backward("backward_grid"); }
std::size_t RuntimeOp::n_backward_launches() const { return has_backward() ? 1 : 0; }
void RuntimeOp::pack_backward_args_for_launch(std::size_t, std::span<const Tensor> inputs,
                                              std::span<void* const> params, void* output, ShapeView output_shape,
                                              void* grad_output, int grad_output_row_stride,
                                              std::span<void* const> grad_inputs, std::span<void* const> grad_params,
                                              ArgVisitor& visitor) const {
    pack_backward_args(inputs, params, output, output_shape, grad_output, grad_output_row_stride, grad_inputs,
                       grad_params, visitor);
}
Dims RuntimeOp::backward_grid_for_launch(std::size_t, std::span<const ShapeView> input_shapes,
                                         ShapeView output_shape) const {
    return backward_grid(input_shapes, output_shape);
}

unsigned RuntimeOp::shared_bytes_for_launch(std::size_t) const { return 0; }
Dims RuntimeOp::cluster_for_launch(std::size_t) const { return {1, 1, 1}; }

void RuntimeOp::forward(Runtime& runtime, const Stream& stream, std::span<const Tensor> inputs,
                        std::span<void* const> params, void* output, ShapeView output_shape,
                        int output_row_stride) const {
    if (inputs.size() != n_activation_inputs())
        throw UsageError(fmt::format("op takes {} activation inputs, {} were given", n_activation_inputs(),
                                     inputs.size()));
    // The input shapes as grid_for_launch takes them; inline for the usual few inputs, so a
    // launch allocates nothing.
    constexpr std::size_t inline_inputs = 8;
    std::array<ShapeView, inline_inputs> inline_shapes;
    std::vector<ShapeView> many_shapes;
    if (inputs.size() > inline_inputs) many_shapes.resize(inputs.size());
    const std::span<ShapeView> input_shapes =
        many_shapes.empty() ? std::span<ShapeView>(inline_shapes).first(inputs.size()) : std::span<ShapeView>(many_shapes);
    std::transform(inputs.begin(), inputs.end(), input_shapes.begin(), [](const Tensor& t) { return t.shape; });
    const Dims b = block();
    for (std::size_t i = 0; i < n_launches(); ++i) {
        const Kernel& kernel = kernel_for_launch(i);
        ArgPack pack(kernel.params(), kernel.id());
        pack_args_for_launch(i, inputs, params, output, output_shape, output_row_stride, pack);
        pack.check_complete();
        const Dims g = grid_for_launch(i, input_shapes, output_shape), c = cluster_for_launch(i);
        runtime.launch_packed(kernel, stream,
                              {{g[0], g[1], g[2]}, {b[0], b[1], b[2]}, shared_bytes_for_launch(i), {c[0], c[1], c[2]}},
                              pack.data());
    }
}

}  // namespace kjit
