// kjit/ops.hpp — the small ops a network needs around its convolutions, each a kernel in
// kernels_src with its RuntimeOp: residual add, channel concat (one launch per input), max
// pooling and nearest upsampling. NCHW, f32, tight rows.
#pragma once
#include <cstdint>

#include <kjit/runtime.hpp>
#include <kjit/runtime_op.hpp>

namespace kjit {

/// Threads per block of the elementwise ops (their BLOCK constant).
inline constexpr unsigned elementwise_block = 256;

/// What the elementwise ops share: blocks of elementwise_block threads, one element per thread
/// per step of a grid-stride loop over the output.
class ElementwiseOp : public RuntimeOp {
public:
    [[nodiscard]] Dims block() const override;
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
};

/// y = a + b, same shapes (kernels_src/add.cu).
class AddOp final : public TypedKernel<param<"a", float*>, param<"b", float*>, param<"y", float*>,
                                       param<"n", std::int64_t>>,
                    public ElementwiseOp {
public:
    AddOp();
    [[nodiscard]] std::size_t n_activation_inputs() const override { return 2; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    void pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output, ShapeView output_shape,
                   int output_row_stride, ArgVisitor& visitor) const override;
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t) const override { return *this; }
};

/// Concatenation of `n_inputs` NCHW tensors along channels (kernels_src/concat_channels.cu):
/// one launch per input, each copying it to its channel offset.
class ConcatChannelsOp final
    : public TypedKernel<param<"src", float*>, param<"dst", float*>, param<"B", std::int32_t>,
                         param<"C_SRC", std::int32_t>, param<"C_DST", std::int32_t>, param<"C_OFFSET", std::int32_t>,
                         param<"HW", std::int64_t>>,
      public ElementwiseOp {
public:
    explicit ConcatChannelsOp(std::size_t n_inputs);
    [[nodiscard]] std::size_t n_activation_inputs() const override { return n_inputs_; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    [[nodiscard]] std::size_t n_launches() const override { return n_inputs_; }
    void pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output, ShapeView output_shape,
                   int output_row_stride, ArgVisitor& visitor) const override;
    void pack_args_for_launch(std::size_t launch, std::span<const Tensor> inputs, std::span<void* const> params,
                              void* output, ShapeView output_shape, int output_row_stride,
                              ArgVisitor& visitor) const override;
    [[nodiscard]] Dims grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                       ShapeView output_shape) const override;
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t) const override { return *this; }

private:
    std::size_t n_inputs_;
};

/// Max pooling over kernel×kernel windows with a stride and −∞ padding (kernels_src/maxpool2d.cu).
class MaxPool2dOp final
    : public TypedKernel<param<"x", float*>, param<"y", float*>, param<"B", std::int32_t>, param<"C", std::int32_t>,
                         param<"H", std::int32_t>, param<"W", std::int32_t>, param<"OH", std::int32_t>,
                         param<"OW", std::int32_t>, param<"K", std::int32_t>, param<"stride", std::int32_t>,
                         param<"pad", std::int32_t>>,
      public ElementwiseOp {
public:
    /// Throws UsageError unless kernel ≥ 1, stride ≥ 1 and 0 ≤ pad ≤ kernel / 2 (PyTorch's rule).
    MaxPool2dOp(int kernel, int stride, int pad);
    [[nodiscard]] std::size_t n_activation_inputs() const override { return 1; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    void pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output, ShapeView output_shape,
                   int output_row_stride, ArgVisitor& visitor) const override;
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t) const override { return *this; }

private:
    int kernel_, stride_, pad_;
};

/// Nearest-neighbour upsampling by an integer factor (kernels_src/upsample_nearest2d.cu).
class UpsampleNearest2dOp final
    : public TypedKernel<param<"x", float*>, param<"y", float*>, param<"B", std::int32_t>, param<"C", std::int32_t>,
                         param<"H", std::int32_t>, param<"W", std::int32_t>>,
      public ElementwiseOp {
public:
    /// Throws UsageError unless 1 ≤ scale ≤ 16.
    explicit UpsampleNearest2dOp(int scale = 2);
    [[nodiscard]] std::size_t n_activation_inputs() const override { return 1; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    void pack_args(std::span<const Tensor> inputs, std::span<void* const> params, void* output, ShapeView output_shape,
                   int output_row_stride, ArgVisitor& visitor) const override;
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t) const override { return *this; }

private:
    int scale_;
};

}  // namespace kjit
