// A layer's configurations as kjit check runs them: every kernel that takes the layer, each of
// its tiles that fit, every split-K factor where clusters exist — and nothing an op refuses.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include <kjit/conv.hpp>

using namespace kjit;

namespace {

const DeviceTraits h200{132, 232448, Arch(9, 0)};
const DeviceTraits a100{108, 166912, Arch(8, 0)};

std::size_t holding(const std::vector<std::string>& configs, std::string_view word) {
    return std::ranges::count_if(configs, [&](const std::string& c) { return c.find(word) != std::string::npos; });
}

}  // namespace

TEST_CASE("every configuration of a layer: each kernel that takes it, every split on devices with clusters") {
    const Conv2dAttrs k3s2{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    const Conv2dShape s{5, 32, 15, 17, 64};
    const auto on_h200 = conv2d_bn_silu_configurations(k3s2, s, h200);
    CHECK(std::set(on_h200.begin(), on_h200.end()).size() == on_h200.size());
    for (const auto& c : on_h200) {
        CAPTURE(c);
        CHECK_NOTHROW((void)make_conv2d_bn_silu(k3s2, s, c, h200));
    }
    // The sm80 implicit GEMM: every tile at every split 1…8.
    CHECK(holding(on_h200, "BLOCK_K=") == GemmTiles::configurations().size() * 8);
    CHECK(holding(on_h200, "SPLIT_K=8") > 0);
    CHECK(holding(on_h200, "BLOCK_OC=") == Conv2dBnSiluDirectForward::configurations().size());
    CHECK(holding(on_h200, "TMA=1") > 0);
    CHECK(holding(on_h200, "NHWC=1") > 0);
    CHECK(holding(on_h200, "PLANES=") == 0);  // ungrouped: not the depthwise kernel's
    // Every configuration tune considers is among them.
    for (const auto& c : conv2d_bn_silu_candidates(k3s2, s, h200)) {
        CAPTURE(c);
        CHECK(std::ranges::count(on_h200, c) + std::ranges::count(on_h200, c + " SPLIT_K=1") == 1);
    }

    // Without clusters or TMA: the sm80 kernels alone, unsplit.
    const auto on_a100 = conv2d_bn_silu_configurations(k3s2, s, a100);
    CHECK(holding(on_a100, "TMA=1") + holding(on_a100, "NHWC=1") == 0);
    CHECK(holding(on_a100, "SPLIT_K=1") == GemmTiles::configurations().size());
    CHECK(holding(on_a100, "SPLIT_K=") == holding(on_a100, "SPLIT_K=1"));
}

TEST_CASE("configurations of grouped layers: the depthwise kernel's tiles that fit, group-aligned TMA tiles") {
    const Conv2dAttrs dw{.kernel_h = 7, .kernel_w = 7, .pad_h = 3, .pad_w = 3, .groups = 20};
    const auto depthwise = conv2d_bn_silu_configurations(dw, {1, 20, 9, 11, 20}, h200);
    CHECK(holding(depthwise, "PLANES=") == DepthwiseTiles::configurations().size());
    CHECK(holding(depthwise, "TMA=1") + holding(depthwise, "NHWC=1") == 0);  // 1-channel groups: no wgmma
    // Groups of 32 channels: TMA tiles of at most 32 outputs (a wider one would straddle groups).
    const Conv2dAttrs g8{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 8};
    const auto grouped = conv2d_bn_silu_configurations(g8, {1, 256, 7, 7, 256}, h200);
    CHECK(holding(grouped, "TMA=1") > 0);
    CHECK(holding(grouped, "NHWC=1") == 0);
    for (const auto& c : grouped)
        if (c.starts_with("TMA=1")) {
            CAPTURE(c);
            CHECK((c.find("BLOCK_N=32 ") != std::string::npos || c.find("BLOCK_N=16 ") != std::string::npos));
        }
}

TEST_CASE("dispatch's pick is one of the candidates kjit tune times and kjit check runs, on awkward layers too") {
    // If it were not, `kjit model tune` could not report the heuristic's time, and a tuned
    // winner would be compared against nothing dispatch runs.
    const Conv2dAttrs k1{}, k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
        k3s2{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
        k7s2{.kernel_h = 7, .kernel_w = 7, .stride_h = 2, .stride_w = 2, .pad_h = 3, .pad_w = 3},
        k5{.kernel_h = 5, .kernel_w = 5, .pad_h = 2, .pad_w = 2},
        k5s2{.kernel_h = 5, .kernel_w = 5, .stride_h = 2, .stride_w = 2, .pad_h = 2, .pad_w = 2};
    auto grouped = [](Conv2dAttrs a, int groups) {
        a.groups = groups;
        return a;
    };
    const std::pair<Conv2dAttrs, Conv2dShape> layers[] = {
        {k1, {1, 1280, 1, 1, 1000}},                 // a classifier: M = 1
        {k1, {5, 37, 33, 33, 101}},                  // odd channels, a ragged image
        {k3, {1, 1, 64, 64, 8}},                     // one input channel
        {k3, {24, 1, 13, 13, 3}},                    // one input channel, three outputs
        {k3s2, {7, 24, 57, 57, 40}},                 // a prime batch, an odd image
        {k7s2, {1, 3, 224, 224, 64}},                // a stem
        {k5, {5, 32, 28, 28, 64}},                   // 5x5
        {grouped(k5, 240), {24, 240, 14, 14, 240}},  // depthwise 5x5
        {grouped(k3, 8), {5, 64, 30, 30, 64}},       // groups of 8 channels
        {grouped(k3, 3), {1, 3, 9, 9, 6}},           // depthwise, multiplier 2
        {k5s2, {7, 16, 63, 63, 32}},                 // the tap table leaves room for 7 stages of 64x128
    };
    for (const auto& [a, s] : layers)
        for (const DeviceTraits& device : {h200, a100}) {
            const std::string pick = conv2d_bn_silu_config(*dispatch_conv2d_bn_silu(a, s, device));
            const auto candidates = conv2d_bn_silu_candidates(a, s, device);
            CAPTURE(conv2d_problem_key(a, s));
            CAPTURE(device.arch.name());
            CAPTURE(pick);
            CHECK(std::ranges::count(candidates, pick) == 1);
            // `kjit check` runs every configuration: dispatch's picks among them.
            CHECK(std::ranges::count(conv2d_bn_silu_configurations(a, s, device), pick) == 1);
        }
}
