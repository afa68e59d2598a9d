// kjit/runtime_op.hpp — an op a graph executor can run without knowing what it computes:
// shapes, parameters, and how to pack and launch its kernel(s). Override what you need; the
// rest have defaults.
#pragma once
#include <array>
#include <cstddef>
#include <optional>
#include <span>
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

/// An activation handed to an op: device pointer and concrete shape.
struct Tensor {
    void* data;
    ShapeView shape;
};

class RuntimeOp {
public:
    virtual ~RuntimeOp() = default;

    /// Activation tensors taken from predecessor nodes.
    [[nodiscard]] virtual std::size_t n_activation_inputs() const = 0;

    /// Shapes of the parameter buffers (weights, …), from concrete input and output shapes.
    [[nodiscard]] virtual std::vector<Shape> param_shapes(std::span<const ShapeView> input_shapes,
                                                          ShapeView output_shape) const;
    /// Names of those slots, in the same order ("{node}.{slot}" keys). Default: none.
    [[nodiscard]] virtual std::span<const std::string_view> param_names() const;

    /// Elements of one output row. Default: the last dimension.
    [[nodiscard]] virtual std::size_t forward_output_row_elems(ShapeView output_shape) const;
    /// Elements between output rows (≥ row elems, e.g. for alignment). Default: row elems.
    [[nodiscard]] virtual std::size_t forward_output_row_stride(ShapeView output_shape) const;
    /// Little-endian bytes for parameter slot `index` right after allocation. Default: none
    /// (zero-initialised).
    [[nodiscard]] virtual std::optional<std::vector<std::byte>> param_init_data(std::size_t index) const;
    /// The true output shape from concrete input shapes. Default: `resolved` unchanged.
    [[nodiscard]] virtual Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                              ShapeView resolved) const;

    /// Packs the kernel's arguments in order.
    virtual void pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output,
                           ShapeView output_shape, int output_row_stride, ArgVisitor& visitor) const = 0;
    /// Threads per block: the block the kernel was compiled for (its __launch_bounds__).
    [[nodiscard]] virtual Dims block() const = 0;
    [[nodiscard]] virtual Dims grid(ShapeView output_shape) const = 0;

    /// Sequential launches of the forward pass. Default: 1, delegating to pack_args and grid.
    [[nodiscard]] virtual std::size_t n_launches() const;
    virtual void pack_args_for_launch(std::size_t launch, std::span<const Tensor> inputs,
                                      std::span<void* const> params, void* output, ShapeView output_shape,
                                      int output_row_stride, ArgVisitor& visitor) const;
    [[nodiscard]] virtual Dims grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                               ShapeView output_shape) const;

    /// Backward pass. Default: none; the backward methods then throw UsageError.
    [[nodiscard]] virtual bool has_backward() const;
    [[nodiscard]] virtual std::size_t backward_grad_output_row_stride(ShapeView output_shape) const;
    virtual void pack_backward_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output,
                                    ShapeView output_shape, void* grad_output, int grad_output_row_stride,
                                    std::span<void* const> grad_inputs, std::span<void* const> grad_params,
                                    ArgVisitor& visitor) const;
    [[nodiscard]] virtual Dims backward_block() const;
    [[nodiscard]] virtual Dims backward_grid(std::span<const ShapeView> input_shapes, ShapeView output_shape) const;
    [[nodiscard]] virtual std::size_t n_backward_launches() const;
    virtual void pack_backward_args_for_launch(std::size_t launch, std::span<const Tensor> inputs,
                                               std::span<void* const> params, void* output, ShapeView output_shape,
                                               void* grad_output, int grad_output_row_stride,
                                               std::span<void* const> grad_inputs,
                                               std::span<void* const> grad_params, ArgVisitor& visitor) const;
    [[nodiscard]] virtual Dims backward_grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                                        ShapeView output_shape) const;

    /// The kernel launch `launch` runs, the dynamic shared memory and the thread-block cluster
    /// it needs. Defaults: no dynamic shared memory, clusters of one block.
    [[nodiscard]] virtual const Kernel& kernel_for_launch(std::size_t launch) const = 0;
    [[nodiscard]] virtual unsigned shared_bytes_for_launch(std::size_t launch) const;
    [[nodiscard]] virtual Dims cluster_for_launch(std::size_t launch) const;

    /// Runs every forward launch on `stream` through `runtime`: packs (checked against each
    /// kernel's signature), then launches with block(), grid_for_launch() and shared bytes.
    void forward(Runtime& runtime, const Stream& stream, std::span<const Tensor> inputs, std::span<void* const> params,
                 void* output, ShapeView output_shape, int output_row_stride) const;
};

}  // namespace kjit
