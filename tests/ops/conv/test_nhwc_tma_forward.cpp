// The channels-last Hopper conv op without a device: NHWC shapes and parameters, its grid, the
// layers it takes and the reasons it gives for the rest.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/conv.hpp>
#include <kjit/error.hpp>

#include "ops/conv/dispatch_replay.hpp"

using namespace kjit;

namespace {
const DeviceTraits h200{132, 232448, Arch(9, 0)};
const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
const Conv2dAttrs k3s2{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
}  // namespace

TEST_CASE("the channels-last Hopper op: NHWC shapes, [C_OUT, KH, KW, C_IN] weight, pixel rows, its grid") {
    const Conv2dBnSiluNhwcTmaForward op({128, 128, 4, 8}, k3s2, h200);
    CHECK(op.kernel().name() == "conv2d_bn_silu_nhwc_tma_forward");
    CHECK(op.kernel().only_for() == Arch(9, 0, 'a'));
    CHECK(op.kernel().entry_point_source().find("const __grid_constant__ kjit::TensorMap x_map") != std::string::npos);
    const std::size_t x[] = {8, 28, 28, 64}, resolved[] = {8, 0, 0, 48};
    const ShapeView inputs[] = {x};
    const Shape y = op.compute_concrete_output_shape(inputs, resolved);
    CHECK(y == Shape{8, 14, 14, 48});
    const auto params = op.param_shapes(inputs, y);
    REQUIRE(params.size() == 3);
    CHECK(params[0] == Shape{48, 3, 3, 64});
    CHECK(params[1] == Shape{48});
    CHECK(op.forward_output_row_elems(y) == 48);  // a row is one pixel's channels
    CHECK(op.forward_output_row_stride(y) == 48);
    // 8·14·14 = 1568 pixels: 13 column tiles of 128, one channel tile — fewer than the SMs.
    CHECK(op.grid(y)[0] == 13);
    const Shape big{32, 56, 56, 256};
    CHECK(op.grid(big)[0] == 132);  // persistent
    const Conv2dBnSiluNhwcTmaForward split({128, 64, 6, 8, 4}, k3, h200);
    CHECK(split.cluster_for_launch(0)[0] == 4);
    CHECK(split.grid(y)[0] == 13 * 4);  // a cluster of 4 per tile
    CHECK(split.shared_bytes_for_launch(0) == Sm90Tiles{128, 64, 6, 8, 4}.shared_bytes());
    // The weight is rounded to TF32 at load, as the other Hopper kernels' is.
    float w[] = {1.0f + 3.0f / 4096, 3.0f}, bn[] = {1.0f + 1.0f / 4096};
    op.prepare_param(Conv2dOp::weight_slot, w);
    op.prepare_param(1, bn);
    CHECK(w[0] == 1.0f + 1.0f / 1024);
    CHECK(w[1] == 3.0f);
    CHECK(bn[0] == 1.0f + 1.0f / 4096);
}

TEST_CASE("the channels-last Hopper op: the layers TMA takes, and why not the rest") {
    CHECK(conv2d_nhwc_tma_unsupported_reason(k3, {2, 24, 12, 12, 40}, h200).empty());
    CHECK(conv2d_nhwc_tma_unsupported_reason(k3s2, {1, 3 * 4, 7, 7, 255}, h200).empty());
    CHECK(conv2d_nhwc_tma_unsupported_reason({}, {37, 64, 1, 1, 3}, h200).empty());  // 1x1, M = 1 a image
    CHECK(conv2d_nhwc_tma_unsupported_reason(k3, {2, 3, 12, 12, 40}, h200).find("C_IN a multiple of 4") !=
          std::string::npos);
    CHECK(conv2d_nhwc_tma_unsupported_reason(k3, {2, 24, 12, 12, 40}, {108, 166912, Arch(8, 0)}).find("9.0 device") !=
          std::string::npos);
    const Conv2dAttrs wide_stride{.kernel_h = 3, .kernel_w = 3, .stride_h = 9, .stride_w = 9};
    CHECK(conv2d_nhwc_tma_unsupported_reason(wide_stride, {1, 8, 40, 40, 8}, h200).find("element stride") !=
          std::string::npos);
    const Conv2dAttrs huge_pad{.kernel_h = 3, .kernel_w = 3, .pad_h = 130, .pad_w = 130};
    CHECK(conv2d_nhwc_tma_unsupported_reason(huge_pad, {1, 8, 4, 4, 8}, h200).find("-128 to 127") != std::string::npos);
    const Conv2dAttrs grouped{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 2};
    CHECK(conv2d_nhwc_tma_unsupported_reason(grouped, {1, 8, 4, 4, 8}, h200).find("ungrouped") != std::string::npos);
    CHECK_THROWS_WITH_AS(Conv2dBnSiluNhwcTmaForward({128, 128, 4, 8}, grouped, h200), doctest::Contains("ungrouped"),
                         UsageError);
    CHECK_THROWS_WITH_AS(Conv2dBnSiluNhwcTmaForward({128, 128, 4, 8}, k3, {108, 166912, Arch(8, 0)}),
                         doctest::Contains("9.0 devices"), UsageError);
}

TEST_CASE("the channels-last Hopper op stores y by TMA where its rows allow, by its own stores elsewhere") {
    CHECK(conv2d_nhwc_tma_y_store_reason(k3, {8, 64, 56, 56, 256}, 256).empty());
    CHECK(conv2d_nhwc_tma_y_store_reason({}, {37, 64, 1, 1, 4}, 8).empty());  // padded rows
    CHECK(conv2d_nhwc_tma_y_store_reason(k3, {1, 12, 7, 7, 40}, 42).find("multiple of 16") != std::string::npos);
    // TMA stores a row's tail in 16-byte groups: with C_OUT = 130 in rows of 132 floats it wrote
    // channels 130 and 131 of every pixel (H200), so such rows are the kernel's own stores.
    CHECK(conv2d_nhwc_tma_y_store_reason({}, {1, 520, 28, 28, 130}, 132).find("C_OUT = 130 is not a multiple of 4") !=
          std::string::npos);
    CHECK(conv2d_nhwc_tma_y_store_reason(k3s2, {1, 12, 7, 7, 255}, 255).find("not a multiple of 4") !=
          std::string::npos);
    CHECK_THROWS_WITH_AS((void)conv2d_nhwc_tma_y_store_reason(k3, {2, 3, 12, 12, 40}, 40),
                         doctest::Contains("C_IN a multiple of 4"), UsageError);
}

TEST_CASE("the channels-last Hopper op's candidates and dispatch pick") {
    const Conv2dShape s{32, 256, 14, 14, 256};
    const auto candidates = conv2d_bn_silu_nhwc_candidates(k3, s, h200);
    // Seven tile shapes at their deepest pipelines, unsplit; few enough tiles for some splits.
    CHECK(std::count_if(candidates.begin(), candidates.end(), [](const Sm90Tiles& t) { return t.split_k == 1; }) == 7);
    for (const auto& t : candidates)
        CHECK(t.stages == Sm90Tiles::max_stages(t.block_m, t.block_n, h200.max_shared_bytes));
    const auto op = dispatch_conv2d_bn_silu_nhwc(k3, s, h200);
    CHECK(std::find(candidates.begin(), candidates.end(), op->tiles()) != candidates.end());
    // A small layer fills the device by splitting K.
    const Conv2dShape small{1, 512, 7, 7, 512};
    CHECK(dispatch_conv2d_bn_silu_nhwc(k3, small, h200)->tiles().split_k > 1);
    CHECK_THROWS_WITH_AS((void)dispatch_conv2d_bn_silu_nhwc(k3, {1, 3, 32, 32, 16}, h200),
                         doctest::Contains("C_IN a multiple of 4"), UsageError);
}

TEST_CASE("the channels-last dispatch against measured times: within 1.15x of the best candidate on every row") {
    // Every candidate of the bench rows TMA takes (kjit_conv_bench --quick --nhwc, H200), in the
    // two runs its cost model's weights were fitted to. Refresh them, and refit, when the kernel
    // changes.
    for (const char* run : {"2026-12-04-nhwc-candidates-kjit.jsonl", "2026-12-04-final-nhwc-kjit.jsonl"}) {
        CAPTURE(run);
        const auto replay = test::replay_dispatch(
            std::string(KJIT_SOURCE_DIR "/docs/bench-data/") + run, [](const Conv2dAttrs& a, const Conv2dShape& s) {
                const Sm90Tiles t = dispatch_conv2d_bn_silu_nhwc(a, s, h200)->tiles();
                return fmt::format("{}x{} s{}{}", t.block_m, t.block_n, t.stages,
                                   t.split_k > 1 ? fmt::format(" split {}", t.split_k) : "");
            });
        CHECK(replay.rows == 108);  // the 111 bench rows less yolo's 3-channel stem, which TMA cannot read
        const std::string misses = fmt::format("{}", fmt::join(replay.over, ", "));
        CAPTURE(misses);
        CHECK(replay.over.empty());
    }
}

TEST_CASE("the channels-last op as configuration text: NHWC=1 and its tiles, read back as written") {
    const Conv2dShape s{8, 64, 28, 28, 128};
    const std::string text = "NHWC=1 BLOCK_M=128 BLOCK_N=64 STAGES=8 GROUP_M=8 SPLIT_K=2";
    const auto op = make_conv2d_bn_silu(k3, s, text, h200);
    REQUIRE(dynamic_cast<const Conv2dBnSiluNhwcTmaForward*>(op.get()) != nullptr);
    CHECK(conv2d_bn_silu_config(*op) == text);
    CHECK(conv2d_bn_silu_config(*make_conv2d_bn_silu(k3, s, "NHWC=1 BLOCK_M=64 BLOCK_N=32 STAGES=8", h200)) ==
          "NHWC=1 BLOCK_M=64 BLOCK_N=32 STAGES=8 GROUP_M=8");
    // What `kjit tune --channels-last` times: the candidates, each read back to its own tiles.
    const auto configs = conv2d_bn_silu_nhwc_configs(k3, s, h200);
    REQUIRE(configs.size() == conv2d_bn_silu_nhwc_candidates(k3, s, h200).size());
    for (const auto& c : configs) CHECK(conv2d_bn_silu_config(*make_conv2d_bn_silu(k3, s, c, h200)) == c);
    CHECK_THROWS_WITH_AS((void)make_conv2d_bn_silu(k3, s, "NHWC=2 BLOCK_M=128 BLOCK_N=64 STAGES=8", h200),
                         doctest::Contains("NHWC takes the value 1"), UsageError);
    CHECK_THROWS_WITH_AS(
        (void)make_conv2d_bn_silu(k3, {8, 6, 28, 28, 128}, "NHWC=1 BLOCK_M=128 BLOCK_N=64 STAGES=8", h200),
        doctest::Contains("C_IN a multiple of 4"), UsageError);
    CHECK_THROWS_WITH_AS((void)make_conv2d_bn_silu(k3, s, "NHWC=1 BLOCK_M=128 BLOCK_N=64 STAGES=8 BLOCK_K=32", h200),
                         doctest::Contains("BLOCK_K is not one this kernel takes"), UsageError);
}
