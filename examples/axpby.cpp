// The README's usage example: construct a kernel with its constants, launch it, read back.
#include <cstdio>
#include <vector>

#include <kjit/kjit.hpp>

int main() try {
    using kjit::Scalar;
    const kjit::Kernel axpby(kjit::KernelSpec{
        .name = "axpby",  // kernels_src/axpby.cu
        .constants = {{"T", Scalar::f32}, {"BLOCK", std::int64_t{256}}, {"ITEMS", std::int64_t{4}}},
        .params = {{"x", {Scalar::f32, true}},
                   {"y", {Scalar::f32, true}},
                   {"alpha", {Scalar::f32}},
                   {"beta", {Scalar::f32}},
                   {"n", {Scalar::i64}}},
        .max_threads_per_block = 256,
    });

    const auto device = kjit::Device::get(0);
    kjit::Stream stream(device);
    const std::int64_t n = 1 << 20;
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    kjit::DeviceBuffer dx(device, n * sizeof(float)), dy(device, n * sizeof(float));
    dx.upload(std::span<const float>(x));
    dy.upload(std::span<const float>(y));

    // First launch compiles (or takes the cache); later ones go straight to cuLaunchKernel.
    const kjit::Arg args[] = {dx.as<float>(), dy.as<float>(), 3.0f, 0.5f, n};
    axpby.launch(stream, {.grid = {256}, .block = {256}}, args);
    stream.synchronize();

    dy.download(std::span<float>(y));
    std::printf("%s on %s: y[0] = %g (expected 4)\n", axpby.id().c_str(), device.name().c_str(), y[0]);
    return y[0] == 4.0f ? 0 : 1;
} catch (const kjit::Error& e) {
    std::fprintf(stderr, "axpby_example: %s\n", e.what());
    return 1;
}
