// The BatchNorm fold.
#include <doctest/doctest.h>

#include <cmath>

#include <kjit/conv.hpp>

#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::error_of;
using test::fake;
using test::Recorder;

TEST_CASE("BatchNorm folds to scale and shift, bad BN tensors are refused") {
    const std::vector<float> gamma{2, 0.5f}, beta{1, -1}, mean{0.5f, 2}, var{3, 0.25f};
    const auto bn = fold_batch_norm(gamma, beta, mean, var, 1e-5f);
    for (int c = 0; c < 2; ++c) {
        const double scale = gamma[c] / std::sqrt(double(var[c]) + 1e-5);
        CHECK(bn.scale[c] == doctest::Approx(scale));
        CHECK(bn.shift[c] == doctest::Approx(beta[c] - scale * mean[c]));
    }
    const std::vector<float> short_beta{1};
    CHECK(error_of([&] { (void)fold_batch_norm(gamma, short_beta, mean, var, 1e-5f); }).find("differ in length") !=
          std::string::npos);
    const std::vector<float> negative{-1, 1};
    CHECK(error_of([&] { (void)fold_batch_norm(gamma, beta, mean, negative, 0.0f); }).find("must be positive") !=
          std::string::npos);
}
