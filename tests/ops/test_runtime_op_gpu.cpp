// RuntimeOp's runners on a GPU: forward() launches an op's kernels; backward() refuses an op
// that has no backward pass, saying so, before anything reaches the stream.
#include <doctest/doctest.h>

#include <random>

#include <kjit/elementwise.hpp>

#include "support.hpp"

using namespace kjit;

TEST_CASE("RuntimeOp runners: forward launches the op, backward refuses an op that has none") {
    const auto device = Device::get(0);
    Stream stream(device);
    const AddOp add;
    const Shape s{1, 2, 3, 5};
    std::mt19937 rng{std::random_device{}()};
    std::uniform_real_distribution<float> unit(-1, 1);
    std::vector<float> a(30), b(30), y(30);
    for (auto& v : a) v = unit(rng);
    for (auto& v : b) v = unit(rng);
    DeviceBuffer da(device, 30 * sizeof(float)), db(device, 30 * sizeof(float)), dy(device, 30 * sizeof(float));
    da.upload(std::span<const float>(a));
    db.upload(std::span<const float>(b));
    dy.fill(0xff);  // NaN: every element must be written
    const Tensor in[] = {{da.as<void>(), s}, {db.as<void>(), s}};
    const OpCall call{in, {}, dy.as<void>(), s, 5};
    CHECK_THROWS_WITH_AS(add.backward(Runtime::global(), stream, BackwardCall{call, nullptr, 0, {}, {}}),
                         doctest::Contains("no backward pass"), UsageError);
    add.forward(Runtime::global(), stream, call);  // the stream is untouched by the refusal
    stream.synchronize();
    dy.download(std::span<float>(y));
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == a[i] + b[i]);
}
