// The float64 reference, checked by hand.
#include <doctest/doctest.h>

#include <cmath>

#include <kjit/conv.hpp>

#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::error_of;
using test::fake;
using test::Recorder;

TEST_CASE("the reference computes conv, BN and SiLU (checked by hand on a small case)") {
    // 1 image, 2 input channels 2x2, one 1x1 output channel and one 3x3 padded one, groups 1.
    const std::vector<float> x{1, 2, 3, 4, -1, 0, 1, 2};
    const std::vector<float> w1{0.5f, -1};
    const std::vector<float> scale{2}, shift{-1};
    const auto y = conv2d_bn_silu_reference(x, w1, scale, shift, {}, {1, 2, 2, 2, 1});
    REQUIRE(y.size() == 4);
    auto silu = [](double v) { return v / (1 + std::exp(-v)); };
    for (int p = 0; p < 4; ++p) CHECK(y[p] == doctest::Approx(silu(2 * (0.5 * x[p] - x[4 + p]) - 1)));
    std::vector<float> w3(18, 1.0f);  // sum of the 3x3 neighbourhood over both channels
    const auto y3 = conv2d_bn_silu_reference(x, w3, scale, shift,
                                             {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, {1, 2, 2, 2, 1});
    for (int p = 0; p < 4; ++p) CHECK(y3[p] == doctest::Approx(silu(2 * 12.0 - 1)));  // every pixel sees all 8
}
