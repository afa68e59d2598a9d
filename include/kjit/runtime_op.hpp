// kjit/runtime_op.hpp — an op a graph executor can run without knowing what it computes:
// shapes, parameters, and how to pack and launch its kernel(s). An op overrides the few methods
// it needs; the rest have defaults.
#pragma once
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <kjit/args.hpp>
#include <kjit/kernel.hpp>

namespace kjit {

class Stream;
class Runtime;

using Shape = std::vector<std::size_t>;
using ShapeView = std::span<const std::size_t>;
using Dims = std::array<unsigned, 3>;

/// Elements of a tensor of this shape (1 for a scalar's empty shape).
[[nodiscard]] inline std::size_t element_count(ShapeView shape) noexcept {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

/// An activation handed to an op: device pointer and concrete shape. `image_stride`: elements
/// from one image (dims[0]) to the next where the tensor is a channel slice of a wider one (a
/// concat's output the planner placed it in); 0 means tight.
struct Tensor {
    void* data;
    ShapeView shape;
    std::size_t image_stride = 0;
};

/// Elements from one image of `t` to the next: its image_stride, or its own size where tight.
[[nodiscard]] inline std::size_t image_stride_of(const Tensor& t) noexcept {
    if (t.image_stride) return t.image_stride;
    return t.shape.empty() ? 1 : element_count(t.shape) / t.shape[0];
}

/// The tensors of one forward call, as every forward method receives them.
struct OpCall {
    std::span<const Tensor> inputs;  ///< activations, n_activation_inputs() of them
    std::span<void* const> params;   ///< parameter buffers, in param_names() order
    void* output = nullptr;
    ShapeView output_shape;
    int output_row_stride = 0;  ///< elements between output rows (forward_output_row_stride)
    /// Elements between output images, 0: tight. Non-zero only for an op that takes_image_strides().
    std::size_t output_image_stride = 0;
    /// A tensor laid out as the output (its shape, rows and image stride) that the op adds to its
    /// result in its epilogue: a residual add fused into it. Only for an op that
    /// accepts_residual_add().
    const void* residual = nullptr;
    /// The outputs of the ops chained after this one into its launch (chained_with), in chain
    /// order, each laid out as the output. Exactly n_chained_outputs() of them.
    std::span<const Tensor> chained_outputs{};
};

/// The tensors of one backward call: the forward's, the output gradient, and the gradients to write.
struct BackwardCall : OpCall {
    void* grad_output = nullptr;
    int grad_output_row_stride = 0;
    std::span<void* const> grad_inputs;
    std::span<void* const> grad_params;
};

/// Parameter slots an op can compute at load time from other tensors a weights file holds
/// instead (a conv's bn_scale and bn_shift from raw BatchNorm statistics).
struct ParamFold {
    std::vector<std::string> sources;  ///< looked up as "{node}.{source}", each an f32 tensor
    Shape source_shape;                ///< the shape every source must have
    std::vector<std::size_t> targets;  ///< the param slots it fills, indices into param_names()
    /// The targets' values, in `targets` order, from the sources' values in `sources` order.
    std::function<std::vector<std::vector<float>>(std::span<const std::vector<float>> sources)> fold;
};

class RuntimeOp {
public:
    virtual ~RuntimeOp() = default;

    // ---- what an op must say ----

    /// Activation tensors taken from predecessor nodes.
    [[nodiscard]] virtual std::size_t n_activation_inputs() const = 0;
    /// Packs the kernel's arguments in order (RuntimeOp's runners call it with the launch's
    /// device current, so it may encode tensor maps).
    virtual void pack_args(const OpCall& call, ArgVisitor& visitor) const = 0;
    [[nodiscard]] virtual Dims grid(ShapeView output_shape) const = 0;
    /// The kernel launch `launch` runs.
    [[nodiscard]] virtual const Kernel& kernel_for_launch(std::size_t launch) const = 0;

    // ---- shapes and parameters (defaults: no parameters, rows along the last dimension) ----

    /// Shapes of the parameter buffers (weights, …), from concrete input and output shapes.
    [[nodiscard]] virtual std::vector<Shape> param_shapes(std::span<const ShapeView> input_shapes,
                                                          ShapeView output_shape) const;
    /// Names of those slots, in the same order ("{node}.{slot}" keys).
    [[nodiscard]] virtual std::span<const std::string_view> param_names() const;
    /// Whether slot `index` holds weights, which a weights file gives (LoadedModel::load_weights
    /// fills it). False for a slot the op writes itself — a second output, a workspace — which
    /// no file holds and the op may size by its tiles. Default: true.
    [[nodiscard]] virtual bool param_is_weight(std::size_t index) const;
    /// Little-endian bytes for parameter slot `index` right after allocation; none: zero-filled.
    [[nodiscard]] virtual std::optional<std::vector<std::byte>> param_init_data(std::size_t index) const;
    /// Slots that may be folded from other tensors at load (`param_shapes` as param_shapes()
    /// returned them). Default: none.
    [[nodiscard]] virtual std::optional<ParamFold> param_fold(std::span<const Shape> param_shapes) const;
    /// Rewrites slot `index`'s values on their way to the device in LoadedModel::load_weights
    /// (after any fold; param_init_data is the op's own and passes as given), e.g. rounded to the
    /// precision its kernel reads them in. Called for several slots at once from several
    /// threads. Default: unchanged.
    virtual void prepare_param(std::size_t index, std::span<float> values) const;
    /// Elements of one output row. Default: the last dimension.
    [[nodiscard]] virtual std::size_t forward_output_row_elems(ShapeView output_shape) const;
    /// Elements between output rows (≥ row elems, e.g. for alignment). Default: row elems.
    [[nodiscard]] virtual std::size_t forward_output_row_stride(ShapeView output_shape) const;
    /// The true output shape from concrete input shapes. Default: `resolved` unchanged.
    [[nodiscard]] virtual Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                              ShapeView resolved) const;

    // ---- what a planner may do around the op (defaults: nothing) ----

    /// Whether the op reads inputs and writes its output at any image stride (Tensor::image_stride,
    /// OpCall::output_image_stride), so that a planner may place them in channel slices of a
    /// concat's output. Default: false (tight tensors only; forward() refuses others).
    [[nodiscard]] virtual bool takes_image_strides() const;
    /// Whether the op only joins its NCHW inputs along channels, in order: a planner may then
    /// have its producers write into its output and run none of its launches. Default: false.
    [[nodiscard]] virtual bool is_channel_concat() const;
    /// Whether the op adds its two inputs elementwise and nothing more: a planner may fold it into
    /// the epilogue of an op that accepts_residual_add(). Default: false.
    [[nodiscard]] virtual bool is_elementwise_add() const;
    /// Whether the op adds OpCall::residual to its output in its epilogue, where a call gives one.
    /// Default: false (forward() refuses a residual).
    [[nodiscard]] virtual bool accepts_residual_add() const;
    /// The op that runs this op and then `next` on its output in one launch, `input` being the
    /// shape next reads: it writes this op's output to OpCall::output and next's after those of
    /// the ops already chained to it, in OpCall::chained_outputs (the SPPF block's max pools
    /// chain so), taking the tensors as the two would (image strides, rows). Null where it
    /// cannot, the default: a planner then runs them one by one.
    [[nodiscard]] virtual std::unique_ptr<RuntimeOp> chained_with(const RuntimeOp& next, ShapeView input) const;
    /// Outputs the op writes besides OpCall::output: those of the ops chained into it. Default: 0.
    [[nodiscard]] virtual std::size_t n_chained_outputs() const;

    // ---- launches (defaults: one launch of kernel_for_launch(0)) ----

    /// The op that runs this call: this one, or one that takes tensors this one cannot (a TMA
    /// kernel's fallback for a misaligned pointer). forward() runs that op's launches. Default:
    /// this op.
    [[nodiscard]] virtual const RuntimeOp& op_for(const OpCall& call) const;

    /// Threads per block. Default: the block kernel_for_launch(0) was compiled for (its
    /// launch bounds); an op whose kernel has none overrides this.
    [[nodiscard]] virtual Dims block() const;
    [[nodiscard]] virtual std::size_t n_launches() const;
    virtual void pack_args_for_launch(std::size_t launch, const OpCall& call, ArgVisitor& visitor) const;
    [[nodiscard]] virtual Dims grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                               ShapeView output_shape) const;
    /// Dynamic shared memory and thread-block cluster of launch `launch`. Defaults: none, 1 block.
    [[nodiscard]] virtual unsigned shared_bytes_for_launch(std::size_t launch) const;
    [[nodiscard]] virtual Dims cluster_for_launch(std::size_t launch) const;

    // ---- backward (defaults: none — zero launches) ----

    [[nodiscard]] virtual std::size_t n_backward_launches() const;
    /// Default: n_backward_launches() > 0.
    [[nodiscard]] virtual bool has_backward() const;
    [[nodiscard]] virtual std::size_t backward_grad_output_row_stride(ShapeView output_shape) const;
    /// Default: packs nothing (an op with backward launches overrides it).
    virtual void pack_backward_args(const BackwardCall& call, ArgVisitor& visitor) const;
    /// Defaults: the forward's block and grid.
    [[nodiscard]] virtual Dims backward_block() const;
    [[nodiscard]] virtual Dims backward_grid(std::span<const ShapeView> input_shapes, ShapeView output_shape) const;
    virtual void pack_backward_args_for_launch(std::size_t launch, const BackwardCall& call, ArgVisitor& visitor) const;
    [[nodiscard]] virtual Dims backward_grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                                        ShapeView output_shape) const;
    /// The kernel backward launch `launch` runs. Default: kernel_for_launch(launch).
    [[nodiscard]] virtual const Kernel& backward_kernel_for_launch(std::size_t launch) const;

    // ---- running ----

    /// Runs every forward launch on `stream` through `runtime`: packs (checked against each
    /// kernel's signature), then launches with block(), grid_for_launch() and shared bytes.
    void forward(Runtime& runtime, const Stream& stream, const OpCall& call) const;
    /// The same with each kernel compiled with `options` instead of for the device's arch (e.g.
    /// sm_90a, or with defines); each launch then looks its loaded kernel up by key.
    void forward(Runtime& runtime, const Stream& stream, const OpCall& call, const CompileOptions& options) const;
    /// The same for the backward launches (with the same launch's shared memory and cluster);
    /// throws UsageError for an op without backward.
    void backward(Runtime& runtime, const Stream& stream, const BackwardCall& call) const;
};

}  // namespace kjit
