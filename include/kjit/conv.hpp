// kjit/conv.hpp — fused Conv2d + BatchNorm (inference) + SiLU: the tensor-core kernels (1×1 GEMM
// and implicit GEMM), the depthwise kernel (depthwise layers and groups of up to 16 channels), the
// direct kernel for the rest, the dispatch between
// them, configurations as text for tuning, and a float64 CPU reference.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kjit/cache.hpp>
#include <kjit/device_traits.hpp>
#include <kjit/runtime_op.hpp>
#include <kjit/tensor_map.hpp>
#include <kjit/typed_kernel.hpp>

namespace kjit {

/// Convolution attributes (PyTorch's Conv2d arguments), and BatchNorm's ε.
struct Conv2dAttrs {
    int kernel_h = 1, kernel_w = 1;
    int stride_h = 1, stride_w = 1;
    int pad_h = 0, pad_w = 0;
    int dilation_h = 1, dilation_w = 1;
    int groups = 1;
    float bn_eps = 1e-5f;  ///< used when raw BatchNorm statistics are folded at load
};

/// The tensors' sizes: input [batch, c_in, height, width], output channels c_out.
struct Conv2dShape {
    int batch, c_in, height, width, c_out;
};

/// Output height and width; throws UsageError for attributes no kjit kernel supports.
[[nodiscard]] std::pair<int, int> conv2d_output_size(const Conv2dAttrs& attrs, const Conv2dShape& shape);

/// Inference BatchNorm as per-channel scale and shift: scale = γ/√(var+ε), shift = β − scale·μ.
struct FoldedBatchNorm {
    std::vector<float> scale;
    std::vector<float> shift;
};
[[nodiscard]] FoldedBatchNorm fold_batch_norm(std::span<const float> gamma, std::span<const float> beta,
                                              std::span<const float> mean, std::span<const float> var, float eps);

/// Largest shared memory per block on every arch the shipped configurations are built for
/// (sm_80 and sm_87: 163 KB); pass the device's own limit where it is known.
inline constexpr int default_max_shared_bytes = 166912;

/// Tile constants of the tensor-core kernels (kernels_src/kjit/gemm.cuh): BLOCK_M columns
/// (pixels) by BLOCK_N rows (output channels) per block, BLOCK_K of the reduction per pipeline
/// stage, GROUP_M column tiles per L2-sharing group.
struct GemmTiles {
    int block_m, block_n, block_k, group_m;

    /// Every valid configuration: what warm-up and the across-configuration tests iterate.
    [[nodiscard]] static std::span<const GemmTiles> configurations();
    /// Threads and dynamic shared memory per block, from the geometry the kernel compiles
    /// (kernels_src/kjit/gemm_geometry.cuh); a split-K launch also parks a whole partial tile.
    [[nodiscard]] unsigned threads() const;
    [[nodiscard]] unsigned shared_bytes(int split_k = 1) const;
    /// Throws UsageError naming the rule a constant breaks (MMA shape multiples, positivity,
    /// GROUP_M ≥ 1, split_k in 1…8, shared memory over `max_shared_bytes`).
    void validate(int max_shared_bytes, int split_k = 1) const;
    friend bool operator==(const GemmTiles&, const GemmTiles&) = default;
};

/// Tile constants of the Hopper conv kernels (kernels_src/kjit/gemm_sm90.cuh): BLOCK_M pixels (64
/// per consumer warpgroup) by BLOCK_N output channels per tile, STAGES K steps of 32 in flight,
/// GROUP_M column tiles per L2-sharing group; with split_k > 1 a thread-block cluster of split_k
/// blocks computes each tile, every block over 1/split_k of K (a launch constant, not a
/// compile-time one: every split runs the same cubin).
struct Sm90Tiles {
    int block_m, block_n, stages, group_m;
    int split_k = 1;

    /// Every configuration warm-up and the across-configuration tests iterate.
    [[nodiscard]] static std::span<const Sm90Tiles> configurations();
    /// The deepest pipeline (at most 8 stages) a BLOCK_M × BLOCK_N tile fits in `max_shared_bytes`.
    [[nodiscard]] static int max_stages(int block_m, int block_n, int max_shared_bytes);
    [[nodiscard]] unsigned threads() const;
    [[nodiscard]] unsigned shared_bytes() const;
    /// Throws UsageError naming the rule a constant breaks (split_k in 1…8: a portable cluster).
    void validate(int max_shared_bytes) const;
    friend bool operator==(const Sm90Tiles&, const Sm90Tiles&) = default;
};

/// Tile constants of the direct kernel: output channels and output pixels per block.
struct DirectTiles {
    int block_oc, block_ow;
};

/// Tile constants of the depthwise kernel: a block computes a block_h × block_w tile of the
/// outputs of `planes` groups (image, group: one input plane for depthwise layers) with
/// `threads` threads, each step_rows rows × 4 columns of outputs at a time.
struct DepthwiseTiles {
    int block_h, block_w, planes, threads;
    int step_rows = 2;  ///< output rows a thread computes at a time (1, 2 or 4), 4 columns each
    /// Whether a block stages its input windows in shared memory (else each thread reads its
    /// rows from x through L1: for small images, whose windows are mostly halo).
    bool staged = true;
    friend bool operator==(const DepthwiseTiles&, const DepthwiseTiles&) = default;

    /// Throws UsageError naming the rule these tiles break (step_rows 1, 2 or 4, block_h a multiple
    /// of it, block_w a multiple of 4, the threads of a plane covering its tile's columns, then
    /// its row steps or whole shares of its outputs, threads a multiple of 32 up to 1024).
    void validate() const;
    /// A group's threads: across its tile's columns, then its row steps, then as many shares
    /// ("lanes") of its outputs as the threads left over make; 1 where they do not outnumber the
    /// steps.
    [[nodiscard]] int output_lanes() const;
    /// The bytes of a block's input windows for this filter (its groups', `group_in` planes each),
    /// halo and padding included, whether or not it stages them.
    [[nodiscard]] unsigned window_bytes(const Conv2dAttrs& attrs, int group_in = 1) const;
    /// Shared memory a block takes: its windows where it stages them, else none.
    [[nodiscard]] unsigned shared_bytes(const Conv2dAttrs& attrs, int group_in = 1) const;
    /// The tiles dispatch and `kjit tune` consider: small tiles of many planes for small images
    /// (staged and unstaged), wide tiles of one or two planes for large ones.
    [[nodiscard]] static std::span<const DepthwiseTiles> configurations();
};

/// What every conv op shares as a RuntimeOp: its kernel, one NCHW input, parameters weight
/// [C_OUT, C_IN/groups, KH, KW] (PyTorch's layout), bn_scale and bn_shift [C_OUT] — which may be
/// folded at load from raw BatchNorm tensors "bn.weight", "bn.bias", "bn.running_mean" and
/// "bn.running_var" — rows of OH·OW outputs, and the output shape from the attributes.
class Conv2dOp : public RuntimeOp {
public:
    static constexpr std::size_t weight_slot = 0;  ///< the weight's index in param_names()

    [[nodiscard]] const Conv2dAttrs& attrs() const noexcept { return attrs_; }
    [[nodiscard]] const Kernel& kernel() const noexcept { return kernel_; }

    [[nodiscard]] std::size_t n_activation_inputs() const override { return 1; }
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t) const override { return kernel_; }
    [[nodiscard]] std::vector<Shape> param_shapes(std::span<const ShapeView> input_shapes,
                                                  ShapeView output_shape) const override;
    [[nodiscard]] std::span<const std::string_view> param_names() const override;
    [[nodiscard]] std::optional<ParamFold> param_fold(std::span<const Shape> param_shapes) const override;
    [[nodiscard]] std::size_t forward_output_row_elems(ShapeView output_shape) const override;
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;

protected:
    Conv2dOp(Kernel kernel, const Conv2dAttrs& attrs) : kernel_(std::move(kernel)), attrs_(attrs) {}

private:
    Kernel kernel_;
    Conv2dAttrs attrs_;
};

/// The tensor-core conv ops (1×1 GEMM and implicit GEMM): GemmTiles, split-K over thread-block
/// clusters of split_k blocks that share one tile's K (split_k > 1 needs sm_90), and a grid of
/// ⌈B·OH·OW/BLOCK_M⌉·⌈(C_OUT/groups)/BLOCK_N⌉·split_k blocks per group, GROUP_M-swizzled.
class GemmConvOp : public Conv2dOp {
public:
    [[nodiscard]] const GemmTiles& tiles() const noexcept { return tiles_; }
    [[nodiscard]] int split_k() const noexcept { return split_k_; }

    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    [[nodiscard]] unsigned shared_bytes_for_launch(std::size_t) const override { return tiles_.shared_bytes(split_k_); }
    [[nodiscard]] Dims cluster_for_launch(std::size_t) const override { return {unsigned(split_k_), 1, 1}; }
    /// x and y may be channel slices of wider tensors (x_image_stride, y_image_stride).
    [[nodiscard]] bool takes_image_strides() const override { return true; }
    /// The epilogue adds OpCall::residual (laid out as y) where a call gives one.
    [[nodiscard]] bool accepts_residual_add() const override { return true; }

protected:
    GemmConvOp(Kernel kernel, const Conv2dAttrs& attrs, const GemmTiles& tiles, int split_k)
        : Conv2dOp(std::move(kernel), attrs), tiles_(tiles), split_k_(split_k) {}

private:
    GemmTiles tiles_;
    int split_k_;
};

/// 1×1, stride 1, unpadded, ungrouped Conv2d + BN + SiLU as a TF32 GEMM
/// (kernels_src/conv2d_bn_silu_gemm_forward.cu). Y[b][N, M] = W[N, K] · X[b][K, M] with N = C_OUT,
/// K = C_IN, M = OH·OW; the batch is folded into the columns.
class Conv2dBnSiluGemmForward final : public GemmConvOp {
public:
    using KernelType = TypedKernel<param<"x", float*>, param<"w", float*>, param<"bn_scale", float*>,
                                   param<"bn_shift", float*>, param<"y", float*>, param<"B", std::int32_t>,
                                   param<"C_IN", std::int32_t>, param<"C_OUT", std::int32_t>, param<"M", std::int32_t>,
                                   param<"y_row_stride", std::int32_t>, param<"x_image_stride", std::int64_t>,
                                   param<"y_image_stride", std::int64_t>, param<"residual", float*>>;

    /// Throws UsageError for invalid tiles (GemmTiles::validate).
    Conv2dBnSiluGemmForward(int block_m, int block_n, int block_k, int group_m,
                            int max_shared_bytes = default_max_shared_bytes, int split_k = 1, float bn_eps = 1e-5f);

    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
};

/// What the Hopper conv ops share (sm_90a, 9.0 devices only): TMA loads through an mbarrier
/// pipeline, TF32 wgmma, a producer and BLOCK_M/64 consumer warpgroups, a persistent grid of
/// min(tiles, SMs) blocks — or, with split-K, one cluster of split_k blocks per tile — and an
/// epilogue through shared memory with TMA stores. The tensor
/// maps are built once per pointer set and shape and kept by the op. A layer TMA cannot box
/// (conv2d_tma_unsupported_reason says why) is for the gathering op or the sm80 kernels; a call
/// whose tensors TMA cannot reach (a misaligned pointer, a padded row stride that is no multiple
/// of 4 — where the kernel does not store y itself) runs on the sm80 kernel (tiles
/// `fallback_tiles`) instead, on the same device.
class TmaConvOp : public Conv2dOp {
public:
    /// The sm80 kernel's tiles for calls TMA cannot take.
    static constexpr GemmTiles fallback_tiles{128, 64, 32, 8};
    /// fallback_tiles where they fit `max_shared_bytes`, else the largest sm80 tiles that do.
    [[nodiscard]] static GemmTiles fallback_for(int max_shared_bytes);

    ~TmaConvOp() override;
    [[nodiscard]] const Sm90Tiles& tiles() const noexcept { return tiles_; }
    /// Whether the kernel gathers x and stores y itself (Conv2dBnSiluGatherTmaForward) rather
    /// than through tensor maps.
    [[nodiscard]] bool gathers() const noexcept { return gathers_; }

    /// This op, or its sm80 fallback where TMA cannot reach the call's tensors.
    /// x and y may be channel slices of wider tensors (x_image_stride, y_image_stride; the
    /// fallback takes them too).
    [[nodiscard]] bool takes_image_strides() const override { return true; }
    /// The consumers add OpCall::residual as they store y themselves (the 1×1 kernel, whose y
    /// goes by TMA, adds none).
    [[nodiscard]] bool accepts_residual_add() const override { return true; }
    [[nodiscard]] const RuntimeOp& op_for(const OpCall& call) const override;
    /// The weight rounded to TF32, to nearest (ties away from zero, as `cvt.rna.tf32.f32`): the
    /// kernels read W through a wgmma descriptor, and the tensor cores would truncate it. A
    /// caller passing its own W gets the same accuracy by calling this on it first.
    void prepare_param(std::size_t index, std::span<float> values) const override;
    /// Throws UsageError where TMA cannot take the tensors (their strides or alignment).
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    /// The grid for this output; the implicit GEMM's output boxes depend on the input's width as
    /// well, so this counts the more numerous of its two layouts (the kernel takes any grid: a
    /// block or cluster without a tile returns). forward() launches grid_for_launch's, exact.
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    [[nodiscard]] Dims grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                       ShapeView output_shape) const override;
    /// The tiles' shared memory and the column policy's own (the implicit GEMM's tap table).
    [[nodiscard]] unsigned shared_bytes_for_launch(std::size_t) const override {
        return tiles_.shared_bytes() + policy_bytes_;
    }
    /// split_k blocks along x: the cluster that shares a tile's K.
    [[nodiscard]] Dims cluster_for_launch(std::size_t) const override {
        return {static_cast<unsigned>(tiles_.split_k), 1, 1};
    }

protected:
    /// Throws UsageError for invalid tiles, a device that is not 9.0, or shared memory (the
    /// tiles' and `policy_bytes` more) over the device's limit.
    TmaConvOp(std::string kernel_name, std::vector<Param> signature, const Sm90Tiles& tiles, const Conv2dAttrs& attrs,
              const DeviceTraits& device, unsigned policy_bytes = 0, bool gathers = false);

private:
    class MapCache;
    Sm90Tiles tiles_;
    unsigned policy_bytes_;
    bool gathers_;
    int multiprocessors_;
    std::unique_ptr<MapCache> maps_;
    std::unique_ptr<GemmConvOp> fallback_;
};

/// 1×1, stride 1, unpadded, ungrouped Conv2d + BN + SiLU on Hopper
/// (kernels_src/conv2d_bn_silu_gemm_tma_forward.cu): the GEMM of Conv2dBnSiluGemmForward on the
/// TMA + wgmma path. X and y in boxes of 32 pixels where OH·OW is a multiple of 4 (TMA's
/// 16-byte rows); images of at most 64 pixels (7×7, 5×5, one pixel) in boxes of whole images
/// instead (image_inner > 0, y stored by the kernel, any row stride), where C_IN·OH·OW is a
/// multiple of 8 (of 4 up to 32 pixels). C_IN a multiple of 4 and a 16-byte aligned x and weight.
class Conv2dBnSiluGemmTmaForward final : public TmaConvOp {
public:
    using KernelType = TypedKernel<param<"x_map", TensorMap>, param<"w_map", TensorMap>, param<"y_map", TensorMap>,
                                   param<"y", float*>, param<"bn_scale", float*>, param<"bn_shift", float*>,
                                   param<"B", std::int32_t>, param<"C_IN", std::int32_t>, param<"C_OUT", std::int32_t>,
                                   param<"M", std::int32_t>, param<"y_row_stride", std::int32_t>,
                                   param<"image_inner", std::int32_t>, param<"x_image_stride", std::int64_t>,
                                   param<"y_image_stride", std::int64_t>, param<"residual", float*>>;

    /// Throws UsageError for invalid tiles or a device that is not 9.0.
    Conv2dBnSiluGemmTmaForward(const Sm90Tiles& tiles, const DeviceTraits& device, float bn_eps = 1e-5f);
    /// Its 32-pixel boxes of y go by TMA, which adds nothing.
    [[nodiscard]] bool accepts_residual_add() const override { return false; }
};

/// Conv2d (any kernel size up to 64 taps, stride, padding, groups; dilation 1) + BN + SiLU on
/// Hopper (kernels_src/conv2d_bn_silu_tma_forward.cu): the implicit GEMM of Conv2dBnSiluForward on
/// the TMA + wgmma path. A grouped layer is one GEMM over every output channel, K a group's
/// (C_IN/groups)·KH·KW — a multiple of 32, with C_IN/groups a multiple of 4 — and each tile's
/// BLOCK_N channels in one group (calls whose groups a tile would straddle run on the sm80
/// kernel). W is read in place (K = C_IN·KH·KW per output channel); each K step's X
/// box is the input patch of 32 output pixels in the input channels the step's 32 k touch, one
/// TMA copy whose zero fill pads it: where W is a multiple of 4, BOX_W pixels along a row ×
/// 32/BOX_W rows (box_w > 0, chosen per shape); elsewhere (14×14, 10×10, 7×7 images) 32
/// consecutive pixels of an image and the whole input rows they reach, flattened (box_w = 0,
/// box_rows of them; planes_apart where H·W is no multiple of 4 either). TMA needs W, H·W or
/// C_IN·H·W a multiple of 4, C_IN·KH·KW a multiple of 4 and a 16-byte aligned x and weight; y goes
/// through a tensor map where TMA can write it (rows and row stride multiples of 4, y aligned),
/// else the kernel stores it itself (y_by_tma = 0, y_map empty).
class Conv2dBnSiluTmaForward final : public TmaConvOp {
public:
    using KernelType = TypedKernel<
        param<"x_map", TensorMap>, param<"w_map", TensorMap>, param<"y_map", TensorMap>, param<"y", float*>,
        param<"bn_scale", float*>, param<"bn_shift", float*>, param<"B", std::int32_t>, param<"C_IN", std::int32_t>,
        param<"H", std::int32_t>, param<"W", std::int32_t>, param<"C_OUT", std::int32_t>, param<"groups", std::int32_t>,
        param<"OH", std::int32_t>, param<"OW", std::int32_t>, param<"KH", std::int32_t>, param<"KW", std::int32_t>,
        param<"stride", std::int32_t>, param<"pad", std::int32_t>, param<"box_w", std::int32_t>,
        param<"box_rows", std::int32_t>, param<"box_channels", std::int32_t>, param<"planes_apart", std::int32_t>,
        param<"y_row_stride", std::int32_t>, param<"y_by_tma", std::int32_t>, param<"x_image_stride", std::int64_t>,
        param<"y_image_stride", std::int64_t>, param<"residual", float*>>;

    /// Throws UsageError for invalid tiles, a device that is not 9.0, or attributes the kernel
    /// does not take (dilation, unequal strides or paddings, more than 64 taps).
    Conv2dBnSiluTmaForward(const Sm90Tiles& tiles, const Conv2dAttrs& attrs, const DeviceTraits& device);
};

/// Conv2d (any kernel size up to 64 taps, 1×1 included; stride, padding; ungrouped, dilation 1)
/// + BN + SiLU on Hopper for the layers TMA cannot box (kernels_src/conv2d_bn_silu_gather_tma_forward.cu):
/// the implicit GEMM of Conv2dBnSiluTmaForward with X gathered by the producer warpgroup's
/// 4-byte cp.async copies and y written by the consumers' own stores, so any image width and any
/// 4-byte-aligned x and y go (7×7, 14×14, 10×10 images). W still arrives by TMA: C_IN·KH·KW a
/// multiple of 4 and a 16-byte aligned weight.
class Conv2dBnSiluGatherTmaForward final : public TmaConvOp {
public:
    using KernelType =
        TypedKernel<param<"x", float*>, param<"w_map", TensorMap>, param<"y", float*>, param<"bn_scale", float*>,
                    param<"bn_shift", float*>, param<"B", std::int32_t>, param<"C_IN", std::int32_t>,
                    param<"H", std::int32_t>, param<"W", std::int32_t>, param<"C_OUT", std::int32_t>,
                    param<"OH", std::int32_t>, param<"OW", std::int32_t>, param<"KH", std::int32_t>,
                    param<"KW", std::int32_t>, param<"stride", std::int32_t>, param<"pad", std::int32_t>,
                    param<"y_row_stride", std::int32_t>, param<"x_image_stride", std::int64_t>,
                    param<"y_image_stride", std::int64_t>, param<"residual", float*>>;

    /// Throws UsageError as Conv2dBnSiluTmaForward's constructor does.
    Conv2dBnSiluGatherTmaForward(const Sm90Tiles& tiles, const Conv2dAttrs& attrs, const DeviceTraits& device);
};

/// Conv2d (any kernel size, strides, paddings; ungrouped, dilation 1) + BN + SiLU on channels-last
/// tensors on Hopper (kernels_src/conv2d_bn_silu_nhwc_tma_forward.cu): input x [B, H, W, C_IN],
/// parameter weight [C_OUT, KH, KW, C_IN] (PyTorch's channels_last weight), output [B, OH, OW,
/// C_OUT], its rows the pixels (C_OUT channels each, y_row_stride ≥ C_OUT floats apart). Both
/// wgmma operands come from shared memory; each K step — 32 input channels of one filter tap —
/// is one im2col TMA copy of BLOCK_M output positions, whose zero fill pads and whose element
/// strides stride. TMA needs C_IN a multiple of 4 and a 16-byte aligned x and weight; y goes
/// through a tensor map where C_OUT and the row stride are multiples of 4 and y aligned, else the
/// kernel stores it itself. There is no sm80 kernel for this layout: a call TMA cannot take is
/// refused, saying why.
class Conv2dBnSiluNhwcTmaForward final : public Conv2dOp {
public:
    using KernelType =
        TypedKernel<param<"x_map", TensorMap>, param<"w_map", TensorMap>, param<"y_map", TensorMap>, param<"y", float*>,
                    param<"bn_scale", float*>, param<"bn_shift", float*>, param<"B", std::int32_t>,
                    param<"C_IN", std::int32_t>, param<"C_OUT", std::int32_t>, param<"OH", std::int32_t>,
                    param<"OW", std::int32_t>, param<"KH", std::int32_t>, param<"KW", std::int32_t>,
                    param<"stride_h", std::int32_t>, param<"stride_w", std::int32_t>, param<"pad_h", std::int32_t>,
                    param<"pad_w", std::int32_t>, param<"y_row_stride", std::int32_t>, param<"y_by_tma", std::int32_t>>;

    /// Throws UsageError for invalid tiles, a device that is not 9.0, or attributes the kernel
    /// does not take (conv2d_nhwc_tma_unsupported_reason's).
    Conv2dBnSiluNhwcTmaForward(const Sm90Tiles& tiles, const Conv2dAttrs& attrs, const DeviceTraits& device);
    ~Conv2dBnSiluNhwcTmaForward() override;

    [[nodiscard]] const Sm90Tiles& tiles() const noexcept { return tiles_; }

    [[nodiscard]] std::vector<Shape> param_shapes(std::span<const ShapeView> input_shapes,
                                                  ShapeView output_shape) const override;
    /// Rows are pixels: C_OUT channels each.
    [[nodiscard]] std::size_t forward_output_row_elems(ShapeView output_shape) const override;
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;
    /// The weight rounded to TF32, as TmaConvOp::prepare_param.
    void prepare_param(std::size_t index, std::span<float> values) const override;
    /// Throws UsageError where TMA cannot take the tensors (their strides or alignment).
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    [[nodiscard]] unsigned shared_bytes_for_launch(std::size_t) const override { return tiles_.shared_bytes(); }
    [[nodiscard]] Dims cluster_for_launch(std::size_t) const override {
        return {static_cast<unsigned>(tiles_.split_k), 1, 1};
    }

private:
    class MapCache;
    Sm90Tiles tiles_;
    int multiprocessors_;
    std::unique_ptr<MapCache> maps_;
};

/// Why the channels-last Hopper kernel cannot take this layer on this device, in words ("" when
/// it can); `shape` is the layer's sizes as for the NCHW ops.
[[nodiscard]] std::string conv2d_nhwc_tma_unsupported_reason(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                             const DeviceTraits& device);
/// Why the channels-last kernel writes y [B, OH, OW, C_OUT] (pixels `y_row_stride` floats apart)
/// with its own stores — a lane per channel — instead of TMA's, for a 16-byte-aligned y: the
/// rule C_OUT or the row stride breaks, or "" when TMA stores it. Throws UsageError (the reason) for a
/// layer the kernel does not take.
[[nodiscard]] std::string conv2d_nhwc_tma_y_store_reason(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                         int y_row_stride);
/// The channels-last op's tiles worth timing for a layer (`kjit_conv_bench --nhwc` times them):
/// each tile shape with its deepest pipeline of 3 stages or more, unsplit and split over 2, 4 or
/// 8 blocks where each keeps two K steps and the blocks fill the device at most twice.
[[nodiscard]] std::vector<Sm90Tiles> conv2d_bn_silu_nhwc_candidates(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                                    const DeviceTraits& device);
/// The channels-last op with the candidate tiles the Hopper cost model estimates fastest (no A
/// fragments: both operands from shared memory). Throws UsageError with
/// conv2d_nhwc_tma_unsupported_reason's reason for a layer it cannot take.
[[nodiscard]] std::unique_ptr<Conv2dBnSiluNhwcTmaForward> dispatch_conv2d_bn_silu_nhwc(const Conv2dAttrs& attrs,
                                                                                       const Conv2dShape& shape,
                                                                                       const DeviceTraits& device);
/// dispatch_conv2d_bn_silu_nhwc, preferring a winner `kjit tune --channels-last` stored in `cache`
/// for this layer, device name, arch and driver (under the family name "conv2d_bn_silu_nhwc")
/// whose kernel source is unchanged.
[[nodiscard]] std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu_nhwc(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                                     const Device& device, Cache& cache);
/// The channels-last op's candidates as configuration text ("NHWC=1 BLOCK_M=128 BLOCK_N=64
/// STAGES=8 GROUP_M=8 SPLIT_K=2"): what `kjit tune --channels-last` times.
[[nodiscard]] std::vector<std::string> conv2d_bn_silu_nhwc_configs(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                                   const DeviceTraits& device);

/// Why the Hopper kernels that box x and y through tensor maps cannot take this layer on this
/// device, in words ("" when they can).
[[nodiscard]] std::string conv2d_tma_unsupported_reason(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                        const DeviceTraits& device);
/// Why the gathering Hopper kernel cannot take this layer on this device ("" when it can).
[[nodiscard]] std::string conv2d_gather_unsupported_reason(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                           const DeviceTraits& device);

/// The arguments of the general conv kernels, in order; `Extra` ones follow.
template <class... Extra>
using GeneralConvKernel =
    TypedKernel<param<"x", float*>, param<"w", float*>, param<"bn_scale", float*>, param<"bn_shift", float*>,
                param<"y", float*>, param<"B", std::int32_t>, param<"C_IN", std::int32_t>, param<"H", std::int32_t>,
                param<"W", std::int32_t>, param<"C_OUT", std::int32_t>, param<"OH", std::int32_t>,
                param<"OW", std::int32_t>, param<"KH", std::int32_t>, param<"KW", std::int32_t>,
                param<"stride", std::int32_t>, param<"pad", std::int32_t>, param<"groups", std::int32_t>,
                param<"y_row_stride", std::int32_t>, Extra...>;

/// Conv2d (any kernel size, stride, padding, groups; dilation 1) + BN + SiLU as an implicit GEMM
/// on tensor cores, one GEMM per group (kernels_src/conv2d_bn_silu_forward.cu): N = C_OUT/groups,
/// K = C_IN/groups·KH·KW, columns B·OH·OW; patches are gathered on the fly. Grid
/// [⌈B·OH·OW/BLOCK_M⌉·⌈N/BLOCK_N⌉·split_k, groups, 1].
class Conv2dBnSiluForward final : public GemmConvOp {
public:
    using KernelType = GeneralConvKernel<param<"x_image_stride", std::int64_t>, param<"y_image_stride", std::int64_t>,
                                         param<"residual", float*>>;

    /// Throws UsageError for invalid tiles or attributes no kernel supports (dilation ≠ 1,
    /// unequal strides or paddings).
    Conv2dBnSiluForward(const GemmTiles& tiles, const Conv2dAttrs& attrs,
                        int max_shared_bytes = default_max_shared_bytes, int split_k = 1);

    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
};

/// Conv2d (any kernel size, stride, padding, groups; dilation 1) + BN + SiLU, computed directly in
/// fp32 (kernels_src/conv2d_bn_silu_direct_forward.cu): for depthwise and narrow-group layers,
/// whose per-group GEMMs are too thin for tensor cores. Grid [⌈OW/BLOCK_OW⌉, OH, B·⌈C_OUT/BLOCK_OC⌉].
class Conv2dBnSiluDirectForward final : public Conv2dOp {
public:
    using KernelType = GeneralConvKernel<param<"step_channels", std::int32_t>>;

    /// `shape` fixes the channel counts the shared-memory plan is made for. Throws UsageError
    /// for invalid tiles, unsupported attributes (dilation ≠ 1, unequal strides or paddings), or
    /// a plan that cannot fit `max_shared_bytes`.
    Conv2dBnSiluDirectForward(int block_oc, int block_ow, const Conv2dAttrs& attrs, const Conv2dShape& shape,
                              int max_shared_bytes = default_max_shared_bytes);

    [[nodiscard]] static std::span<const DirectTiles> configurations();
    [[nodiscard]] static unsigned threads(const DirectTiles& t);

    [[nodiscard]] const DirectTiles& tiles() const noexcept { return tiles_; }
    /// Input channels staged per step, and the shared memory that takes.
    [[nodiscard]] int step_channels() const noexcept { return step_channels_; }

    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    [[nodiscard]] unsigned shared_bytes_for_launch(std::size_t) const override { return shared_bytes_; }

private:
    DirectTiles tiles_;
    Conv2dShape shape_;
    int step_channels_;
    unsigned shared_bytes_;
};

/// The channels of one group the depthwise kernel sums and writes: `in` input planes each output
/// reads (1 for depthwise, up to 32 for narrow groups) and `out` outputs (the channel multiplier
/// for depthwise). The kernel computes up to 4 of a group's outputs at a time, as many as divide
/// `out` and fit their filters in registers.
struct DepthwiseGroup {
    static constexpr int max_in = 32;  ///< the most input channels a group the kernel takes
    int in = 1, out = 1;
    friend bool operator==(const DepthwiseGroup&, const DepthwiseGroup&) = default;

    /// Outputs a thread computes at a time: the most of 4, 2, 1 that divide `out` with their
    /// filters in at most 64 registers.
    [[nodiscard]] int outputs_per_step(const Conv2dAttrs& attrs) const noexcept;
};

/// Depthwise Conv2d (groups = C_IN, C_OUT = m·C_IN for a channel multiplier m) and narrow groups
/// (group.in channels a group, up to 32; any kernel size, stride and padding, equal on both axes;
/// dilation 1) + BN + SiLU in fp32, built for memory speed
/// (kernels_src/conv2d_bn_silu_depthwise_forward.cu): each block stages its groups' input windows
/// with their halo in shared memory once (16- or 8-byte copies where x's rows take them whole) —
/// or, on unstaged tiles (small images), each thread reads its window rows from x through L1 —
/// each thread reuses the input rows it reads across its outputs' windows and channels, and y is
/// written with 16- or 8-byte stores where its rows allow. Kernel size, stride, padding and
/// group.in are compile-time constants of the kernel. Grid [⌈B·groups/planes⌉, ⌈OH/block_h⌉,
/// ⌈OW/block_w⌉].
class Conv2dBnSiluDepthwiseForward final : public Conv2dOp {
public:
    using KernelType =
        TypedKernel<param<"x", float*>, param<"w", float*>, param<"bn_scale", float*>, param<"bn_shift", float*>,
                    param<"y", float*>, param<"planes", std::int64_t>, param<"C", std::int32_t>,
                    param<"H", std::int32_t>, param<"W", std::int32_t>, param<"OH", std::int32_t>,
                    param<"OW", std::int32_t>, param<"group_out", std::int32_t>, param<"y_row_stride", std::int32_t>,
                    param<"vectors", std::int32_t>>;

    /// Throws UsageError for invalid tiles, attributes the kernel does not take (dilation ≠ 1,
    /// unequal strides or paddings), a group of more than 32 input channels, or a window over
    /// `max_shared_bytes`.
    Conv2dBnSiluDepthwiseForward(const DepthwiseTiles& tiles, const Conv2dAttrs& attrs, DepthwiseGroup group = {},
                                 int max_shared_bytes = default_max_shared_bytes);

    [[nodiscard]] const DepthwiseTiles& tiles() const noexcept { return tiles_; }
    [[nodiscard]] const DepthwiseGroup& group() const noexcept { return group_; }

    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    [[nodiscard]] unsigned shared_bytes_for_launch(std::size_t) const override { return shared_bytes_; }

private:
    DepthwiseTiles tiles_;
    DepthwiseGroup group_;
    unsigned shared_bytes_;
};

/// Depthwise: one group per input channel (C_OUT a multiple of C_IN: the channel multiplier).
[[nodiscard]] bool is_depthwise(const Conv2dAttrs& attrs, const Conv2dShape& shape) noexcept;
/// A layer's group as the depthwise kernel takes it: C_IN / groups inputs, C_OUT / groups outputs.
[[nodiscard]] DepthwiseGroup depthwise_group(const Conv2dAttrs& attrs, const Conv2dShape& shape) noexcept;
/// Whether the op multiplies in TF32 on tensor cores (the GEMM kernels; on sm_80+ devices) rather
/// than in fp32 (the direct and depthwise kernels): what its error against a float64 reference
/// may be.
[[nodiscard]] bool conv2d_rounds_to_tf32(const Conv2dOp& op) noexcept;

/// The op for a Conv2d + BN + SiLU layer: the 1×1 GEMM kernel for 1×1 / stride 1 / pad 0 /
/// groups 1 (on a 9.0 device its TMA + wgmma form where TMA takes the shape:
/// conv2d_tma_unsupported_reason); the implicit-GEMM kernel for other layers whose groups are wide enough for tensor
/// cores; the depthwise kernel for depthwise layers and groups of up to 16 input channels (where
/// a tile's windows fit); the direct kernel for the rest. Tiles from a heuristic on the problem
/// and device. Throws UsageError for attributes no kernel supports.
[[nodiscard]] std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                                const DeviceTraits& device);
/// Why dispatch_conv2d_bn_silu picks the kernel it does, in words ("the TMA + wgmma 1x1 kernel
/// (sm_90a)", "the sm80 mainloop (cp.async + mma.sync): TMA needs OH*OW a multiple of 4 …").
[[nodiscard]] std::string conv2d_bn_silu_dispatch_reason(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                         const DeviceTraits& device);
/// The tensors' layout a conv runs on: NCHW, or channels-last (NHWC, the Hopper kernel only).
enum class Conv2dLayout { nchw, nhwc };
/// The family `kjit tune` stores a layout's winners under: "conv2d_bn_silu" for NCHW,
/// "conv2d_bn_silu_nhwc" for channels-last. The cache-aware dispatches use only winners of their
/// own layout (a winner naming the other layout's kernel is ignored, with a warning).
[[nodiscard]] const char* conv2d_tuned_family(Conv2dLayout layout) noexcept;
/// dispatch_conv2d_bn_silu, preferring a winner `kjit tune` stored in `cache` for this layer,
/// device name, arch and driver whose kernel source is unchanged: pick_conv2d_bn_silu
/// (kjit/conv_tuner.hpp) without the autotune policy, and without a stream.
[[nodiscard]] std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                                const Device& device, Cache& cache);

/// A canonical text for a layer ("b32_c256x56x56_o64_k1x1_s1x1_p0x0_g1"): the key of tuned winners.
[[nodiscard]] std::string conv2d_problem_key(const Conv2dAttrs& attrs, const Conv2dShape& shape);
/// The op for a layer from a configuration written as the tuner writes it:
/// "BLOCK_M=64 BLOCK_N=64 BLOCK_K=32 GROUP_M=8 SPLIT_K=2" (GEMM kernels; SPLIT_K optional),
/// "TMA=1 BLOCK_M=128 BLOCK_N=128 STAGES=4 GROUP_M=8" (the Hopper kernels: 1×1, or the implicit
/// GEMM for other layers, groups of 32 channels included), "NHWC=1 BLOCK_M=128 BLOCK_N=64
/// STAGES=8 GROUP_M=8" (the channels-last Hopper kernel: its tensors NHWC), "BLOCK_H=16
/// BLOCK_W=32 PLANES=2 THREADS=128" (the depthwise kernel; STEP_ROWS=1|2|4 and STAGED=0
/// optional) or "BLOCK_OC=32 BLOCK_OW=64" (the direct kernel). Throws UsageError for unknown or
/// missing keys and invalid values.
[[nodiscard]] std::unique_ptr<Conv2dOp> make_conv2d_bn_silu(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                            const std::string& config, const DeviceTraits& device);
/// The configuration text of a conv op (what make_conv2d_bn_silu reads back).
[[nodiscard]] std::string conv2d_bn_silu_config(const Conv2dOp& op);
/// Every configuration worth trying for a layer on a device (what `kjit tune` times): for a
/// grouped layer, the depthwise kernel's tiles (up to 32 channels a group), the direct kernel's
/// (fewer than 16 outputs a group) and the implicit GEMM's alike.
[[nodiscard]] std::vector<std::string> conv2d_bn_silu_candidates(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                                 const DeviceTraits& device);
/// Every configuration that runs a layer on a device (what `kjit check` runs): each kernel that
/// takes the layer — depthwise, direct, sm80 GEMM, and on 9.0 devices the TMA, gathering and
/// channels-last ("NHWC=1") Hopper kernels — with each of its listed tiles that fit, and on
/// devices with clusters every split-K factor 1…8 of the GEMM kernels.
[[nodiscard]] std::vector<std::string> conv2d_bn_silu_configurations(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                                     const DeviceTraits& device);

/// [n][c][p] → [n][p][c]: an NCHW tensor to channels-last (c channels, p = H·W pixels) — or a
/// weight [C_OUT][C_IN][KH][KW] to [C_OUT][KH][KW][C_IN] (n = C_OUT, p = KH·KW).
template <class T>
[[nodiscard]] std::vector<T> to_channels_last(std::span<const T> v, std::size_t n, std::size_t c, std::size_t p) {
    std::vector<T> out(v.size());
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < c; ++j)
            for (std::size_t k = 0; k < p; ++k) out[(i * p + k) * c + j] = v[(i * c + j) * p + k];
    return out;
}

/// float64 reference: y[b][oc][oh][ow] = silu(scale·conv(x, w) + shift), NCHW, weights
/// [C_OUT][C_IN/groups][KH][KW].
[[nodiscard]] std::vector<double> conv2d_bn_silu_reference(std::span<const float> x, std::span<const float> w,
                                                           std::span<const float> scale, std::span<const float> shift,
                                                           const Conv2dAttrs& attrs, const Conv2dShape& shape);

}  // namespace kjit
