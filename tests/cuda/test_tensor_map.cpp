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
    m.box = wide;  // 64 16-bit values: one 128-byte swizzled row
    m.swizzle = TensorMapSwizzle::bytes_128;
    m.element = TensorMapElement::bf16;
    CHECK(reason(m).empty());
    m.box = huge;
    m.element = TensorMapElement::f16;
    CHECK(reason(m).find("box dimension 1 is 300") != std::string::npos);
    m.box = ragged;  // 6 16-bit values: 12 bytes
    CHECK(reason(m).find("inner box is 12 bytes") != std::string::npos);
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

TEST_CASE("im2col tensor maps: the corners, steps and box TMA takes, named before the driver is asked") {
    // A 3x3 stride-2 conv's map over NHWC x [2, 28, 28, 64].
    const Im2colTensorMap ok{.base = at(0x10000),
                             .dims = {64, 28, 28, 2},
                             .byte_strides = {64 * 4, 64 * 4 * 28, 64 * 4 * 28 * 28},
                             .lower_corner = {-1, -1},
                             .upper_corner = {-1, -1},
                             .element_strides = {2, 2}};
    CHECK(ok.unsupported_reason().empty());
    Im2colTensorMap m = ok;
    m.base = at(0x10008);
    CHECK(m.unsupported_reason().find("not 16-byte aligned") != std::string::npos);
    m = ok;
    m.byte_strides[0] = 66 * 4;  // pixels of 66 channels: 264 bytes
    CHECK(m.unsupported_reason().find("stride of dimension 1 is 264 bytes") != std::string::npos);
    m = ok;
    m.lower_corner = {-1, -130};  // a padding of 130 rows
    CHECK(m.unsupported_reason().find("corners along H are -130 and -1: TMA takes -128 to 127") != std::string::npos);
    m = ok;
    m.upper_corner = {-40, -1};  // a 41-wide kernel on a 28-wide image, padded by 1
    CHECK(m.unsupported_reason().find("bounding box along W is empty") != std::string::npos);
    m = ok;
    m.element_strides = {9, 2};
    CHECK(m.unsupported_reason().find("element stride along W is 9: TMA takes 1 to 8") != std::string::npos);
    m = ok;
    m.channels = 64;  // 256 bytes a row
    CHECK(m.unsupported_reason().find("128-byte swizzling takes at most 128") != std::string::npos);
    m.swizzle = TensorMapSwizzle::none;
    CHECK(m.unsupported_reason().empty());
    m = ok;
    m.pixels = 512;
    CHECK(m.unsupported_reason().find("512 positions per copy") != std::string::npos);
    m = ok;
    m.dims[3] = 0;
    CHECK(m.unsupported_reason().find("dimension 3 has 0 elements") != std::string::npos);
    // Encoding asks the driver: without one, NoDeviceError or the driver's own error, never a
    // silent map; a broken rule is a UsageError before that.
    m = ok;
    m.pixels = 0;
    CHECK_THROWS_AS((void)m.encode(), UsageError);
}
