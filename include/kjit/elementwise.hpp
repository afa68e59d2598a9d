// kjit/elementwise.hpp — the small ops a network needs around its convolutions, each a kernel in
// kernels_src with its RuntimeOp: residual add, channel concat (one launch per input), max
// pooling, nearest upsampling (NCHW, f32) and casts between f32, f16 and bf16. Tight rows;
// images at any stride (each op takes_image_strides, so a planner may place its tensors in
// channel slices of a concat's output).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <kjit/runtime_op.hpp>
#include <kjit/typed_kernel.hpp>

namespace kjit {

/// Threads per block of the elementwise ops (their BLOCK constant).
inline constexpr unsigned elementwise_block = 256;

/// What the elementwise ops share: their kernel, compiled for elementwise_block threads, one
/// element per thread per step of a grid-stride loop over the output, and tight output rows.
class ElementwiseOp : public RuntimeOp {
public:
    [[nodiscard]] std::size_t n_activation_inputs() const override { return n_inputs_; }
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t) const override { return kernel_; }
    [[nodiscard]] const Kernel& kernel() const noexcept { return kernel_; }
    [[nodiscard]] bool takes_image_strides() const override { return true; }

protected:
    ElementwiseOp(Kernel kernel, std::size_t n_inputs) : kernel_(std::move(kernel)), n_inputs_(n_inputs) {}
    /// Throws UsageError unless `call` has the inputs, the output shape and the tight rows this
    /// op makes, and image strides no shorter than the images.
    void check_call(const OpCall& call) const;

private:
    Kernel kernel_;
    std::size_t n_inputs_;
};

/// y = a + b, same shapes (kernels_src/add.cu).
class AddOp final : public ElementwiseOp {
public:
    using KernelType = TypedKernel<param<"a", float*>, param<"b", float*>, param<"y", float*>, param<"n", std::int64_t>,
                                   param<"image", std::int64_t>, param<"a_stride", std::int64_t>,
                                   param<"b_stride", std::int64_t>, param<"y_stride", std::int64_t>>;
    AddOp();
    [[nodiscard]] bool is_elementwise_add() const override { return true; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
};

/// Concatenation of `n_inputs` NCHW tensors along channels (kernels_src/concat_channels.cu):
/// one launch per input, each copying it to its channel offset.
class ConcatChannelsOp final : public ElementwiseOp {
public:
    using KernelType =
        TypedKernel<param<"src", float*>, param<"dst", float*>, param<"B", std::int32_t>, param<"C_SRC", std::int32_t>,
                    param<"C_OFFSET", std::int32_t>, param<"HW", std::int64_t>, param<"src_stride", std::int64_t>,
                    param<"dst_stride", std::int64_t>>;
    explicit ConcatChannelsOp(std::size_t n_inputs);
    [[nodiscard]] bool is_channel_concat() const override { return true; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    [[nodiscard]] std::size_t n_launches() const override { return n_activation_inputs(); }
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    void pack_args_for_launch(std::size_t launch, const OpCall& call, ArgVisitor& visitor) const override;
    [[nodiscard]] Dims grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                       ShapeView output_shape) const override;
};

/// y = x in another element type — f32, f16 or bf16, rounded to nearest even
/// (kernels_src/cast.cu) — where a graph joins ops of different types: attention reads 16-bit
/// tensors, the convolutions f32.
class CastOp final : public ElementwiseOp {
public:
    /// Throws UsageError unless both types are f32, f16 or bf16 and differ.
    CastOp(Scalar from, Scalar to);
    [[nodiscard]] Scalar from() const noexcept { return from_; }
    [[nodiscard]] Scalar to() const noexcept { return to_; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;

private:
    Scalar from_, to_;
};

/// Max pooling over kernel×kernel windows with a stride and −∞ padding (kernels_src/maxpool2d.cu).
class MaxPool2dOp final : public ElementwiseOp {
public:
    using KernelType =
        TypedKernel<param<"x", float*>, param<"y", float*>, param<"B", std::int32_t>, param<"C", std::int32_t>,
                    param<"H", std::int32_t>, param<"W", std::int32_t>, param<"OH", std::int32_t>,
                    param<"OW", std::int32_t>, param<"K", std::int32_t>, param<"stride", std::int32_t>,
                    param<"pad", std::int32_t>, param<"x_stride", std::int64_t>, param<"y_stride", std::int64_t>>;
    /// Throws UsageError unless kernel ≥ 1, stride ≥ 1 and 0 ≤ pad ≤ kernel / 2 (PyTorch's rule).
    MaxPool2dOp(int kernel, int stride, int pad);
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    /// A MaxPool2dChainOp where this pool and `next` are the same size-keeping pool (stride 1,
    /// odd window, padding window / 2) on planes that fit it.
    [[nodiscard]] std::unique_ptr<RuntimeOp> chained_with(const RuntimeOp& next, ShapeView input) const override;

    [[nodiscard]] int window() const noexcept { return window_; }
    [[nodiscard]] int stride() const noexcept { return stride_; }
    [[nodiscard]] int pad() const noexcept { return pad_; }

private:
    int window_, stride_, pad_;
};

/// A size-keeping max pool (window×window, odd window, stride 1, padding window / 2) applied
/// `repeats` times, each to the last result, every result written in one launch
/// (kernels_src/maxpool2d_chain.cu): pool(x) to OpCall::output, pool(pool(x)) and on to
/// OpCall::chained_outputs. A planner makes it of a chain of such MaxPool2dOps (YOLO's SPPF block),
/// on planes of up to max_plane elements.
class MaxPool2dChainOp final : public ElementwiseOp {
public:
    using KernelType =
        TypedKernel<param<"x", float*>, param<"y1", float*>, param<"y2", float*>, param<"y3", float*>,
                    param<"y4", float*>, param<"planes", std::int32_t>, param<"C", std::int32_t>,
                    param<"H", std::int32_t>, param<"W", std::int32_t>, param<"K", std::int32_t>,
                    param<"repeats", std::int32_t>, param<"planes_per_block", std::int32_t>,
                    param<"x_stride", std::int64_t>, param<"y1_stride", std::int64_t>, param<"y2_stride", std::int64_t>,
                    param<"y3_stride", std::int64_t>, param<"y4_stride", std::int64_t>>;
    static constexpr int max_repeats = 4;           ///< the kernel's output pointers
    static constexpr std::size_t max_plane = 4096;  ///< H·W its shared memory holds (twice, in 32 KB)
    /// Throws UsageError unless the window is odd and 2 ≤ repeats ≤ max_repeats.
    MaxPool2dChainOp(int window, int repeats);
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    [[nodiscard]] std::size_t n_chained_outputs() const override { return static_cast<std::size_t>(repeats_ - 1); }
    /// One more repeat where `next` is this chain's pool and repeats < max_repeats.
    [[nodiscard]] std::unique_ptr<RuntimeOp> chained_with(const RuntimeOp& next, ShapeView input) const override;

private:
    int window_, repeats_;
};

/// Nearest-neighbour upsampling by an integer factor (kernels_src/upsample_nearest2d.cu).
class UpsampleNearest2dOp final : public ElementwiseOp {
public:
    using KernelType = TypedKernel<param<"x", float*>, param<"y", float*>, param<"B", std::int32_t>,
                                   param<"C", std::int32_t>, param<"H", std::int32_t>, param<"W", std::int32_t>,
                                   param<"x_stride", std::int64_t>, param<"y_stride", std::int64_t>>;
    /// Throws UsageError unless 1 ≤ scale ≤ 16.
    explicit UpsampleNearest2dOp(int scale = 2);
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;

private:
    int scale_;
};

/// float64 references of the ops above (NCHW, tight rows), what `kjit check` and the GPU tests
/// compare the kernels with: a + b; the inputs concatenated along channels; max pooling (−∞
/// outside the image, the output size as MaxPool2dOp computes it); chained size-keeping pools,
/// every result one after the other; nearest upsampling.
[[nodiscard]] std::vector<double> add_reference(std::span<const float> a, std::span<const float> b);
[[nodiscard]] std::vector<double> concat_channels_reference(std::span<const std::vector<float>> inputs,
                                                            std::span<const Shape> shapes);
[[nodiscard]] std::vector<double> maxpool2d_reference(std::span<const float> x, ShapeView shape, int kernel, int stride,
                                                      int pad);
[[nodiscard]] std::vector<double> maxpool2d_chain_reference(std::span<const float> x, ShapeView shape, int window,
                                                            int repeats);
[[nodiscard]] std::vector<double> upsample_nearest2d_reference(std::span<const float> x, ShapeView shape, int scale);

}  // namespace kjit
