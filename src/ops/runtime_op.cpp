// RuntimeOp's defaults, and running an op's launches through a Runtime.
#include <kjit/runtime_op.hpp>

#include <algorithm>

#include <fmt/format.h>
#include <kjit/compile.hpp>
#include <kjit/error.hpp>
#include <kjit/runtime.hpp>

namespace kjit {

std::vector<Shape> RuntimeOp::param_shapes(std::span<const ShapeView>, ShapeView) const { return {}; }
std::span<const std::string_view> RuntimeOp::param_names() const { return {}; }
bool RuntimeOp::param_is_weight(std::size_t) const { return true; }
std::optional<std::vector<std::byte>> RuntimeOp::param_init_data(std::size_t) const { return std::nullopt; }
std::optional<ParamFold> RuntimeOp::param_fold(std::span<const Shape>) const { return std::nullopt; }
void RuntimeOp::prepare_param(std::size_t, std::span<float>) const {}
std::size_t RuntimeOp::forward_output_row_elems(ShapeView output_shape) const {
    return output_shape.empty() ? 1 : output_shape.back();
}
std::size_t RuntimeOp::forward_output_row_stride(ShapeView output_shape) const {
    return forward_output_row_elems(output_shape);
}
Shape RuntimeOp::compute_concrete_output_shape(std::span<const ShapeView>, ShapeView resolved) const {
    return Shape(resolved.begin(), resolved.end());
}
bool RuntimeOp::takes_image_strides() const { return false; }
bool RuntimeOp::is_channel_concat() const { return false; }
bool RuntimeOp::is_elementwise_add() const { return false; }
bool RuntimeOp::accepts_residual_add() const { return false; }
std::unique_ptr<RuntimeOp> RuntimeOp::chained_with(const RuntimeOp&, ShapeView) const { return nullptr; }
std::size_t RuntimeOp::n_chained_outputs() const { return 0; }

const RuntimeOp& RuntimeOp::op_for(const OpCall&) const { return *this; }
Dims RuntimeOp::block() const { return {kernel_for_launch(0).max_threads_per_block(), 1, 1}; }
std::size_t RuntimeOp::n_launches() const { return 1; }
void RuntimeOp::pack_args_for_launch(std::size_t, const OpCall& call, ArgVisitor& visitor) const {
    pack_args(call, visitor);
}
Dims RuntimeOp::grid_for_launch(std::size_t, std::span<const ShapeView>, ShapeView output_shape) const {
    return grid(output_shape);
}
unsigned RuntimeOp::shared_bytes_for_launch(std::size_t) const { return 0; }
Dims RuntimeOp::cluster_for_launch(std::size_t) const { return {1, 1, 1}; }

std::size_t RuntimeOp::n_backward_launches() const { return 0; }
bool RuntimeOp::has_backward() const { return n_backward_launches() > 0; }
std::size_t RuntimeOp::backward_grad_output_row_stride(ShapeView output_shape) const {
    return output_shape.empty() ? 1 : output_shape.back();
}
void RuntimeOp::pack_backward_args(const BackwardCall&, ArgVisitor&) const {}
Dims RuntimeOp::backward_block() const { return block(); }
Dims RuntimeOp::backward_grid(std::span<const ShapeView> input_shapes, ShapeView output_shape) const {
    return grid_for_launch(0, input_shapes, output_shape);
}
void RuntimeOp::pack_backward_args_for_launch(std::size_t, const BackwardCall& call, ArgVisitor& visitor) const {
    pack_backward_args(call, visitor);
}
Dims RuntimeOp::backward_grid_for_launch(std::size_t, std::span<const ShapeView> input_shapes,
                                         ShapeView output_shape) const {
    return backward_grid(input_shapes, output_shape);
}
const Kernel& RuntimeOp::backward_kernel_for_launch(std::size_t launch) const { return kernel_for_launch(launch); }

namespace {

/// The input shapes as grid_for_launch takes them; inline for the usual few inputs, so a launch
/// allocates nothing.
class InputShapes {
public:
    explicit InputShapes(std::span<const Tensor> inputs) {
        if (inputs.size() > inline_.size()) many_.resize(inputs.size());
        view_ = many_.empty() ? std::span<ShapeView>(inline_).first(inputs.size()) : std::span<ShapeView>(many_);
        std::transform(inputs.begin(), inputs.end(), view_.begin(), [](const Tensor& t) { return t.shape; });
    }
    [[nodiscard]] std::span<const ShapeView> view() const noexcept { return view_; }

private:
    std::array<ShapeView, 8> inline_;
    std::vector<ShapeView> many_;
    std::span<ShapeView> view_;
};

/// Runs `count` launches: kernel_of(i), packed by pack(i, visitor), on grid_of(i); each kernel
/// compiled for the device (through its hot slot), or with `options` where given.
template <class KernelOf, class Pack, class GridOf>
void run_launches(const RuntimeOp& op, Runtime& runtime, const Stream& stream, const CompileOptions* options,
                  std::size_t count, Dims block, KernelOf&& kernel_of, Pack&& pack, GridOf&& grid_of) {
    for (std::size_t i = 0; i < count; ++i) {
        const Kernel& kernel = kernel_of(i);
        ArgPack args(kernel.params(), kernel.id());
        pack(i, args);
        args.check_complete();
        const Dims g = grid_of(i), c = op.cluster_for_launch(i);
        const LaunchConfig config{
            {g[0], g[1], g[2]}, {block[0], block[1], block[2]}, op.shared_bytes_for_launch(i), {c[0], c[1], c[2]}};
        if (options)
            runtime.launch_packed(kernel, runtime.load(kernel, stream.device(), *options), stream, config, args.data());
        else runtime.launch_packed(kernel, stream, config, args.data());
    }
}

void check_inputs(const RuntimeOp& op, const OpCall& call) {
    if (call.inputs.size() != op.n_activation_inputs())
        throw UsageError(
            fmt::format("op takes {} activation inputs, {} were given", op.n_activation_inputs(), call.inputs.size()));
}

void run_forward(const RuntimeOp& self, Runtime& runtime, const Stream& stream, const OpCall& call,
                 const CompileOptions* options) {
    check_inputs(self, call);
    if (!self.takes_image_strides()) {
        const auto strided = [](const Tensor& t) {
            return t.image_stride && t.image_stride != image_stride_of({t.data, t.shape});
        };
        if (std::ranges::any_of(call.inputs, strided) || std::ranges::any_of(call.chained_outputs, strided) ||
            strided({call.output, call.output_shape, call.output_image_stride}))
            throw UsageError("this op takes tight tensors only (takes_image_strides() is false): copy the slice first");
    }
    if (call.residual && !self.accepts_residual_add())
        throw UsageError("this op adds no residual (accepts_residual_add() is false): run the add as its own op");
    if (call.chained_outputs.size() != self.n_chained_outputs())
        throw UsageError(fmt::format("this op writes {} chained outputs (n_chained_outputs()), {} were given",
                                     self.n_chained_outputs(), call.chained_outputs.size()));
    const RuntimeOp& op = self.op_for(call);
    const InputShapes shapes(call.inputs);
    run_launches(
        op, runtime, stream, options, op.n_launches(), op.block(),
        [&](std::size_t i) -> const Kernel& { return op.kernel_for_launch(i); },
        [&](std::size_t i, ArgVisitor& v) { op.pack_args_for_launch(i, call, v); },
        [&](std::size_t i) { return op.grid_for_launch(i, shapes.view(), call.output_shape); });
}

}  // namespace

void RuntimeOp::forward(Runtime& runtime, const Stream& stream, const OpCall& call) const {
    run_forward(*this, runtime, stream, call, nullptr);
}

void RuntimeOp::forward(Runtime& runtime, const Stream& stream, const OpCall& call,
                        const CompileOptions& options) const {
    run_forward(*this, runtime, stream, call, &options);
}

void RuntimeOp::backward(Runtime& runtime, const Stream& stream, const BackwardCall& call) const {
    if (!has_backward()) throw UsageError("this op has no backward pass (has_backward() is false)");
    check_inputs(*this, call);
    const InputShapes shapes(call.inputs);
    run_launches(
        *this, runtime, stream, nullptr, n_backward_launches(), backward_block(),
        [&](std::size_t i) -> const Kernel& { return backward_kernel_for_launch(i); },
        [&](std::size_t i, ArgVisitor& v) { pack_backward_args_for_launch(i, call, v); },
        [&](std::size_t i) { return backward_grid_for_launch(i, shapes.view(), call.output_shape); });
}

}  // namespace kjit
