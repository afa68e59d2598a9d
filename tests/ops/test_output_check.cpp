// Reading a NaN-poisoned output against a float64 reference: each way an op can be wrong is
// counted and the first wrong output named; a right one passes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <kjit/error.hpp>
#include <kjit/output_check.hpp>

using namespace kjit;

namespace {

constexpr float poison = std::numeric_limits<float>::quiet_NaN();

/// 3 rows of 4 outputs, 2 of padding after each, a guard of 5: what a right op leaves.
struct Buffer {
    OutputLayout layout{3, 4, 6, 5};
    std::vector<double> ref;
    std::vector<float> y;
    Buffer() : y(layout.elements(), poison) {
        for (std::size_t i = 0; i < 12; ++i)
            ref.push_back(0.5 + 0.25 * double(i % 5) - 0.125 * double(i));  // exact in float
        for (std::size_t r = 0; r < 3; ++r)
            for (std::size_t i = 0; i < 4; ++i) y[r * 6 + i] = float(ref[r * 4 + i]);
    }
    float& at(std::size_t index) { return y[index / 4 * 6 + index % 4]; }
};

}  // namespace

TEST_CASE("a right output passes: within the tolerance, nothing outside the rows written") {
    Buffer b;
    const OutputCheck c = check_output(b.y, b.ref, b.layout, 1e-6);
    CHECK(c.passed());
    CHECK(c.error < 1e-7);
    CHECK_FALSE(c.first_wrong);
    CHECK(c.unwritten + c.nonfinite + c.padding_written + c.guard_written == 0);
}

TEST_CASE("each way of being wrong is counted, and the first wrong output named") {
    SUBCASE("an output never written") {
        Buffer b;
        b.at(6) = poison;
        const OutputCheck c = check_output(b.y, b.ref, b.layout, 1e-6);
        CHECK_FALSE(c.passed());
        CHECK(c.unwritten == 1);
        CHECK(std::isinf(c.error));
        REQUIRE(c.first_wrong);
        CHECK(c.first_wrong->index == 6);
        CHECK(std::isnan(c.first_wrong->value));
        CHECK(c.first_wrong->expected == doctest::Approx(b.ref[6]));
    }
    SUBCASE("an infinite output") {
        Buffer b;
        b.at(11) = INFINITY;
        const OutputCheck c = check_output(b.y, b.ref, b.layout, 1e-6);
        CHECK(c.nonfinite == 1);
        CHECK(c.first_wrong->index == 11);
    }
    SUBCASE("a write into the padding between rows, one past the output") {
        Buffer b;
        b.y[1 * 6 + 4] = 0.0f;
        b.y[3 * 6 + 2] = 1.0f;
        const OutputCheck c = check_output(b.y, b.ref, b.layout, 1e-6);
        CHECK_FALSE(c.passed());
        CHECK(c.padding_written == 1);
        CHECK(c.guard_written == 1);
        CHECK(c.error < 1e-7);  // the outputs themselves are right
    }
    SUBCASE("a value off by more than the tolerance allows: the first such one") {
        Buffer b;
        b.at(2) += 1e-7f;  // within 1e-3 × RMS
        b.at(5) += 0.3f;
        b.at(9) += 0.3f;
        const OutputCheck c = check_output(b.y, b.ref, b.layout, 1e-3);
        CHECK_FALSE(c.passed());
        CHECK(c.error > 1e-3);
        REQUIRE(c.first_wrong);
        CHECK(c.first_wrong->index == 5);
        CHECK(c.first_wrong->value == doctest::Approx(b.ref[5] + 0.3));
    }
    SUBCASE("a tolerance of zero: any difference") {
        Buffer b;
        b.at(7) = std::nextafter(b.at(7), 10.0f);
        const OutputCheck c = check_output(b.y, b.ref, b.layout, 0);
        CHECK_FALSE(c.passed());
        CHECK(c.first_wrong->index == 7);
    }
}

TEST_CASE("what is wrong, in words: counts, the error, the first wrong output at its coordinates") {
    const Shape shape{3, 1, 1, 4};  // the buffer's 3 rows of 4, as an NCHW output
    Buffer b;
    CHECK(describe_faults(check_output(b.y, b.ref, b.layout, 1e-6), shape).empty());
    b.at(6) = poison;
    b.y[1 * 6 + 5] = 0.0f;
    CHECK(describe_faults(check_output(b.y, b.ref, b.layout, 1e-6), shape) ==
          fmt::format("1 outputs never written (still NaN); 1 writes into the padding between output rows; error inf "
                      "over the tolerance 1e-06; first wrong: y[1,0,0,2] = NaN, expected {:.6g}",
                      b.ref[6]));
    Buffer off;
    off.at(9) += 0.75f;
    const std::string text = describe_faults(check_output(off.y, off.ref, off.layout, 1e-3), shape);
    CHECK(text.starts_with("error "));
    CHECK(text.find(fmt::format("first wrong: y[2,0,0,1] = {:.6g}, expected {:.6g}", off.at(9), off.ref[9])) !=
          std::string::npos);
}

TEST_CASE("an all-zero reference: right only where the output is zero too") {
    const OutputLayout layout{1, 3, 3, 0};
    const std::vector<double> zeros(3, 0.0);
    CHECK(check_output(std::vector<float>(3, 0.0f), zeros, layout, 0).passed());
    CHECK_FALSE(check_output(std::vector<float>{0.0f, 1e-30f, 0.0f}, zeros, layout, 1e-3).passed());
}

TEST_CASE("a buffer, layout and reference that disagree in size are refused") {
    Buffer b;
    b.y.pop_back();
    CHECK_THROWS_AS((void)check_output(b.y, b.ref, b.layout, 1e-6), UsageError);
}
