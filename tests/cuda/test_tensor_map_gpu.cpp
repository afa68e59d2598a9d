// TMA tensor maps encoded by the driver: in the context that owns the tensor, whichever context
// the calling thread has current (none, on a thread kjit never used).
#include <doctest/doctest.h>

#include <cstdint>
#include <thread>

#include <kjit/driver.hpp>
#include <kjit/error.hpp>
#include <kjit/tensor_map.hpp>

using namespace kjit;

namespace {
bool written(const TensorMap& m) {
    for (auto word : m.opaque)
        if (word != 0) return true;
    return false;
}
}  // namespace

TEST_CASE("tensor maps: the driver encodes a tensor's map from any thread, and refuses host pointers") {
    const Device device = Device::get(0);
    const DeviceBuffer tensor(device, 1024 * 64 * sizeof(float));
    const std::uint64_t dims[] = {1024, 64}, strides[] = {1024 * 4};
    const std::uint32_t box[] = {32, 64};
    const TiledTensorMap map{tensor.as<float>(), dims, strides, box};
    device.make_current();
    const TensorMap here = map.encode();
    CHECK(written(here));
    // A fresh thread has no current context: the map is encoded in the tensor's, and is the same.
    TensorMap there;
    std::string error;
    std::thread([&] {
        try {
            there = map.encode();
        } catch (const std::exception& e) {
            error = e.what();
        }
    }).join();
    CHECK(error.empty());
    CHECK(there.opaque == here.opaque);
    // Memory the driver does not know is named as the failing call.
    alignas(16) static float host[1024 * 64];
    const TiledTensorMap stray{host, dims, strides, box};
    CHECK_THROWS_WITH_AS((void)stray.encode(), doctest::Contains("cuPointerGetAttribute"), CudaError);
}
