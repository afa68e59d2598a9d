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

TEST_CASE("the reference's planes, spread over threads, equal a per-pixel sum on strided, padded and grouped layers") {
    // Per output pixel: Σ over (ci, kh, kw) in that order, taps outside the image skipped.
    auto per_pixel = [](const std::vector<float>& x, const std::vector<float>& w, const Conv2dAttrs& a,
                        const Conv2dShape& s) {
        const auto [oh, ow] = conv2d_output_size(a, s);
        const int cin_pg = s.c_in / a.groups, cout_pg = s.c_out / a.groups;
        std::vector<double> y;
        for (int b = 0; b < s.batch; ++b)
            for (int oc = 0; oc < s.c_out; ++oc)
                for (int i = 0; i < oh; ++i)
                    for (int j = 0; j < ow; ++j) {
                        double acc = 0;
                        for (int ci = 0; ci < cin_pg; ++ci)
                            for (int kh = 0; kh < a.kernel_h; ++kh)
                                for (int kw = 0; kw < a.kernel_w; ++kw) {
                                    const int ih = i * a.stride_h - a.pad_h + kh, iw = j * a.stride_w - a.pad_w + kw;
                                    if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
                                    const int c = oc / cout_pg * cin_pg + ci;
                                    acc += double(x[((1LL * b * s.c_in + c) * s.height + ih) * s.width + iw]) *
                                           w[((1LL * oc * cin_pg + ci) * a.kernel_h + kh) * a.kernel_w + kw];
                                }
                        const double v = 0.5 * acc - 0.25;  // scale 0.5, shift -0.25
                        y.push_back(v / (1.0 + std::exp(-v)));
                    }
        return y;
    };
    const struct {
        Conv2dAttrs a;
        Conv2dShape s;
    } layers[] = {
        {{.kernel_h = 3, .kernel_w = 5, .stride_h = 2, .stride_w = 3, .pad_h = 4, .pad_w = 1, .groups = 2},
         {2, 6, 9, 7, 4}},
        {{.kernel_h = 7, .kernel_w = 7, .pad_h = 1, .pad_w = 1}, {1, 3, 5, 5, 2}},  // taps past a whole row
        {{.kernel_h = 1, .kernel_w = 1}, {2, 256, 13, 11, 130}},  // 9.5e6 multiply-adds: two threads or more
    };
    for (const auto& [a, s] : layers) {
        CAPTURE(s.c_in);
        std::vector<float> x(1ULL * s.batch * s.c_in * s.height * s.width),
            w(1ULL * s.c_out * s.c_in / a.groups * a.kernel_h * a.kernel_w);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i);
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.91f * i);
        const std::vector<float> scale(s.c_out, 0.5f), shift(s.c_out, -0.25f);
        CHECK(conv2d_bn_silu_reference(x, w, scale, shift, a, s) == per_pixel(x, w, a, s));
    }
}
