// The direct conv op on the CPU: shapes, grid, argument order, tile and attribute rules.
#include <doctest/doctest.h>

#include <kjit/conv.hpp>

#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::error_of;
using test::fake;
using test::Recorder;

TEST_CASE("direct op: shapes, output size, grid and argument order") {
    const Conv2dAttrs a{
        .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 4};
    const Conv2dShape s{2, 16, 15, 17, 24};
    const Conv2dBnSiluDirectForward op(32, 16, a, s);
    CHECK(op.kernel().id() == "conv2d_bn_silu_direct_forward__f32__32__16");
    CHECK(op.block() == Dims{32, 1, 1});
    const Shape x{2, 16, 15, 17};
    const ShapeView inputs[] = {x};
    const Shape resolved{2, 24, 0, 0};
    const Shape y = op.compute_concrete_output_shape(inputs, resolved);
    CHECK(y == Shape{2, 24, 8, 9});
    CHECK(op.param_shapes(inputs, y) == std::vector<Shape>{{24, 4, 3, 3}, {24}, {24}});
    CHECK(op.forward_output_row_elems(y) == 72);
    CHECK(op.grid(y) == Dims{1, 8, 2});
    CHECK(op.step_channels() == 4);  // all of a group's 4 input channels in one step
    Recorder r;
    const Tensor in[] = {{fake(0x100), x}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    op.pack_args({in, params, fake(0x500), y, 80}, r);
    REQUIRE(r.args.size() == 19);
    const std::int64_t expected[] = {2, 16, 15, 17, 24, 8, 9, 3, 3, 2, 1, 4, 80, 4};
    for (std::size_t k = 0; k < 14; ++k) CHECK(r.i(5 + k) == expected[k]);
    ArgPack pack(op.kernel().params(), op.kernel().id());
    op.pack_args({in, params, fake(0x500), y, 80}, pack);
    pack.check_complete();
}
TEST_CASE("direct constants and attributes are validated") {
    const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
    const Conv2dShape s{1, 8, 8, 8, 8};
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(0, 32, k3, s); }).find("must be positive") != std::string::npos);
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(18, 32, k3, s); }).find("multiples of 4") != std::string::npos);
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(16, 16, k3, s); }).find("multiple of 32 between 32 and 1024") !=
          std::string::npos);
    Conv2dAttrs dilated = k3;
    dilated.dilation_h = 2;
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(32, 32, dilated, s); }).find("dilation 2x1 is not supported") !=
          std::string::npos);
    Conv2dAttrs uneven = k3;
    uneven.stride_w = 2;
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(32, 32, uneven, s); }).find("one stride") != std::string::npos);
    Conv2dAttrs grouped = k3;
    grouped.groups = 3;
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(32, 32, grouped, s); }).find("must divide") != std::string::npos);
    const Conv2dAttrs huge{.kernel_h = 31, .kernel_w = 31, .pad_h = 15, .pad_w = 15};
    CHECK(error_of([&] {
              Conv2dBnSiluDirectForward(64, 64, huge, {1, 8, 64, 64, 64}, 48 * 1024);
          }).find("Use smaller tiles") != std::string::npos);
}
