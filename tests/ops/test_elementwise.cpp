// The elementwise ops on the CPU: their kernels compile, bad constants are refused, their float64
// references compute what the ops are (checked by hand on small cases).
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <kjit/compile.hpp>
#include <kjit/elementwise.hpp>

#include "support.hpp"

using namespace kjit;

TEST_CASE("the elementwise ops' kernels compile for sm_80 and sm_90") {
    const AddOp add;
    const ConcatChannelsOp concat(3);
    const MaxPool2dOp pool(5, 1, 2);
    const UpsampleNearest2dOp up(2);
    const MaxPool2dChainOp chain(5, 3);
    for (const Kernel* k : {&add.kernel(), &concat.kernel(), &pool.kernel(), &up.kernel(), &chain.kernel()})
        for (const char* arch : {"sm_80", "sm_90"}) {
            CAPTURE(k->id());
            const Compiled c = compile(*k, test::options_for(arch));
            CHECK(c.ptx.find(".entry " + k->entry_point_name()) != std::string::npos);
            CHECK(c.resources.spill_store_bytes == 0);
        }
    CHECK_THROWS_WITH_AS(MaxPool2dOp(3, 1, 2), doctest::Contains("0 <= pad <= kernel / 2"), UsageError);
    CHECK_THROWS_WITH_AS(UpsampleNearest2dOp(0), doctest::Contains("must be 1 to 16"), UsageError);
    CHECK_THROWS_WITH_AS(ConcatChannelsOp(0), doctest::Contains("at least one input"), UsageError);
    CHECK_THROWS_WITH_AS(MaxPool2dChainOp(4, 2), doctest::Contains("the window must be odd"), UsageError);
    CHECK_THROWS_WITH_AS(MaxPool2dChainOp(5, 5), doctest::Contains("2 <= repeats <= 4"), UsageError);
}

TEST_CASE("casts between f32, f16 and bf16: every pair compiles, its kernel's pointers typed, others refused") {
    for (const Scalar from : {Scalar::f32, Scalar::f16, Scalar::bf16})
        for (const Scalar to : {Scalar::f32, Scalar::f16, Scalar::bf16}) {
            if (from == to) {
                CHECK_THROWS_WITH_AS(CastOp(from, to), doctest::Contains("to itself does nothing"), UsageError);
                continue;
            }
            const CastOp cast(from, to);
            CAPTURE(cast.kernel().id());
            CHECK(cast.kernel().params()[0].type == ParamType{from, true});
            CHECK(cast.kernel().params()[1].type == ParamType{to, true});
            const Compiled c = compile(cast.kernel(), test::options_for("sm_80"));
            // Through f32: f16 widens by cvt (bf16 by a shift), f32 narrows by cvt.rn.
            if (from == Scalar::f16) CHECK(c.ptx.find("cvt.f32.f16") != std::string::npos);
            if (to != Scalar::f32) CHECK(c.ptx.find(fmt::format("cvt.rn.{}.f32", short_name(to))) != std::string::npos);
            CHECK(c.resources.spill_store_bytes == 0);
        }
    CHECK_THROWS_WITH_AS(CastOp(Scalar::f32, Scalar::i32),
                         doctest::Contains("between f32, f16 and bf16, not f32 to i32"), UsageError);
    const Shape s{2, 3, 5};
    CHECK(CastOp(Scalar::f32, Scalar::bf16).compute_concrete_output_shape(std::array{ShapeView(s)}, {}) == s);
}

TEST_CASE("max pools chain where both keep the image's size with one window, up to four, on planes a block holds") {
    const Shape in{2, 3, 10, 10};
    const MaxPool2dOp sppf(5, 1, 2);
    const auto two = sppf.chained_with(sppf, in);
    REQUIRE(two);
    CHECK(two->n_chained_outputs() == 1);
    CHECK(two->compute_concrete_output_shape(std::array{ShapeView(in)}, {}) == in);
    const auto three = two->chained_with(sppf, in);
    REQUIRE(three);
    const auto four = three->chained_with(sppf, in);
    REQUIRE(four);
    CHECK(four->n_chained_outputs() == 3);
    CHECK_FALSE(four->chained_with(sppf, in));                 // the kernel's four outputs
    CHECK_FALSE(two->chained_with(MaxPool2dOp(3, 1, 1), in));  // another window
    CHECK_FALSE(sppf.chained_with(MaxPool2dOp(3, 1, 1), in));
    CHECK_FALSE(sppf.chained_with(MaxPool2dOp(5, 2, 2), in));  // halves the image
    CHECK_FALSE(sppf.chained_with(MaxPool2dOp(5, 1, 1), in));  // shrinks it
    CHECK_FALSE(MaxPool2dOp(2, 2, 0).chained_with(MaxPool2dOp(2, 2, 0), in));
    CHECK_FALSE(sppf.chained_with(AddOp(), in));
    CHECK_FALSE(AddOp().chained_with(sppf, in));  // RuntimeOp's default
    const Shape big{1, 1, 65, 65};
    CHECK_FALSE(sppf.chained_with(sppf, big));
    CHECK_THROWS_WITH_AS((void)two->compute_concrete_output_shape(std::array{ShapeView(big)}, {}),
                         doctest::Contains("run the pools one by one"), UsageError);
}

TEST_CASE("the elementwise references, by hand") {
    const std::vector<float> x{1, 5, 2, -3, 4, 0, 7, -1, 6};  // one 3x3 plane
    const Shape plane{1, 1, 3, 3};
    CHECK(add_reference(x, x)[1] == 10.0);
    CHECK(maxpool2d_reference(x, plane, 2, 1, 0) == std::vector<double>{5, 5, 7, 6});
    CHECK(maxpool2d_reference(x, plane, 3, 2, 1) == std::vector<double>{5, 5, 7, 6});  // -inf padding
    // 3x3 pools repeated: the second one's window covers the whole plane.
    CHECK(maxpool2d_chain_reference(x, plane, 3, 2) ==
          std::vector<double>{5, 5, 5, 7, 7, 6, 7, 7, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7});
    CHECK(upsample_nearest2d_reference(std::vector<float>{1, 2}, Shape{1, 1, 1, 2}, 2) ==
          std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2});
    // Two images of [2 channels] and [1 channel] of 1 pixel: image by image, channels in order.
    const std::vector<std::vector<float>> parts{{1, 2, 3, 4}, {9, 8}};
    CHECK(concat_channels_reference(parts, std::vector{Shape{2, 2, 1, 1}, Shape{2, 1, 1, 1}}) ==
          std::vector<double>{1, 2, 9, 3, 4, 8});
}
