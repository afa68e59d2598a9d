// TMA tensor maps: the rules checked before the driver is asked, and the driver's encoding.
#include <doctest/doctest.h>

#include <cstdint>

#include <kjit/driver.hpp>
#include <kjit/error.hpp>
#include <kjit/tensor_map.hpp>

using namespace kjit;

namespace {
const void* at(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }
}  // namespace

TEST_CASE("tensor maps: every TMA rule broken is named before the driver is asked") {
    const std::uint64_t dims[] = {196, 256, 8}, strides[] = {196 * 4, 196 * 256 * 4};
    const std::uint32_t box[] = {32, 32, 1};
    const TiledTensorMap ok{at(0x10000), dims, strides, box};
    CHECK(ok.unsupported_reason().empty());

    auto reason = [&](TiledTensorMap m) { return m.unsupported_reason(); };
    TiledTensorMap m = ok;
    m.base = at(0x10004);
    CHECK(reason(m).find("not 16-byte aligned") != std::string::npos);
    const std::uint64_t odd_rows[] = {49 * 4, 49 * 256 * 4};  // 7x7 images: 196-byte rows
    m = ok;
    m.byte_strides = odd_rows;
    CHECK(reason(m).find("stride of dimension 1 is 196 bytes") != std::string::npos);
    const std::uint32_t wide[] = {64, 32, 1}, huge[] = {32, 300, 1}, ragged[] = {6, 32, 1};
    m = ok;
    m.box = wide;  // 256 bytes: more than a 128-byte swizzle row
    CHECK(reason(m).find("128-byte swizzling takes at most 128") != std::string::npos);
    m.swizzle = TensorMapSwizzle::none;
    CHECK(reason(m).empty());
    m.box = huge;
    CHECK(reason(m).find("box dimension 1 is 300") != std::string::npos);
    m.box = ragged;
    CHECK(reason(m).find("inner box is 24 bytes") != std::string::npos);
    m = ok;
    m.byte_strides = std::span<const std::uint64_t>(strides).first(1);
    CHECK(reason(m).find("3 dimensions need 2 strides") != std::string::npos);
    m = ok;
    m.dims = {};
    CHECK(reason(m).find("1 to 5 dimensions") != std::string::npos);
    m = ok;
    m.base = at(0x10004);
    CHECK_THROWS_WITH_AS((void)m.encode(), doctest::Contains("tensor map: the tensor's address"), UsageError);
}

TEST_CASE("tensor maps: without a driver, encoding says there is none") {
    if (device_count() > 0) return;  // tests/cuda/test_tensor_map_gpu.cpp encodes real tensors
    const std::uint64_t dims[] = {1024, 64}, strides[] = {1024 * 4};
    const std::uint32_t box[] = {32, 64};
    const TiledTensorMap map{at(0x100000), dims, strides, box};
    CHECK_THROWS_AS((void)map.encode(), NoDeviceError);
}
