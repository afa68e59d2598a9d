// The depthwise conv op on the CPU: its kernel's constants, window, grid, argument order, tile
// and attribute rules, configuration text and dispatch's choice.
#include <doctest/doctest.h>

#include <set>

#include <kjit/conv.hpp>

#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::error_of;
using test::fake;
using test::Recorder;

namespace {
const DeviceTraits h200{132, 232448, Arch(9, 0)};
const Conv2dAttrs dw3s2{
    .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 6};
}  // namespace

TEST_CASE("depthwise op: filter and tiles as kernel constants, its window, grid and argument order") {
    const Conv2dBnSiluDepthwiseForward op({16, 32, 2, 128}, dw3s2);
    CHECK(op.kernel().id() == "conv2d_bn_silu_depthwise_forward__f32__3__3__2__1__16__32__2__128__2__1__1__true");
    CHECK(op.block() == Dims{128, 1, 1});
    // Per plane 33 input rows ((16 − 1)·2 + 3) of 68 floats: the window's (32 − 1)·2 + 3 = 65
    // columns start 3 floats into their 16-byte chunk (padding 1), rounded up to whole chunks.
    CHECK(op.shared_bytes_for_launch(0) == 4u * 2 * 33 * 68);
    const Shape x{5, 6, 27, 31};  // 5 images of 6 channels, multiplier 2
    const ShapeView inputs[] = {x};
    const Shape y = op.compute_concrete_output_shape(inputs, Shape{5, 12, 0, 0});
    CHECK(y == Shape{5, 12, 14, 16});
    CHECK(op.param_shapes(inputs, y) == std::vector<Shape>{{12, 1, 3, 3}, {12}, {12}});
    CHECK(op.grid(y) == Dims{15, 1, 1});  // 30 planes two a block, one 16 × 32 tile each
    Recorder r;
    const Tensor in[] = {{fake(0x100), x}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    op.pack_args({in, params, fake(0x500), y, 228}, r);
    REQUIRE(r.args.size() == 14);
    CHECK(r.i(5) == 30);  // planes: B·C_IN
    const std::int64_t expected[] = {6, 27, 31, 14, 16, 2, 228};
    for (std::size_t k = 0; k < 7; ++k) CHECK(r.i(6 + k) == expected[k]);
    // W = 31: x's rows take 4-byte copies; y's rows (16 outputs, 228 apart) 16-byte stores.
    CHECK(r.i(13) == (0 | 2 << 2));
    // Unstaged, the same tiles take no shared memory: each thread reads its rows from x.
    const Conv2dBnSiluDepthwiseForward unstaged({16, 32, 2, 128, 2, false}, dw3s2);
    CHECK(unstaged.kernel().id().ends_with("__1__1__false"));
    CHECK(unstaged.shared_bytes_for_launch(0) == 0);
    CHECK(unstaged.grid(y) == op.grid(y));
    ArgPack pack(op.kernel().params(), op.kernel().id());
    op.pack_args({in, params, fake(0x500), y, 228}, pack);
    pack.check_complete();
    // The access widths for x at `x_at` of shape `x_shape` and y at `y_at`, rows `stride` apart:
    // log2 of x's copy in floats, and of y's store two bits up.
    const auto vectors = [&](std::uintptr_t x_at, const Shape& x_shape, std::uintptr_t y_at, int stride) {
        const Shape y_shape = op.compute_concrete_output_shape(std::vector<ShapeView>{x_shape}, Shape{5, 12, 0, 0});
        const Tensor input[] = {{fake(x_at), x_shape}};
        Recorder rec;
        op.pack_args({input, params, fake(y_at), y_shape, stride}, rec);
        return rec.i(13);
    };
    const Shape x4{5, 6, 28, 32};                           // W a multiple of 4; y rows 16 wide
    CHECK(vectors(0x100, x4, 0x504, 224) == 2);             // x 16-byte copies; y off 8 bytes: 4-byte stores
    CHECK(vectors(0x100, x4, 0x508, 226) == (2 | 1 << 2));  // y 8 bytes off, rows 226 apart: 8-byte stores
    CHECK(vectors(0x108, x4, 0x500, 224) == (1 | 2 << 2));  // x 8 bytes off: 8-byte copies
    // W = 14 (even, not a multiple of 4): 8-byte copies from a 16-byte aligned x; y's rows of 7
    // outputs: 4-byte stores.
    CHECK(vectors(0x100, Shape{5, 6, 14, 14}, 0x500, 56) == 1);
}

TEST_CASE("depthwise tiles and attributes are validated, naming the rule") {
    const Conv2dAttrs dw{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 8};
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({0, 32, 1, 128}, dw);
          }).find("must be positive") != std::string::npos);
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({15, 32, 1, 128}, dw);
          }).find("BLOCK_H = 15 must be a multiple of STEP_ROWS = 2") != std::string::npos);
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({16, 32, 1, 128, 3}, dw);
          }).find("a thread's step is 1, 2 or 4 output rows") != std::string::npos);
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({12, 8, 1, 128}, dw);  // 128 threads over 2 columns × 6 steps
          }).find("leave some without work") != std::string::npos);
    // Threads beyond the row steps share the outputs: 16 threads a plane over 2 columns × 2 steps
    // of 4 rows make 4 lanes.
    CHECK(DepthwiseTiles{8, 8, 8, 128, 4}.output_lanes() == 4);
    CHECK(DepthwiseTiles{16, 32, 2, 128}.output_lanes() == 1);
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({16, 30, 1, 128}, dw);
          }).find("multiple of 4") != std::string::npos);
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({16, 32, 1, 100}, dw);
          }).find("multiple of 32") != std::string::npos);
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({16, 64, 3, 128}, dw);
          }).find("BLOCK_W / 4 = 16") != std::string::npos);

    Conv2dAttrs dilated = dw;
    dilated.dilation_h = 2;
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({16, 32, 2, 128}, dilated);
          }).find("dilation") != std::string::npos);
    Conv2dAttrs uneven = dw;
    uneven.pad_w = 2;
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({16, 32, 2, 128}, uneven);
          }).find("one stride and one padding") != std::string::npos);
    const Conv2dAttrs huge{.kernel_h = 31, .kernel_w = 31, .pad_h = 15, .pad_w = 15, .groups = 8};
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({32, 64, 1, 128}, huge, {}, 16 * 1024);
          }).find("Use smaller tiles") != std::string::npos);
    CHECK(error_of([&] {
              Conv2dBnSiluDepthwiseForward({16, 32, 2, 128}, dw, {.in = 33, .out = 1});
          }).find("groups of 1 to 32 input channels") != std::string::npos);
    // A call whose groups are not the op's is refused at packing.
    const Conv2dBnSiluDepthwiseForward op({16, 32, 2, 128}, dw);
    const Shape x{1, 16, 16, 16}, y{1, 16, 16, 16};  // 8 groups of 2 channels
    const Tensor in[] = {{fake(0x100), x}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    Recorder r;
    CHECK(error_of([&] {
              op.pack_args({in, params, fake(0x500), y, 256}, r);
          }).find("takes groups of 1 input channels and a multiple of 1 outputs; this call has 8 groups, 16 -> 16") !=
          std::string::npos);
    // Groups of 2 -> 4 channels: 4 outputs a step (4 filters of 9 taps in registers); a call with
    // 2 outputs a group is refused.
    const Conv2dBnSiluDepthwiseForward grouped({16, 32, 2, 128}, dw, {.in = 2, .out = 4});
    CHECK(grouped.kernel().id().ends_with("__2__4__true"));
    CHECK(grouped.shared_bytes_for_launch(0) == 2 * op.shared_bytes_for_launch(0));
    Recorder rg;
    grouped.pack_args({in, params, fake(0x500), Shape{1, 32, 16, 16}, 256}, rg);
    CHECK(rg.i(11) == 4);                                         // outputs a group
    CHECK(grouped.grid(Shape{3, 32, 16, 16}) == Dims{12, 1, 1});  // 3 images × 8 groups, 2 a block
    CHECK(error_of([&] {
              grouped.pack_args({in, params, fake(0x500), y, 256}, r);
          }).find("a multiple of 4 outputs") != std::string::npos);
    // A 7x7 filter's 49 taps: one output a step.
    CHECK(Conv2dBnSiluDepthwiseForward({16, 32, 2, 128}, {.kernel_h = 7, .kernel_w = 7, .pad_h = 3, .pad_w = 3},
                                       {.in = 2, .out = 4})
              .kernel()
              .id()
              .ends_with("__2__1__true"));
}

TEST_CASE("depthwise configurations: each valid, distinct, and each fits a 3x3 and a 7x7 window in 48 KB") {
    const auto list = DepthwiseTiles::configurations();
    CHECK(list.size() >= 12);
    std::set<std::tuple<int, int, int, int, int, bool>> seen;
    std::set<int> steps, unstaged_steps;
    for (const auto& t : list) {
        CAPTURE(t.block_h);
        CAPTURE(t.block_w);
        CAPTURE(t.planes);
        CAPTURE(t.threads);
        CAPTURE(t.step_rows);
        CAPTURE(t.staged);
        CHECK_NOTHROW(t.validate());
        CHECK(seen.insert({t.block_h, t.block_w, t.planes, t.threads, t.step_rows, t.staged}).second);
        (t.staged ? steps : unstaged_steps).insert(t.step_rows);
        CHECK(t.shared_bytes({.kernel_h = 7, .kernel_w = 7, .pad_h = 3, .pad_w = 3}) <= 48u * 1024);
        if (!t.staged) CHECK(t.shared_bytes({.kernel_h = 7, .kernel_w = 7, .pad_h = 3, .pad_w = 3}) == 0);
    }
    CHECK(steps == std::set{2, 4});  // kjit tune times both step heights
    CHECK(unstaged_steps == std::set{1, 2});
}

TEST_CASE("depthwise: dispatch's pick, the configuration text both ways, and what it is told apart from") {
    const Conv2dAttrs dw{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 96};
    CHECK(is_depthwise(dw, {1, 96, 56, 56, 96}));
    CHECK(is_depthwise(dw, {1, 96, 56, 56, 192}));         // multiplier 2
    CHECK_FALSE(is_depthwise(dw, {1, 192, 56, 56, 192}));  // 2 input channels per group
    // Small images: many planes a block; large ones: wide tiles.
    auto pick = [&](const Conv2dShape& s) {
        const auto op = dispatch_conv2d_bn_silu(dw, s, h200);
        const auto* d = dynamic_cast<const Conv2dBnSiluDepthwiseForward*>(op.get());
        REQUIRE(d != nullptr);
        CHECK_FALSE(conv2d_rounds_to_tf32(*op));
        const std::string text = conv2d_bn_silu_config(*op);
        CHECK(conv2d_bn_silu_config(*make_conv2d_bn_silu(dw, s, text, h200)) == text);
        return d->tiles();
    };
    const DepthwiseTiles small = pick({32, 96, 7, 7, 96}), large = pick({32, 96, 112, 112, 96});
    CHECK(small.planes > large.planes);
    CHECK(small.block_w < large.block_w);
    // Every candidate kjit tune times reads back as written.
    const Conv2dShape s{8, 96, 28, 28, 96};
    const auto configs = conv2d_bn_silu_candidates(dw, s, h200);
    CHECK(configs.size() == DepthwiseTiles::configurations().size());
    for (const auto& c : configs) CHECK(conv2d_bn_silu_config(*make_conv2d_bn_silu(dw, s, c, h200)) == c);
    CHECK(error_of([&] {
              (void)make_conv2d_bn_silu({.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, s,
                                        "BLOCK_H=16 BLOCK_W=32 PLANES=2 THREADS=128", h200);
          }).find("groups of 1 to 32 input channels into 1 or more outputs; this group has 96 -> 96") !=
          std::string::npos);
    CHECK(conv2d_bn_silu_dispatch_reason(dw, s, h200).find("depthwise kernel") != std::string::npos);
}
