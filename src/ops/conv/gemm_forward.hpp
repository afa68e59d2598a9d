// Choosing between the two tensor-core conv ops, for dispatch and configuration text alike.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kjit/conv.hpp>

#include "kjit/gemm_geometry.cuh"

namespace kjit::detail {

/// 1×1, stride 1, unpadded, ungrouped: the layers the 1×1 GEMM kernel takes.
[[nodiscard]] bool is_pointwise(const Conv2dAttrs& a) noexcept;

/// Whether the Hopper tiles of `block_n` output channels each lie in one group of a layer's
/// `groups` over `c_out` channels (always, ungrouped: the last tile is masked).
[[nodiscard]] inline bool tiles_within_groups(int block_n, int c_out, int groups) noexcept {
    return groups == 1 || c_out / groups % block_n == 0;
}

/// Whether split-K over `split` blocks is a candidate for these tiles: clusters exist, each
/// block keeps at least two K tiles, and the split grid stays within 4 blocks per
/// multiprocessor (what dispatch and `kjit tune` both consider).
[[nodiscard]] bool worth_splitting(const GemmTiles& t, int split, long long columns, int n, int k,
                                   const DeviceTraits& device);

/// The input rows of width W that the Hopper implicit GEMM's flattened-rows box holds for an
/// oh × ow output: the most that 32 consecutive output pixels of an image reach.
[[nodiscard]] int rows_box_rows(const Conv2dAttrs& a, int oh, int ow);

/// The Hopper implicit GEMM's X box where TMA cannot box image rows (W no multiple of 4): whole
/// input rows, flattened; none if it outgrows a TMA box (256 elements) or the 4 KB slot.
[[nodiscard]] std::optional<RowsBox> rows_box(const Conv2dAttrs& a, const Conv2dShape& s, int oh, int ow);

/// The Hopper 1×1 op's whole-image X box for a pointwise layer of small images (H·W ≤ 64, and
/// no multiple of 4 or under 32 pixels: where 32-pixel boxes would not fit or would idle), its
/// rows 8 floats or 4; none where neither divides C_IN·H·W (or 4 does only past 32 pixels).
[[nodiscard]] std::optional<ImageBox> image_box(const Conv2dAttrs& a, const Conv2dShape& s);

/// Output boxes of 32 pixels the Hopper op's column tiles run over for this layer: the
/// gathering op's run across images, the 1×1 op's and the flattened-rows implicit GEMM's start
/// anew at each image (the 1×1 op's whole-image boxes: two per group of images), the tap-box
/// implicit GEMM's are its tap box's (tap_box: the layer must have one).
[[nodiscard]] long long sm90_boxes(const Conv2dAttrs& a, const Conv2dShape& s, bool gathers);

/// The kernel of a Hopper conv op: its tiles as constants, built for sm_90a only. Throws
/// UsageError for invalid tiles or a device that is not 9.0.
[[nodiscard]] Kernel sm90_kernel(std::string name, std::vector<Param> signature, const Sm90Tiles& tiles,
                                 const DeviceTraits& device);

/// The grid of a Hopper op with these tiles over `boxes` output boxes of 32 pixels and N
/// channels: persistent (at most one block per multiprocessor), or a cluster per tile with split-K.
[[nodiscard]] Dims sm90_grid(const Sm90Tiles& tiles, std::size_t boxes, std::size_t n, int multiprocessors);

/// W rounded to TF32, to nearest (ties away from zero, as `cvt.rna.tf32.f32`), for the Hopper
/// kernels, whose tensor cores read W through a descriptor and would truncate it.
void round_to_tf32(std::span<float> values);

/// The Hopper tiles dispatch and `kjit tune` consider for a layer the op (gathering or not)
/// takes: each BLOCK_M × BLOCK_N with the deepest pipeline of at least 3 stages that fits beside
/// the op's tap table (BLOCK_N dividing a group's outputs), unsplit, and split over 2, 4 or 8
/// blocks where each block keeps at least two K steps and the blocks fill the device at most
/// twice (the cost model weighs the waves).
[[nodiscard]] std::vector<Sm90Tiles> sm90_split_candidates(const Conv2dAttrs& a, const Conv2dShape& s,
                                                           const DeviceTraits& device, bool gathers);
/// The channels-last op's K: per filter tap, C_IN rounded up to the 32 channels of a K step
/// (the rest zero-filled by TMA).
[[nodiscard]] inline int nhwc_k(const Conv2dAttrs& a, const Conv2dShape& s) {
    return a.kernel_h * a.kernel_w * (s.c_in + 31) / 32 * 32;
}

/// The same over `boxes` output boxes of 32 pixels, K = `k`, C_OUT channels in groups of
/// `groups` and `policy_bytes` of the column policy's shared memory (the channels-last op's,
/// whose K is taps × ⌈C_IN/32⌉·32).
[[nodiscard]] std::vector<Sm90Tiles> sm90_split_candidates(long long boxes, int k, int c_out, unsigned policy_bytes,
                                                           const DeviceTraits& device, int groups);

/// The op of the winner `kjit tune` stored in `cache` for this layer, device, arch and driver
/// under `layout`'s family whose kernel source is still the one it was timed with (the newest
/// such), or none: where there is no winner, or none holds — each that no longer makes an op
/// for this layer or names the other layout's kernel said as a warning, and a source since
/// edited said once.
[[nodiscard]] std::unique_ptr<Conv2dOp> tuned_conv2d_op(Conv2dLayout layout, const Conv2dAttrs& a, const Conv2dShape& s,
                                                        const DeviceTraits& device, const std::string& device_name,
                                                        const std::string& driver, Cache& cache);

/// The 1×1 GEMM op for pointwise layers, else the implicit-GEMM op, with these tiles.
[[nodiscard]] std::unique_ptr<GemmConvOp> make_gemm_conv(const Conv2dAttrs& a, const GemmTiles& tiles,
                                                         int max_shared_bytes, int split_k);

/// The Hopper op with these tiles: the gathering one where `gathers`, else the 1×1 op for
/// pointwise layers and the implicit-GEMM op for the rest.
[[nodiscard]] std::unique_ptr<TmaConvOp> make_tma_conv(const Conv2dAttrs& a, const Sm90Tiles& tiles,
                                                       const DeviceTraits& device, bool gathers = false);

/// Shared memory the Hopper op for this layer needs beyond its tiles': the implicit GEMM's tap
/// table and, after it, the flattened-rows producer's boxes (none for the pointwise TMA op). The
/// deepest pipelines may not fit beside a large table.
[[nodiscard]] unsigned tma_policy_bytes(const Conv2dAttrs& a, bool gathers = false);

/// The Hopper implicit GEMM's X box for an oh × ow output: the box width whose boxes cover the
/// fewest pixels (the widest among equals) and whose patch fits a 4 KB slot; none if none fits.
[[nodiscard]] std::optional<TapBox> tap_box(const Conv2dAttrs& a, int oh, int ow);

}  // namespace kjit::detail
