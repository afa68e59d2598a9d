// Dispatch: which kernel and tiles a layer gets.
#include <doctest/doctest.h>

#include <kjit/conv.hpp>

#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::error_of;
using test::fake;
using test::Recorder;

TEST_CASE("dispatch: 1x1 GEMM, implicit GEMM for wide groups, direct for depthwise, errors for the rest") {
    const DeviceTraits h200{132, 232448, true};
    auto kernel = [&](const Conv2dAttrs& a, const Conv2dShape& s) {
        return dispatch_conv2d_bn_silu(a, s, h200)->kernel_for_launch(0).name();
    };
    const Conv2dShape s{8, 64, 28, 28, 128};
    CHECK(kernel({}, s) == "conv2d_bn_silu_gemm_forward");
    CHECK(kernel({.stride_h = 2, .stride_w = 2}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.pad_h = 1, .pad_w = 1}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.groups = 2}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 64}, {8, 64, 28, 28, 64}) ==
          "conv2d_bn_silu_direct_forward");  // depthwise
    CHECK(kernel({.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 16}, s) ==
          "conv2d_bn_silu_direct_forward");  // 4 input channels per group
    // Unequal strides or paddings: no kernel takes them, and dispatch says so.
    CHECK(error_of([&] {
              (void)kernel({.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 1}, s);
          }).find("one stride and one padding") != std::string::npos);
    CHECK(error_of([&] {
              (void)dispatch_conv2d_bn_silu({.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 2}, s, h200);
          }).find("one stride") != std::string::npos);
    CHECK(error_of([&] {
              (void)dispatch_conv2d_bn_silu({.dilation_h = 2, .dilation_w = 2}, s, h200);
          }).find("dilation") != std::string::npos);
    CHECK(error_of([&] { (void)dispatch_conv2d_bn_silu({.groups = 3}, s, h200); }).find("must divide") !=
          std::string::npos);
    CHECK(error_of([&] {
              (void)dispatch_conv2d_bn_silu({.kernel_h = 40, .kernel_w = 40}, s, h200);
          }).find("does not fit") != std::string::npos);
    // Small problems get small tiles (enough blocks for the device); big ones big tiles.
    auto gemm = [&](const Conv2dShape& shape) {
        auto op = dispatch_conv2d_bn_silu({}, shape, h200);
        auto* g = dynamic_cast<Conv2dBnSiluGemmForward*>(op.get());
        REQUIRE(g != nullptr);
        return GemmTiles{g->tiles().block_m, g->tiles().block_n, g->tiles().block_k, g->tiles().group_m};
    };
    const auto small = gemm({1, 2048, 7, 7, 512});
    const auto big = gemm({32, 256, 56, 56, 64});
    CHECK(small.block_m * small.block_n < big.block_m * big.block_n);
    // Deep layers with few tiles are split over K on devices with clusters, never elsewhere.
    auto split_of = [&](const Conv2dShape& shape, const DeviceTraits& d) {
        auto op = dispatch_conv2d_bn_silu({}, shape, d);
        return dynamic_cast<Conv2dBnSiluGemmForward*>(op.get())->split_k();
    };
    CHECK(split_of({1, 2048, 7, 7, 512}, h200) > 1);
    CHECK(split_of({1, 2048, 7, 7, 512}, {132, 232448, false}) == 1);
    CHECK(split_of({32, 64, 56, 56, 256}, h200) == 1);
    // A device with little shared memory only gets configurations that fit it.
    const auto tight = dispatch_conv2d_bn_silu({}, {32, 256, 56, 56, 256}, {132, 48 * 1024, true});
    CHECK(tight->shared_bytes_for_launch(0) <= 48u * 1024);
}

TEST_CASE("device traits are stated in full: no count may be zero or negative") {
    CHECK_THROWS_WITH_AS(DeviceTraits(0, 232448, true), doctest::Contains("must be positive"), UsageError);
    CHECK_THROWS_AS(DeviceTraits(132, -1, true), UsageError);
    const DeviceTraits h100(114, 232448, true);
    CHECK(h100.multiprocessors == 114);
}
