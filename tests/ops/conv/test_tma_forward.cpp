// The Hopper conv ops (src/ops/conv/tma_forward.cpp): the implicit GEMM's box geometry
// (kjit/gemm_geometry.cuh), checked against what its kernel reads — every input element of a
// box's 32 output pixels lies in the patch TMA loads, from a column TMA can start at — and the
// weight's rounding to TF32 at load.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <kjit/conv.hpp>

#include "kjit/gemm_geometry.cuh"
#include "ops/conv/gemm_forward.hpp"

using namespace kjit;

namespace {
/// A k × k filter with one stride and one padding for both axes.
Conv2dAttrs square(int k, int stride, int pad) {
    return {.kernel_h = k, .kernel_w = k, .stride_h = stride, .stride_w = stride, .pad_h = pad, .pad_w = pad};
}
}  // namespace

TEST_CASE("the implicit GEMM's patch boxes hold every input element their output pixels read") {
    int layers = 0;
    for (int k : {1, 3, 5, 7})
        for (int stride : {1, 2, 3})
            for (int pad = 0; pad <= k / 2; ++pad)
                for (int ow : {4, 8, 12, 20, 28, 40, 56, 80, 112, 160}) {
                    const Conv2dAttrs a = square(k, stride, pad);
                    const int oh = ow / 2 + 1;  // rows no multiple of a box's
                    const auto box = detail::tap_box(a, oh, ow);
                    if (!box) continue;  // its reason is conv2d_tma_unsupported_reason's
                    ++layers;
                    CAPTURE(k);
                    CAPTURE(stride);
                    CAPTURE(pad);
                    CAPTURE(ow);
                    CAPTURE(box->box_w);
                    REQUIRE(box->bytes() <= 4096);
                    int widest = 0, tallest = 0;
                    for (int ow0 = 0; ow0 < ow; ow0 += box->box_w)
                        for (int oh0 = 0; oh0 < oh; oh0 += box->rows()) {
                            // Where the kernel starts the load (conv2d_bn_silu_tma_forward.cu, patch_of):
                            // the patch's first row and its first column rounded down to 4, negative
                            // in the padding, which the box then holds as TMA's zero fill.
                            const int iw = ow0 * stride - pad, ih = oh0 * stride - pad;
                            const int load_w = iw & ~3, load_h = ih;
                            CHECK(load_w % 4 == 0);
                            for (int dy = 0; dy < box->rows(); ++dy)
                                for (int dx = 0; dx < box->box_w; ++dx)
                                    for (int r = 0; r < k; ++r)
                                        for (int q = 0; q < k; ++q) {
                                            const int col = iw + dx * stride + q, row = ih + dy * stride + r;
                                            widest = std::max(widest, col - load_w + 1);
                                            tallest = std::max(tallest, row - load_h + 1);
                                        }
                        }
                    CHECK(widest <= box->patch_w());
                    CHECK(tallest <= box->patch_h());
                }
    CHECK(layers > 100);
}

TEST_CASE("a K step's 32 k touch at most the box's channels") {
    for (int taps = 1; taps <= 64; ++taps) {
        CAPTURE(taps);
        const int channels = TapBox::step_channels(taps);
        for (int k0 = 0; k0 < 32 * taps * 3; k0 += 32) CHECK((k0 + 31) / taps - k0 / taps < channels);
    }
    CHECK(TapBox::step_channels(9) == 5);
    CHECK(TapBox::step_channels(1) == 32);
}

TEST_CASE("the tap table repeats with its period: a K step's row is kt mod period") {
    for (int taps = 1; taps <= 64; ++taps) {
        CAPTURE(taps);
        const int period = TapTable{taps}.period();
        CHECK(32 * period % taps == 0);                              // after `period` steps it starts over…
        for (int p = 1; p < period; ++p) CHECK(32 * p % taps != 0);  // …and not before
    }
    CHECK(TapTable{9}.period() == 9);
    CHECK(TapTable{9}.bytes() == 9 * 32 * 4);
    CHECK(TapTable{16}.period() == 1);
}

TEST_CASE("the flattened-rows boxes hold every input element their output pixels read, where the kernel looks") {
    int layers = 0;
    for (int k : {1, 3, 5, 7})
        for (int stride : {1, 2, 3})
            for (int pad = 0; pad <= k / 2; ++pad)
                for (int hw : {5, 6, 7, 9, 10, 13, 14, 15, 18, 22, 30})
                    for (int channels : {4, 12}) {
                        const Conv2dAttrs a = square(k, stride, pad);
                        const Conv2dShape s{1, channels, hw + 1, hw, 8};  // rows no multiple of a box's
                        if (hw + 2 * pad < k) continue;
                        const auto [oh, ow] = conv2d_output_size(a, s);
                        const auto box = detail::rows_box(a, s, oh, ow);
                        if (!box) continue;  // its reason is conv2d_tma_unsupported_reason's
                        ++layers;
                        CAPTURE(k);
                        CAPTURE(stride);
                        CAPTURE(pad);
                        CAPTURE(hw);
                        CAPTURE(channels);
                        REQUIRE(box->bytes() <= 4096);
                        REQUIRE(box->extent() <= 256);
                        const int plane = s.height * s.width;
                        CHECK(box->planes_apart == (plane % 4 != 0));
                        int outside = 0;
                        for (int j0 = 0; j0 < oh * ow; j0 += 32)
                            for (int c0 = 0; c0 < channels; ++c0) {
                                // Where the kernel starts the load and finds each element
                                // (conv2d_bn_silu_tma_forward.cu: first_element, load_start, fragments).
                                const int first = std::max((j0 / ow) * stride - pad, 0) * s.width;
                                const int offset = box->planes_apart ? c0 * plane : 0;
                                const int start = (offset + first) & ~3;
                                CHECK(start % 4 == 0);
                                const int rebase = (offset + first) & 3;
                                for (int j = j0; j < std::min(j0 + 32, oh * ow); ++j)
                                    for (int dc = 0; dc < box->channels && c0 + dc < channels; ++dc)
                                        for (int r = 0; r < k; ++r)
                                            for (int q = 0; q < k; ++q) {
                                                const int ih = j / ow * stride - pad + r,
                                                          iw = j % ow * stride - pad + q;
                                                if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width)
                                                    continue;  // padding: masked, not read
                                                const int at = dc * box->pitch() + ih * s.width + iw - first + rebase;
                                                // The element there in the map's box, innermost dimension first.
                                                const int truth = box->planes_apart
                                                                      ? (c0 + dc) * plane + ih * s.width + iw - start
                                                                      : dc * box->span() + ih * s.width + iw - start;
                                                CHECK(at == truth);
                                                const int run = box->planes_apart ? box->extent() : box->span();
                                                outside += at < dc * (box->planes_apart ? 0 : box->span()) ||
                                                           at >= (box->planes_apart ? run : (dc + 1) * run);
                                            }
                            }
                        CHECK(outside == 0);
                    }
    CHECK(layers > 100);
}

TEST_CASE("the TMA conv ops round their weight to TF32 at load, to nearest, and leave the BN slots alone") {
    const DeviceTraits h200{132, 232448, Arch(9, 0)};
    const auto op = make_conv2d_bn_silu({}, {8, 64, 28, 28, 128}, "TMA=1 BLOCK_M=128 BLOCK_N=128 STAGES=4", h200);
    auto f = [](std::uint32_t bits) { return std::bit_cast<float>(bits); };
    auto bits = [](float v) { return std::bit_cast<std::uint32_t>(v); };
    const float inf = std::numeric_limits<float>::infinity();
    // TF32 keeps 10 fraction bits: 1 + 2^-11 is half its last place and rounds away from zero.
    std::vector<float> w = {
        1.0f + 0x1p-11f, 1.0f + 0x1p-11f - 0x1p-23f,       -(1.0f + 0x1p-11f), 0.3f, f(0x7fffffffu), -inf,
        f(0x00001fffu),  std::numeric_limits<float>::max()};
    const std::vector<float> given = w;
    op->prepare_param(Conv2dOp::weight_slot, w);
    CHECK(w[0] == 1.0f + 0x1p-10f);
    CHECK(w[1] == 1.0f);
    CHECK(w[2] == -(1.0f + 0x1p-10f));
    CHECK(bits(w[3]) == ((bits(0.3f) + 0x1000u) & 0xffffe000u));
    CHECK(std::abs(w[3] - 0.3f) <= 0.3f * 0x1p-11f);
    CHECK(bits(w[4]) == 0x7fffffffu);  // CUDA's NaN stays NaN (an integer add alone would wrap it to -0)
    CHECK(std::isnan(w[4]));
    CHECK(w[5] == -inf);
    CHECK(bits(w[6]) == 0x00002000u);  // subnormals round the same way
    CHECK(w[7] == inf);                // as cvt.rna: the largest float rounds up past TF32's range
    for (const float v : w)
        if (!std::isnan(v)) CHECK((bits(v) & 0x1fffu) == 0);
    std::vector<float> scale = given;
    op->prepare_param(1, scale);  // bn_scale: read as fp32 by the epilogue
    CHECK(std::memcmp(scale.data(), given.data(), given.size() * sizeof(float)) == 0);
    // The sm80 kernels round their fragments themselves: their ops leave the weight as given.
    const auto sm80 = make_conv2d_bn_silu({}, {8, 64, 28, 28, 128}, "BLOCK_M=128 BLOCK_N=64 BLOCK_K=32", h200);
    std::vector<float> same = given;
    sm80->prepare_param(Conv2dOp::weight_slot, same);
    CHECK(std::memcmp(same.data(), given.data(), given.size() * sizeof(float)) == 0);
}
