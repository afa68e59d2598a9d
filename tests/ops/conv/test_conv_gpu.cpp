// Conv2d + BN + SiLU on the GPU: every configuration of both kernels on ragged shapes against
// the float64 reference, with NaN-poisoned outputs, padded rows and a guard region.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "ops/conv/gemm_forward.hpp"
#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;

namespace {

struct Case {
    std::string name;
    Conv2dAttrs attrs;
    Conv2dShape shape;
    int row_padding = 0;  // y_row_stride = OH·OW + row_padding
    int x_offset = 0;     // x starts this many floats into its buffer (off a 16-byte boundary)
};

/// Fresh random layer: inputs, weights ~ 1/√fan_in, and BN with non-trivial statistics.
struct Layer {
    std::vector<float> x, w, scale, shift;
    Layer(const Case& c, std::mt19937_64& rng) {
        const auto& s = c.shape;
        const int fan_in = s.c_in / c.attrs.groups * c.attrs.kernel_h * c.attrs.kernel_w;
        std::uniform_real_distribution<float> unit(-1, 1), positive(0.5f, 2.0f);
        x.resize(1ULL * s.batch * s.c_in * s.height * s.width);
        for (auto& v : x) v = unit(rng);
        w.resize(1ULL * s.c_out * fan_in);
        for (auto& v : w) v = unit(rng) * 1.7f / std::sqrt(float(fan_in));
        std::vector<float> gamma(s.c_out), beta(s.c_out), mean(s.c_out), var(s.c_out);
        for (int i = 0; i < s.c_out; ++i)
            gamma[i] = positive(rng), beta[i] = unit(rng), mean[i] = 0.2f * unit(rng), var[i] = positive(rng);
        auto bn = fold_batch_norm(gamma, beta, mean, var, 1e-5f);
        scale = std::move(bn.scale);
        shift = std::move(bn.shift);
    }
};

/// The tests' own tolerances apply in check() below; the outcome's first wrong output is unused.
constexpr double any_difference = 0;

/// Uploads `v` to a fresh buffer on `device`.
DeviceBuffer upload(const Device& device, const std::vector<float>& v) {
    DeviceBuffer b(device, v.size() * sizeof(float));
    b.upload(std::span<const float>(v));
    return b;
}

/// Runs `op` (or, with `options`, its kernel compiled with those options) on the case and
/// compares with the float64 reference.
OutputCheck run(const RuntimeOp& op, const Case& c, std::mt19937_64& rng, const CompileOptions* options = nullptr) {
    const auto device = Device::get(0);
    Stream stream(device);
    const Layer layer(c, rng);
    const auto& s = c.shape;
    const auto [oh, ow] = conv2d_output_size(c.attrs, s);
    std::vector<float> x_buffer(c.x_offset, 0.0f);
    x_buffer.insert(x_buffer.end(), layer.x.begin(), layer.x.end());
    const DeviceBuffer dx = upload(device, x_buffer), dw = upload(device, layer.w),
                       dscale = upload(device, layer.scale), dshift = upload(device, layer.shift);
    const Shape x_shape{std::size_t(s.batch), std::size_t(s.c_in), std::size_t(s.height), std::size_t(s.width)};
    const Shape y_shape{std::size_t(s.batch), std::size_t(s.c_out), std::size_t(oh), std::size_t(ow)};
    const Tensor inputs[] = {{dx.as<float>() + c.x_offset, x_shape}};
    void* const params[] = {dw.as<float>(), dscale.as<float>(), dshift.as<float>()};
    const auto ref = conv2d_bn_silu_reference(layer.x, layer.w, layer.scale, layer.shift, c.attrs, s);
    // Runtime::global(): main() points it at a fresh cache directory.
    return checked_forward(op, Runtime::global(), stream, inputs, params, y_shape, ref, any_difference, c.row_padding,
                           options);
}

void check(const OutputCheck& o, double tolerance) {
    CHECK(o.unwritten == 0);
    CHECK(o.nonfinite == 0);
    CHECK(o.padding_written == 0);
    CHECK(o.guard_written == 0);
    CHECK(o.error <= tolerance);
}

std::mt19937_64& rng() {
    static std::mt19937_64 r{std::random_device{}()};
    return r;
}

const std::vector<Case> gemm_cases = {
    {"7x7, ragged K and N, B=2", {}, {2, 67, 7, 7, 45}},
    {"tiny N = 3, M = 45", {}, {1, 33, 5, 9, 3}, 3},
    {"M multiple of 4 (16-byte copies), B=3", {}, {3, 128, 8, 8, 70}},
    {"N = 130, 13x11, padded rows", {}, {2, 20, 13, 11, 130}, 5},
    {"K = 1, M = 1", {}, {4, 1, 1, 1, 17}},
};

}  // namespace

TEST_CASE("GEMM kernel: every configuration on ragged shapes, TF32 path within 2e-3") {
    for (const auto& t : test::configurations_to_test(GemmTiles::configurations())) {
        const Conv2dBnSiluGemmForward op(t.block_m, t.block_n, t.block_k, t.group_m);
        for (const auto& c : gemm_cases) {
            CAPTURE(op.kernel().id());
            CAPTURE(c.name);
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
    }
}

TEST_CASE("split-K: clusters of 2, 3 and 8 blocks sum their partial tiles, empty K shares included") {
    if (Device::get(0).arch().major() < 9) {
        MESSAGE("split-K needs thread-block clusters (sm_90+): not on this device");
        return;
    }
    const int smem = Device::get(0).max_shared_bytes_per_block();
    for (const GemmTiles t : {GemmTiles{32, 16, 16, 8}, GemmTiles{64, 64, 32, 8}, GemmTiles{128, 128, 32, 8}})
        for (int split : {2, 3, 8}) {
            const Conv2dBnSiluGemmForward op(t.block_m, t.block_n, t.block_k, t.group_m, smem, split);
            for (const auto& c : gemm_cases) {
                CAPTURE(op.kernel().id());
                CAPTURE(split);
                CAPTURE(c.name);
                const OutputCheck o = run(op, c, rng());
                CAPTURE(o.error);
                check(o, 2e-3);
            }
        }
    const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
    const Case deep{"3x3, 200 channels, 5x6", k3, {2, 200, 5, 6, 40}};
    for (int split : {2, 4, 8}) {
        const Conv2dBnSiluForward op({64, 32, 32, 8}, k3, smem, split);
        CAPTURE(split);
        check(run(op, deep, rng()), 2e-3);
    }
}

TEST_CASE("GEMM kernel: the FMA path is exact to 1e-5") {
    CompileOptions fma{.arch = Device::get(0).arch()};
    fma.defines.push_back({"KJIT_GEMM_FMA", "1"});
    for (const GemmTiles t : {GemmTiles{32, 16, 16, 8}, GemmTiles{64, 64, 32, 8}, GemmTiles{128, 128, 32, 8}}) {
        const Conv2dBnSiluGemmForward op(t.block_m, t.block_n, t.block_k, t.group_m);
        for (const auto& c : gemm_cases) {
            CAPTURE(op.kernel().id());
            CAPTURE(c.name);
            const OutputCheck o = run(op, c, rng(), &fma);
            CAPTURE(o.error);
            check(o, 1e-5);
        }
    }
}

namespace {
const std::vector<Case> general_cases = {
    {"3x3 s1 p1", {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, {2, 19, 11, 13, 37}},
    {"3x3 s2 p1",
     {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
     {1, 16, 15, 17, 24},
     2},
    {"5x5 p2", {.kernel_h = 5, .kernel_w = 5, .pad_h = 2, .pad_w = 2}, {1, 8, 9, 10, 12}},
    {"7x7 s2 p3 stem",
     {.kernel_h = 7, .kernel_w = 7, .stride_h = 2, .stride_w = 2, .pad_h = 3, .pad_w = 3},
     {1, 3, 32, 30, 16}},
    {"depthwise 3x3", {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 32}, {2, 32, 12, 12, 32}},
    {"grouped 3x3, 4 groups",
     {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 4},
     {1, 24, 10, 7, 36},
     1},
    {"1x1 stride 2", {.stride_h = 2, .stride_w = 2}, {2, 20, 9, 9, 30}},
    {"many input channels", {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, {1, 150, 6, 70, 20}},
};
}  // namespace

TEST_CASE("implicit-GEMM kernel: every configuration over 3x3, strided, 5x5, 7x7, depthwise and grouped layers") {
    for (const auto& t : test::configurations_to_test(GemmTiles::configurations()))
        for (const auto& c : general_cases) {
            const Conv2dBnSiluForward op(t, c.attrs, Device::get(0).max_shared_bytes_per_block());
            CAPTURE(op.kernel().id());
            CAPTURE(c.name);
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
}

TEST_CASE("direct kernel: every configuration over the same layers, fp32 within 1e-5") {
    for (const auto& t : test::configurations_to_test(Conv2dBnSiluDirectForward::configurations()))
        for (const auto& c : general_cases) {
            const Conv2dBnSiluDirectForward op(t.block_oc, t.block_ow, c.attrs, c.shape,
                                               Device::get(0).max_shared_bytes_per_block());
            CAPTURE(op.kernel().id());
            CAPTURE(c.name);
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 1e-5);
        }
}

TEST_CASE("dispatch runs real layer shapes end to end") {
    const auto traits = DeviceTraits::of(Device::get(0));
    const std::vector<Case> layers = {
        {"ResNet 1x1 256->64 at 28x28, B=2", {}, {2, 256, 28, 28, 64}},
        {"ResNet 1x1 2048->512 at 7x7 (no TMA: 49 pixels)", {}, {1, 2048, 7, 7, 512}},
        {"1x1 1000->24 at 14x14, B=37", {}, {37, 1000, 14, 14, 24}},
        {"1x1 255->200 (no TMA: C_IN = 255)", {}, {2, 255, 14, 14, 200}},
        {"ResNet 3x3 64->64 at 28x28", {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, {2, 64, 28, 28, 64}},
        {"YOLO stem 3x3 s2",
         {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
         {1, 3, 64, 64, 16}},
        {"depthwise 3x3 128 at 28x28",
         {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 128},
         {2, 128, 28, 28, 128}},
    };
    for (const auto& c : layers) {
        const auto op = dispatch_conv2d_bn_silu(c.attrs, c.shape, traits);
        CAPTURE(c.name);
        CAPTURE(op->kernel_for_launch(0).id());
        const OutputCheck o = run(*op, c, rng());
        CAPTURE(o.error);
        check(o, conv2d_rounds_to_tf32(*op) ? 2e-3 : 1e-5);
    }
}

namespace {

/// Depthwise layers over filters 1, 3, 5 and 7, strides 1 and 2 and every padding up to k/2, on
/// images of 1, 7, 13 and 57 pixels a side, channel counts of no tile's size, multipliers 1
/// and 2, batches 1 and 3; x's rows whole 16-byte chunks (W = 28), 8-byte pairs (W = 14) or
/// neither, x 4 or 8 bytes off a 16-byte boundary, y's rows padded off 16 bytes.
std::vector<Case> depthwise_cases() {
    struct Image {
        int h, w;
    };
    const Image images[] = {{7, 7}, {13, 13}, {57, 57}, {1, 9}, {12, 28}, {9, 1}, {14, 14}};
    const int channels[] = {5, 33, 8};
    std::vector<Case> cases;
    int i = 0;
    for (int k : {1, 3, 5, 7})
        for (int stride : {1, 2})
            for (int pad = 0; pad <= k / 2; ++pad, ++i) {
                const Image image = images[i % 7];
                if (image.h + 2 * pad < k || image.w + 2 * pad < k) continue;
                const int c = channels[i % 3], multiplier = 1 + i % 2, batch = i / 2 % 2 ? 3 : 1;
                cases.push_back({fmt::format("{0}x{0} s{1} p{2}, {3} -> {4} channels, {5}x{6}, B={7}", k, stride, pad,
                                             c, c * multiplier, image.h, image.w, batch),
                                 {.kernel_h = k,
                                  .kernel_w = k,
                                  .stride_h = stride,
                                  .stride_w = stride,
                                  .pad_h = pad,
                                  .pad_w = pad,
                                  .groups = c},
                                 {batch, c, image.h, image.w, c * multiplier},
                                 i % 4 == 3 ? 3 : 0,
                                 i % 5 == 4 ? 1 + i % 2 : 0});
            }
    return cases;
}

}  // namespace

TEST_CASE("depthwise kernel: dispatch's pick over filters 1-7, strides, paddings and ragged images, fp32 within 1e-5") {
    const auto traits = DeviceTraits::of(Device::get(0));
    const auto cases = depthwise_cases();
    CHECK(cases.size() >= 16);
    for (const auto& c : cases) {
        const auto op = dispatch_conv2d_bn_silu(c.attrs, c.shape, traits);
        CAPTURE(c.name);
        CAPTURE(op->kernel_for_launch(0).id());
        REQUIRE(dynamic_cast<const Conv2dBnSiluDepthwiseForward*>(op.get()) != nullptr);
        const OutputCheck o = run(*op, c, rng());
        CAPTURE(o.error);
        check(o, 1e-5);
    }
}

TEST_CASE("depthwise kernel: every configuration on 3x3, 5x5 and strided 7x7 layers, every copy width") {
    const std::vector<Case> layers = {
        {"3x3 p1, 33 -> 66, 28x28 (16-byte copies and stores), B=3",
         {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 33},
         {3, 33, 28, 28, 66}},
        {"5x5 p2, 9 -> 18, 14x14 (8-byte copies and stores), rows padded by 2",
         {.kernel_h = 5, .kernel_w = 5, .pad_h = 2, .pad_w = 2, .groups = 9},
         {2, 9, 14, 14, 18},
         2},
        {"7x7 s2 p3, 7 channels, 57x57, x off 16 bytes, rows padded",
         {.kernel_h = 7, .kernel_w = 7, .stride_h = 2, .stride_w = 2, .pad_h = 3, .pad_w = 3, .groups = 7},
         {2, 7, 57, 57, 7},
         3,
         1},
    };
    const int max_shared = Device::get(0).max_shared_bytes_per_block();
    for (const auto& t : test::configurations_to_test(DepthwiseTiles::configurations()))
        for (const auto& c : layers) {
            const Conv2dBnSiluDepthwiseForward op(t, c.attrs, depthwise_group(c.attrs, c.shape), max_shared);
            CAPTURE(op.kernel().id());
            CAPTURE(c.name);
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 1e-5);
        }
}

TEST_CASE("depthwise kernel on narrow groups: each output sums its group's planes, every configuration that fits") {
    auto grouped = [](int k, int stride, int pad, int groups) {
        return Conv2dAttrs{.kernel_h = k,
                           .kernel_w = k,
                           .stride_h = stride,
                           .stride_w = stride,
                           .pad_h = pad,
                           .pad_w = pad,
                           .groups = groups};
    };
    const std::vector<Case> layers = {
        {"g8 3x3 p1, 16 -> 32 (2 -> 4 a group), 14x14, B=3", grouped(3, 1, 1, 8), {3, 16, 14, 14, 32}},
        {"g4 3x3 s2 p1, 32 -> 32 (8 -> 8), 13x13, x off 4 bytes, rows padded",
         grouped(3, 2, 1, 4),
         {2, 32, 13, 13, 32},
         3,
         1},
        {"g2 5x5 p2, 64 -> 6 (32 -> 3), 9x11", grouped(5, 1, 2, 2), {1, 64, 9, 11, 6}},
        {"g16 1x1, 48 -> 16 (3 -> 1), 28x28, B=5", grouped(1, 1, 0, 16), {5, 48, 28, 28, 16}},
        {"g5 7x7 s2 p3, 20 -> 10 (4 -> 2), 57x57", grouped(7, 2, 3, 5), {1, 20, 57, 57, 10}},
    };
    const int max_shared = Device::get(0).max_shared_bytes_per_block();
    int runs = 0;
    for (const auto& c : layers)
        for (const auto& t : test::configurations_to_test(DepthwiseTiles::configurations())) {
            const DepthwiseGroup group = depthwise_group(c.attrs, c.shape);
            if (t.shared_bytes(c.attrs, group.in) > static_cast<unsigned>(max_shared)) continue;
            const Conv2dBnSiluDepthwiseForward op(t, c.attrs, group, max_shared);
            CAPTURE(op.kernel().id());
            CAPTURE(c.name);
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 1e-5);
            ++runs;
        }
    CHECK(runs >= 5);
}

namespace {

const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
const Conv2dAttrs k3s2{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
const Conv2dAttrs k5{.kernel_h = 5, .kernel_w = 5, .pad_h = 2, .pad_w = 2};
const Conv2dAttrs k7s2{.kernel_h = 7, .kernel_w = 7, .stride_h = 2, .stride_w = 2, .pad_h = 3, .pad_w = 3};

/// The device's traits where it is a 9.0 device (the Hopper kernels' sm_90a cubins load on no
/// other), else none, the skip said.
std::optional<DeviceTraits> hopper_or_skip() {
    const auto device = Device::get(0);
    if (device.arch() == Arch(9, 0)) return DeviceTraits::of(device);
    MESSAGE("the TMA + wgmma kernels run on 9.0 devices only (their sm_90a cubins load on no other): not on this one");
    return std::nullopt;
}

/// Every Hopper configuration of an implicit-GEMM op Op over `cases` against the reference. The
/// deepest pipelines leave no room for a large kernel's tap table: its constructor says so.
template <class Op>
void check_every_configuration(const std::vector<Case>& cases, const DeviceTraits& traits) {
    constexpr bool gathers = std::is_same_v<Op, Conv2dBnSiluGatherTmaForward>;
    for (const auto& t : test::configurations_to_test(Sm90Tiles::configurations()))
        for (const auto& c : cases) {
            CAPTURE(c.name);
            REQUIRE((gathers ? conv2d_gather_unsupported_reason(c.attrs, c.shape, traits)
                             : conv2d_tma_unsupported_reason(c.attrs, c.shape, traits))
                        .empty());
            if (t.shared_bytes() + detail::tma_policy_bytes(c.attrs, gathers) >
                static_cast<unsigned>(traits.max_shared_bytes)) {
                CHECK_THROWS_WITH_AS(Op(t, c.attrs, traits), doctest::Contains("tap table need"), UsageError);
                continue;
            }
            const Op op(t, c.attrs, traits);
            CAPTURE(op.kernel().id());
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
}

}  // namespace

TEST_CASE("the TMA + wgmma implicit GEMM (sm_90a): every configuration on ragged 3x3, 5x5 and 7x7 layers") {
    const auto traits = hopper_or_skip();
    if (!traits) return;
    // Every patch box width (32, 16, 8, 4 pixels), boxes inside the image (loads from columns
    // that are no 16-byte boundary) and past its edges, K steps spanning channels and a K tail,
    // channel counts no multiple of anything.
    const std::vector<Case> ragged = {
        {"3x3 24 -> 40, 12x12, B=2", k3, {2, 24, 12, 12, 40}},
        {"3x3 32 -> 48, 10x28 (not square), padded rows", k3, {2, 32, 10, 28, 48}, 4},
        {"3x3 8 -> 16, 8x8, B=37", k3, {37, 8, 8, 8, 16}},
        {"3x3 64 -> 64, 4x4, B=5 (half-empty boxes)", k3, {5, 64, 4, 4, 64}},
        {"3x3 20 -> 1000, 8x8", k3, {1, 20, 8, 8, 1000}},
        {"3x3 16 -> 24, 40x40: 5 boxes a row, 10 row groups", k3, {1, 16, 40, 40, 24}},
        {"3x3 64 -> 64, 56x56 (ResNet)", k3, {1, 64, 56, 56, 64}},
        {"3x3 s2 8 -> 16, 80x80 -> 40x40, B=2", k3s2, {2, 8, 80, 80, 16}},
        {"3x3 s2 16 -> 32, 160x160 -> 80x80 (YOLO)", k3s2, {1, 16, 160, 160, 32}},
        {"3x3 s2 16 -> 24, 24x24 -> 12x12, B=3", k3s2, {3, 16, 24, 24, 24}},
        {"3x3 s2 36 -> 255, 64x64 -> 32x32", k3s2, {1, 36, 64, 64, 255}},
        {"5x5 12 -> 200, 16x16", k5, {1, 12, 16, 16, 200}},
        {"7x7 s2 4 -> 64, 32x32 -> 16x16, B=2", k7s2, {2, 4, 32, 32, 64}},
        // Outputs TMA cannot write (rows of OW floats, or padded rows, no multiple of 16 bytes):
        // the kernel stores y itself.
        {"3x3 s2 64 -> 48, 28x28 -> 14x14 (y stored by the kernel)", k3s2, {2, 64, 28, 28, 48}},
        {"3x3 s2 16 -> 24, 20x20 -> 10x10, B=3 (y stored by the kernel)", k3s2, {3, 16, 20, 20, 24}},
        {"3x3 s2 36 -> 255, 52x52 -> 26x26 (y stored by the kernel)", k3s2, {1, 36, 52, 52, 255}},
        {"3x3 24 -> 40, 12x12, B=2, rows padded by 1 (y stored by the kernel)", k3, {2, 24, 12, 12, 40}, 1},
        // Image rows no multiple of 16 bytes: boxes of whole input rows, flattened — per plane
        // (H·W a multiple of 4) or across planes (7×7, 1×1) — masked on every side.
        {"3x3 24 -> 40, 14x14, B=2 (flattened rows)", k3, {2, 24, 14, 14, 40}},
        {"3x3 256 -> 255, 7x7, B=3, rows padded by 1 (rows across planes)", k3, {3, 256, 7, 7, 255}, 1},
        {"3x3 s2 64 -> 200, 14x14 -> 7x7 (y stored by the kernel)", k3s2, {2, 64, 14, 14, 200}},
        {"3x3 s2 16 -> 24, 10x10 -> 5x5, B=37", k3s2, {37, 16, 10, 10, 24}},
        {"3x3 20 -> 1000, 10x10", k3, {1, 20, 10, 10, 1000}},
        {"5x5 12 -> 24, 6x6, B=2", k5, {2, 12, 6, 6, 24}},
        {"7x7 s2 4 -> 64, 10x10 -> 5x5", k7s2, {1, 4, 10, 10, 64}},
        {"5x5 16 -> 24, 7x7, B=2 (across planes)", k5, {2, 16, 7, 7, 24}},
        {"3x3 8 -> 16, one pixel (M = 1)", k3, {1, 8, 1, 1, 16}},
    };
    check_every_configuration<Conv2dBnSiluTmaForward>(ragged, *traits);
    // An x off a 16-byte boundary breaks TMA's rule: the sm80 implicit GEMM runs the call, as right.
    const Conv2dBnSiluTmaForward op(Sm90Tiles::configurations().front(), k3, *traits);
    const OutputCheck fallback = run(op, {"3x3, x off 16 bytes (no TMA)", k3, {2, 24, 12, 12, 40}, 0, 1}, rng());
    CAPTURE(fallback.error);
    check(fallback, 2e-3);
}

TEST_CASE("the TMA + wgmma implicit GEMM on grouped layers (sm_90a): each tile in one group, every configuration") {
    const auto traits = hopper_or_skip();
    if (!traits) return;
    const Conv2dAttrs g2{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 2};
    const Conv2dAttrs g4s2{
        .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 4};
    const Conv2dAttrs g8{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 8};
    // Groups of 128 outputs take every tile; one policy each: patch boxes (12×12, and 20×20
    // strided), rows of one plane (14×14), rows across planes (7×7, K steps no multiple of the
    // tap table's period), y stored by the kernel (padded rows).
    const std::vector<Case> wide = {
        {"g2 3x3 64 -> 256, 12x12, B=3", g2, {3, 64, 12, 12, 256}},
        {"g4 3x3 s2 128 -> 512, 20x20 -> 10x10, B=2", g4s2, {2, 128, 20, 20, 512}},
        {"g2 3x3 64 -> 256, 14x14, B=2 (rows of a plane)", g2, {2, 64, 14, 14, 256}},
        {"g2 3x3 64 -> 256, 7x7, B=5, rows padded by 3 (rows across planes)", g2, {5, 64, 7, 7, 256}, 3},
    };
    // Every case here runs on the TMA kernel itself, not the sm80 fallback.
    const auto runs_itself = [](const TmaConvOp& op, const Case& c) {
        const auto [oh, ow] = conv2d_output_size(c.attrs, c.shape);
        const Shape x{std::size_t(c.shape.batch), std::size_t(c.shape.c_in), std::size_t(c.shape.height),
                      std::size_t(c.shape.width)};
        const Shape y{std::size_t(c.shape.batch), std::size_t(c.shape.c_out), std::size_t(oh), std::size_t(ow)};
        const Tensor in[] = {{test::fake(0x10000), x}};
        void* const params[] = {test::fake(0x20000), test::fake(0x30000), test::fake(0x40000)};
        return &op.op_for({in, params, test::fake(0x50000), y, oh * ow + c.row_padding}) == &op;
    };
    for (const auto& c : wide) {
        CAPTURE(c.name);
        CHECK(runs_itself(Conv2dBnSiluTmaForward({128, 128, 4, 8}, c.attrs, *traits), c));
    }
    check_every_configuration<Conv2dBnSiluTmaForward>(wide, *traits);
    // ResNeXt's groups of 32 channels, 8 of them, on the tiles of BLOCK_N = 32 (wider ones run
    // the sm80 kernel), split-K included: a cluster's blocks over one group's K.
    const std::vector<Case> resnext = {
        {"g8 3x3 256 -> 256, 14x14, B=3", g8, {3, 256, 14, 14, 256}},
        {"g8 3x3 256 -> 256, 7x7, B=4", g8, {4, 256, 7, 7, 256}},
        {"g8 3x3 256 -> 256, 8x8 (patch boxes), B=1", g8, {1, 256, 8, 8, 256}},
    };
    for (const auto& c : resnext)
        for (const Sm90Tiles& t : {Sm90Tiles{64, 32, 4, 8}, Sm90Tiles{128, 32, 6, 8}, Sm90Tiles{256, 32, 4, 8},
                                   Sm90Tiles{64, 32, 4, 8, 3}, Sm90Tiles{128, 32, 4, 8, 4}}) {
            const Conv2dBnSiluTmaForward op(t, c.attrs, *traits);
            CAPTURE(c.name);
            CAPTURE(op.kernel().id());
            CAPTURE(t.split_k);
            CHECK(runs_itself(op, c));
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
}

TEST_CASE("the TMA + wgmma 1x1 kernel (sm_90a): every configuration on ragged shapes, TMA-eligible ones") {
    const auto hopper = hopper_or_skip();
    if (!hopper) return;
    const DeviceTraits& traits = *hopper;
    // Pixel counts that are no multiple of a 32-pixel box or of a tile, channel counts that are
    // no multiple of a wgmma N or of K's 32, images that tiles run across, batch 37; and small
    // images in whole-image boxes (groups of images a warpgroup, rows of 8 or 4 floats, the last
    // group short, y stored by the kernel, padded rows), M = 1.
    const std::vector<Case> ragged = {
        {"channels 24 -> 40, 12x12 (4.5 boxes), B=2", {}, {2, 24, 12, 12, 40}},
        {"channels 200 -> 255, 14x14, padded rows", {}, {1, 200, 14, 14, 255}, 4},
        {"K = 4, N = 130, 8x8, B=3", {}, {3, 4, 8, 8, 130}},
        {"6x6 images, 64 -> 70, B=37: two boxes an image, tiles across images", {}, {37, 64, 6, 6, 70}},
        {"K = 520 (16 K steps and a tail), N = 1000, 28x28", {}, {1, 520, 28, 28, 1000}},
        {"whole images: 7x7, 2048 -> 512, B=3", {}, {3, 2048, 7, 7, 512}},
        {"whole images: 7x7, 40 -> 200, B=37, rows padded by 3", {}, {37, 40, 7, 7, 200}, 3},
        {"whole images: 5x5, 36 -> 255, B=5, rows of 4 floats", {}, {5, 36, 5, 5, 255}},
        {"whole images: 3x3, 20 -> 40, B=9, rows of 4 floats", {}, {9, 20, 3, 3, 40}},
        {"whole images: 2x2, K = 1000 -> N = 24, B=37 (16 a warpgroup)", {}, {37, 1000, 2, 2, 24}},
        {"whole images: 4x4, 64 -> 64, B=37 (4 a warpgroup)", {}, {37, 64, 4, 4, 64}},
        {"whole images: one pixel, 1000 -> 130, B=130 (64 a warpgroup)", {}, {130, 1000, 1, 1, 130}},
        {"whole images: one pixel, 64 -> 24, B=1 (M = 1)", {}, {1, 64, 1, 1, 24}},
    };
    for (const auto& t : test::configurations_to_test(Sm90Tiles::configurations())) {
        const Conv2dBnSiluGemmTmaForward op(t, traits);
        CAPTURE(op.kernel().id());
        for (const auto& c : ragged) {
            REQUIRE(conv2d_tma_unsupported_reason(c.attrs, c.shape, traits).empty());
            CAPTURE(c.name);
            const OutputCheck o = run(op, c, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
        // The same op again with a second set of buffers: its tensor maps are per pointer set.
        const OutputCheck again = run(op, ragged.front(), rng());
        check(again, 2e-3);
        // Rows padded to 145 floats break TMA's 16-byte stride rule: the call runs on the sm80
        // fallback, on this device, and is just as right.
        const Case padded{"12x12, rows padded by 1 (no TMA)", {}, {2, 24, 12, 12, 40}, 1};
        const OutputCheck fallback = run(op, padded, rng());
        CAPTURE(fallback.error);
        check(fallback, 2e-3);
    }
}

TEST_CASE("the wgmma implicit GEMM that gathers x (sm_90a): every configuration on the images TMA cannot box") {
    const auto traits = hopper_or_skip();
    if (!traits) return;
    // Widths and pixel counts no multiple of 4 (what TMA cannot box), columns running across
    // images, padded and odd row strides, x off a 16-byte boundary, K tails, M = 1, batch 37,
    // channel counts no multiple of anything; and one layer TMA could take as well.
    const std::vector<Case> ragged = {
        {"3x3 24 -> 40, 14x14, B=2", k3, {2, 24, 14, 14, 40}},
        {"3x3 256 -> 255, 7x7, B=3, rows padded by 1", k3, {3, 256, 7, 7, 255}, 1},
        {"3x3 s2 64 -> 200, 28x28 -> 14x14", k3s2, {2, 64, 28, 28, 200}},
        {"3x3 s2 36 -> 64, 13x13 -> 7x7, B=37", k3s2, {37, 36, 13, 13, 64}},
        {"3x3 20 -> 1000, 10x10, x off 16 bytes", k3, {1, 20, 10, 10, 1000}, 0, 1},
        {"5x5 12 -> 24, 11x9", k5, {1, 12, 11, 9, 24}},
        {"7x7 s2 4 -> 64, 30x30 -> 15x15, B=2", k7s2, {2, 4, 30, 30, 64}},
        {"1x1 2048 -> 512, 7x7, B=3", {}, {3, 2048, 7, 7, 512}},
        {"1x1 40 -> 24, one pixel (M = 1)", {}, {1, 40, 1, 1, 24}},
        {"1x1 1000 -> 130, 5x5, B=37, rows padded by 3", {}, {37, 1000, 5, 5, 130}, 3},
        {"1x1 4 -> 17, 9x9, B=2, x off 8 bytes", {}, {2, 4, 9, 9, 17}, 0, 2},
        {"3x3 64 -> 64, 56x56 (TMA could box it too)", k3, {1, 64, 56, 56, 64}},
    };
    check_every_configuration<Conv2dBnSiluGatherTmaForward>(ragged, *traits);
}

namespace {

/// `op` on a grid of `clusters` clusters, fewer than its tiles: each cluster computes several
/// tiles in turn, so its blocks hand partial tiles over more than once.
class FewerClusters final : public RuntimeOp {
public:
    FewerClusters(const TmaConvOp& op, unsigned clusters) : op_(op), clusters_(clusters) {}
    [[nodiscard]] std::size_t n_activation_inputs() const override { return op_.n_activation_inputs(); }
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override { op_.pack_args(call, visitor); }
    [[nodiscard]] Dims grid(ShapeView) const override { return {clusters_ * op_.cluster_for_launch(0)[0], 1, 1}; }
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t i) const override { return op_.kernel_for_launch(i); }
    [[nodiscard]] unsigned shared_bytes_for_launch(std::size_t i) const override {
        return op_.shared_bytes_for_launch(i);
    }
    [[nodiscard]] Dims cluster_for_launch(std::size_t i) const override { return op_.cluster_for_launch(i); }
    [[nodiscard]] std::size_t forward_output_row_elems(ShapeView y) const override {
        return op_.forward_output_row_elems(y);  // rows of OH·OW, not the default last dimension
    }

private:
    const TmaConvOp& op_;
    unsigned clusters_;
};

}  // namespace

TEST_CASE("split-K on the Hopper kernels (sm_90a): clusters of 2, 3, 4 and 8 blocks, empty K shares, tiles in turn") {
    const auto hopper = hopper_or_skip();
    if (!hopper) return;
    const DeviceTraits& traits = *hopper;
    struct Layer {
        Case c;
        bool gathers;
    };
    // Each of the three kernels; K steps fewer than the blocks (blocks with no K at all), K tails,
    // ragged channels and pixels, y stored by TMA and by the kernel itself.
    const std::vector<Layer> layers = {
        {{"1x1 1000 -> 24, 2x2, B=37 (whole images)", {}, {37, 1000, 2, 2, 24}}, false},
        {{"1x1 2048 -> 512, 7x7, B=3 (whole images)", {}, {3, 2048, 7, 7, 512}}, false},
        {{"1x1 1000 -> 130, one pixel, B=130 (whole images)", {}, {130, 1000, 1, 1, 130}}, false},
        {{"1x1 4 -> 130, 8x8, B=3 (one K step)", {}, {3, 4, 8, 8, 130}}, false},
        {{"1x1 520 -> 1000, 28x28", {}, {1, 520, 28, 28, 1000}}, false},
        {{"3x3 24 -> 40, 12x12, B=2", k3, {2, 24, 12, 12, 40}}, false},
        {{"3x3 s2 64 -> 48, 28x28 -> 14x14 (y stored by the kernel)", k3s2, {2, 64, 28, 28, 48}}, false},
        {{"3x3 s2 64 -> 200, 14x14 -> 7x7 (flattened rows)", k3s2, {2, 64, 14, 14, 200}}, false},
        {{"3x3 256 -> 255, 7x7, B=3 (rows across planes)", k3, {3, 256, 7, 7, 255}}, false},
        {{"3x3 256 -> 255, 7x7, B=3, rows padded by 1", k3, {3, 256, 7, 7, 255}, 1}, true},
        {{"1x1 2048 -> 512, 7x7, B=3", {}, {3, 2048, 7, 7, 512}}, true},
        {{"1x1 40 -> 24, one pixel (M = 1)", {}, {1, 40, 1, 1, 24}}, true},
        {{"3x3 s2 36 -> 64, 13x13 -> 7x7, B=37", k3s2, {37, 36, 13, 13, 64}}, true},
    };
    constexpr int splits[] = {2, 3, 4, 8};
    for (const Sm90Tiles tiles : {Sm90Tiles{128, 128, 5, 8}, Sm90Tiles{64, 64, 8, 8}, Sm90Tiles{256, 32, 5, 8}})
        for (int split : test::configurations_to_test(std::span<const int>(splits)))
            for (const auto& [c, gathers] : layers) {
                Sm90Tiles t = tiles;
                t.split_k = split;
                const auto op = detail::make_tma_conv(c.attrs, t, traits, gathers);
                CAPTURE(op->kernel().id());
                CAPTURE(split);
                CAPTURE(c.name);
                const OutputCheck o = run(*op, c, rng());
                CAPTURE(o.error);
                check(o, 2e-3);
                const OutputCheck in_turn = run(FewerClusters(*op, 3), c, rng());
                CAPTURE(in_turn.error);
                check(in_turn, 2e-3);
            }
}

namespace {

/// Runs the channels-last op on the case: the layer's x and W permuted to NHWC and [C_OUT, KH,
/// KW, C_IN], y NHWC with pixel rows `row_padding` floats longer than C_OUT, NaN-poisoned with a
/// guard after it, compared with the float64 reference.
OutputCheck run_nhwc(const RuntimeOp& op, const Case& c, std::mt19937_64& rng) {
    const auto device = Device::get(0);
    Stream stream(device);
    const Layer layer(c, rng);
    const auto& s = c.shape;
    const auto& a = c.attrs;
    const auto [oh, ow] = conv2d_output_size(a, s);
    const auto n = [](int v) { return static_cast<std::size_t>(v); };
    std::vector<float> x(c.x_offset, 0.0f);
    const auto x_nhwc = to_channels_last<float>(layer.x, n(s.batch), n(s.c_in), n(s.height) * n(s.width));
    x.insert(x.end(), x_nhwc.begin(), x_nhwc.end());
    const DeviceBuffer dx = upload(device, x),
                       dw = upload(device, to_channels_last<float>(layer.w, n(s.c_out), n(s.c_in),
                                                                   n(a.kernel_h) * n(a.kernel_w))),
                       dscale = upload(device, layer.scale), dshift = upload(device, layer.shift);
    const Shape x_shape{n(s.batch), n(s.height), n(s.width), n(s.c_in)};
    const Shape y_shape{n(s.batch), n(oh), n(ow), n(s.c_out)};
    const Tensor inputs[] = {{dx.as<float>() + c.x_offset, x_shape}};
    void* const params[] = {dw.as<float>(), dscale.as<float>(), dshift.as<float>()};
    const auto ref = to_channels_last<double>(
        conv2d_bn_silu_reference(layer.x, layer.w, layer.scale, layer.shift, a, s), n(s.batch), n(s.c_out),
        n(oh) * n(ow));
    return checked_forward(op, Runtime::global(), stream, inputs, params, y_shape, ref, any_difference, c.row_padding);
}

/// Layers for the channels-last kernel: tiles across rows and images, the last past the batch;
/// C_IN no multiple of 32 (a zero-filled channel tail in every tap), odd C_OUT and row strides
/// (y stored by the kernel), padded rows, non-square kernels and unequal strides (the corners
/// and steps per axis), M = 1.
std::vector<Case> nhwc_ragged_cases() {
    const Conv2dAttrs k1{}, k1x3{.kernel_h = 1, .kernel_w = 3, .pad_h = 0, .pad_w = 1};
    const Conv2dAttrs k3x1s2{.kernel_h = 3, .kernel_w = 1, .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 0};
    return {
        {"3x3 24 -> 40, 12x12, B=2", k3, {2, 24, 12, 12, 40}},
        {"3x3 36 -> 255, 14x14, B=3 (y stored by the kernel)", k3, {3, 36, 14, 14, 255}},
        {"3x3 256 -> 256, 7x7, B=5", k3, {5, 256, 7, 7, 256}},
        {"3x3 s2 64 -> 200, 14x14 -> 7x7, B=37", k3s2, {37, 64, 14, 14, 200}},
        {"3x3 s2 16 -> 32, 80x80 -> 40x40", k3s2, {1, 16, 80, 80, 32}},
        {"5x5 12 -> 24, 10x10, B=2", k5, {2, 12, 10, 10, 24}},
        {"7x7 s2 4 -> 64, 32x32 -> 16x16, B=2", k7s2, {2, 4, 32, 32, 64}},
        {"1x3 40 -> 1000, 9x13 (one padding per axis)", k1x3, {1, 40, 9, 13, 1000}},
        {"3x1 s2x1 20 -> 48, 11x6 (one stride per axis)", k3x1s2, {2, 20, 11, 6, 48}},
        {"1x1 520 -> 130, 28x28, pixel rows padded by 2", k1, {1, 520, 28, 28, 130}, 2},
        {"1x1 64 -> 24, 5x5, B=37", k1, {37, 64, 5, 5, 24}},
        {"3x3 8 -> 16, one pixel (M = 1)", k3, {1, 8, 1, 1, 16}},
    };
}

}  // namespace

TEST_CASE("the channels-last TMA + wgmma implicit GEMM (sm_90a): every configuration, im2col boxes on ragged layers") {
    const auto hopper = hopper_or_skip();
    if (!hopper) return;
    const DeviceTraits& traits = *hopper;
    const std::vector<Case> ragged = nhwc_ragged_cases();
    for (const auto& t : test::configurations_to_test(Sm90Tiles::configurations()))
        for (const auto& c : ragged) {
            CAPTURE(c.name);
            REQUIRE(conv2d_nhwc_tma_unsupported_reason(c.attrs, c.shape, traits).empty());
            const Conv2dBnSiluNhwcTmaForward op(t, c.attrs, traits);
            CAPTURE(op.kernel().id());
            const OutputCheck o = run_nhwc(op, c, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
    // What TMA cannot take is refused with the reason: there is no sm80 kernel for this layout.
    const Conv2dBnSiluNhwcTmaForward op(Sm90Tiles::configurations().front(), ragged[0].attrs, traits);
    CHECK_THROWS_WITH_AS(run_nhwc(op, {"x off 16 bytes", ragged[0].attrs, {2, 24, 12, 12, 40}, 0, 1}, rng()),
                         doctest::Contains("not 16-byte aligned"), UsageError);
}

// A case of its own: racecheck reports block 0's reads of the other blocks' partial tiles
// (docs/RELIABILITY.md), and the unsplit case above stays clean under it.
TEST_CASE("split-K on the channels-last kernel (sm_90a): clusters of 2, 4 and 8, K steps fewer than the blocks") {
    const auto hopper = hopper_or_skip();
    if (!hopper) return;
    const DeviceTraits& traits = *hopper;
    const std::vector<Case> ragged = nhwc_ragged_cases();
    for (int split : {2, 4, 8})
        for (const auto& c : {ragged[1], ragged[3], ragged[11]}) {
            const Conv2dBnSiluNhwcTmaForward op({128, 64, 6, 8, split}, c.attrs, traits);
            CAPTURE(c.name);
            CAPTURE(split);
            const OutputCheck o = run_nhwc(op, c, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
}

namespace {

/// Runs `op` on the case with x and y as channel slices of wider tensors, `extra` channels before
/// and after each (what a zero-copy concat hands a conv: images further apart than their own
/// size), every element of the wide y NaN first. Compares the slice with the float64 reference;
/// guard_written counts the elements of the wide y outside the slice that changed.
OutputCheck run_in_slices(const RuntimeOp& op, const Case& c, int extra, std::mt19937_64& rng) {
    const auto device = Device::get(0);
    Stream stream(device);
    const Layer layer(c, rng);
    const auto& s = c.shape;
    const auto [oh, ow] = conv2d_output_size(c.attrs, s);
    const std::size_t plane = 1ULL * s.height * s.width, out_plane = 1ULL * oh * ow,
                      x_image = (s.c_in + 2ULL * extra) * plane, y_image = (s.c_out + 2ULL * extra) * out_plane;
    // The wide x: random around the slice, which holds the layer's x.
    std::vector<float> wide_x(s.batch * x_image);
    std::uniform_real_distribution<float> unit(-1, 1);
    for (auto& v : wide_x) v = unit(rng);
    for (int b = 0; b < s.batch; ++b)
        std::copy_n(layer.x.begin() + b * s.c_in * plane, s.c_in * plane, wide_x.begin() + b * x_image + extra * plane);
    const DeviceBuffer dx = upload(device, wide_x), dw = upload(device, layer.w), dscale = upload(device, layer.scale),
                       dshift = upload(device, layer.shift);
    DeviceBuffer dy(device, s.batch * y_image * sizeof(float));
    dy.fill(0xff);  // NaN
    const Shape x_shape{std::size_t(s.batch), std::size_t(s.c_in), std::size_t(s.height), std::size_t(s.width)};
    const Shape y_shape{std::size_t(s.batch), std::size_t(s.c_out), std::size_t(oh), std::size_t(ow)};
    const Tensor inputs[] = {{dx.as<float>() + extra * plane, x_shape, x_image}};
    void* const params[] = {dw.as<float>(), dscale.as<float>(), dshift.as<float>()};
    op.forward(Runtime::global(), stream,
               {inputs, params, dy.as<float>() + extra * out_plane, y_shape, oh * ow, y_image});
    stream.synchronize();
    std::vector<float> wide_y(s.batch * y_image), y;
    dy.download(std::span<float>(wide_y));
    std::size_t outside = 0;
    for (int b = 0; b < s.batch; ++b)
        for (std::size_t i = 0; i < y_image; ++i) {
            const float v = wide_y[b * y_image + i];
            const bool inside = i >= extra * out_plane && i < (extra + s.c_out) * out_plane;
            if (inside) y.push_back(v);
            else outside += !std::isnan(v);
        }
    const auto ref = conv2d_bn_silu_reference(layer.x, layer.w, layer.scale, layer.shift, c.attrs, s);
    OutputCheck o = check_output(y, ref, {y.size() / out_plane, out_plane, out_plane, 0}, any_difference);
    o.guard_written = outside;
    return o;
}

}  // namespace

TEST_CASE("the tensor-core convs read and write channel slices at an image stride (zero-copy concat)") {
    std::vector<std::pair<std::shared_ptr<const RuntimeOp>, Case>> runs = {
        {std::make_shared<Conv2dBnSiluGemmForward>(64, 32, 16, 8), {"sm80 1x1, 12x12, B=3", {}, {3, 24, 12, 12, 40}}},
        {std::make_shared<Conv2dBnSiluGemmForward>(64, 32, 16, 8), {"sm80 1x1, 7x7, B=2", {}, {2, 67, 7, 7, 45}}},
        {std::make_shared<Conv2dBnSiluForward>(GemmTiles{64, 64, 32, 8}, k3),
         {"sm80 3x3, B=3", k3, {3, 24, 12, 12, 40}}},
    };
    if (const auto hopper = hopper_or_skip()) {
        const Sm90Tiles t = Sm90Tiles::configurations().front();
        const auto tma = [&](const Conv2dAttrs& a) { return std::make_shared<Conv2dBnSiluTmaForward>(t, a, *hopper); };
        runs.push_back(
            {std::make_shared<Conv2dBnSiluGemmTmaForward>(t, *hopper), {"1x1 boxes", {}, {2, 24, 12, 12, 40}}});
        runs.push_back(
            {std::make_shared<Conv2dBnSiluGemmTmaForward>(t, *hopper), {"1x1 whole images", {}, {5, 36, 5, 5, 255}}});
        runs.push_back({tma(k3), {"3x3 tap boxes, y by TMA", k3, {2, 24, 12, 12, 40}}});
        runs.push_back({tma(k3s2), {"3x3 s2, y stored by the kernel", k3s2, {2, 64, 28, 28, 48}}});
        runs.push_back({tma(k3), {"3x3 flattened rows", k3, {2, 24, 14, 14, 40}}});
        runs.push_back({tma(k3), {"3x3 rows across planes", k3, {3, 64, 7, 7, 40}}});
        runs.push_back({std::make_shared<Conv2dBnSiluGatherTmaForward>(t, k3, *hopper),
                        {"3x3 gathered, 7x7", k3, {2, 24, 7, 7, 40}}});
    }
    for (const auto& [op, c] : runs)
        for (int extra : {1, 3}) {
            CAPTURE(c.name);
            CAPTURE(extra);
            const OutputCheck o = run_in_slices(*op, c, extra, rng());
            CAPTURE(o.error);
            check(o, 2e-3);
        }
}
