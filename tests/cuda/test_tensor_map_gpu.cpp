// TMA tensor maps encoded by the driver: in the context that owns the tensor, whichever context
// the calling thread has current (none, on a thread kjit never used); boxes stored through one
// land at their coordinates, clipped at the tensor's edges, and a plain kernel reads them back.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include <kjit/args.hpp>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>
#include <kjit/kernel.hpp>
#include <kjit/output_check.hpp>
#include <kjit/runtime.hpp>
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

namespace {

// Block b stages a 32 × 32 tile from `tiles` (plain shared stores), then one thread stores it
// through the map at box b's coordinates; TMA drops what falls outside the tensor.
constexpr const char* store_boxes_source = R"(
#include "kjit/ptx_sm90.cuh"
__device__ void store_boxes(const kjit::TensorMap& map, const float* tiles, const int* corners)
{
    __shared__ __align__(128) float tile[32 * 32];
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) tile[i] = tiles[blockIdx.x * 32 * 32 + i];
    kjit::fence_proxy_async();  // the stores above, before TMA reads the tile
    __syncthreads();
    if (threadIdx.x == 0) {
        kjit::tma_store(map, kjit::shared_address(tile), corners[2 * blockIdx.x], corners[2 * blockIdx.x + 1]);
        kjit::tma_store_commit();
        kjit::tma_store_wait();
    }
}
)";

// Plain loads of every element: what a consumer of a TMA-stored activation does.
constexpr const char* copy_source = R"(
__device__ void copy_floats(const float* in, float* out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}
)";

}  // namespace

TEST_CASE("boxes stored through a tensor map land at their coordinates, clipped at the tensor's edges") {
    const Device device = Device::get(0);
    if (device.arch() != Arch(9, 0)) {
        MESSAGE("TMA stores are compiled for sm_90a, whose cubins load on 9.0 devices only: not on this one");
        return;
    }
    // 50 rows of 40 floats, rows 48 floats apart, then 2 guard rows, all NaN. Four 32 × 32 boxes
    // tile a 64 × 64 square from (−8, −6): each crosses two of the tensor's edges, and together
    // they cover every element once, so what TMA keeps of them is exactly the tensor.
    constexpr int cols = 40, rows = 50, pitch = 48;
    const int corners[] = {-8, -6, 24, -6, -8, 26, 24, 26};  // (column, row) of each box's first element
    std::mt19937 rng{std::random_device{}()};
    std::uniform_real_distribution<float> value(-2, 2);
    std::vector<float> tiles(4 * 32 * 32);
    for (auto& v : tiles) v = value(rng);
    std::vector<double> expected(rows * cols);
    for (int b = 0; b < 4; ++b)
        for (int r = 0; r < 32; ++r)
            for (int c = 0; c < 32; ++c) {
                const int row = corners[2 * b + 1] + r, col = corners[2 * b] + c;
                if (row >= 0 && row < rows && col >= 0 && col < cols)
                    expected[row * cols + col] = tiles[(b * 32 + r) * 32 + c];
            }
    const OutputLayout layout{rows, cols, pitch, 2 * pitch};
    std::vector<float> out(layout.elements(), std::numeric_limits<float>::quiet_NaN());

    Stream stream(device);
    DeviceBuffer d_out(device, out.size() * 4), d_tiles(device, tiles.size() * 4), d_corners(device, sizeof corners),
        d_copy(device, out.size() * 4);
    d_out.upload(std::span<const float>(out));
    d_tiles.upload(std::span<const float>(tiles));
    d_corners.upload(std::span<const int>(corners));
    const std::uint64_t dims[] = {cols, rows}, strides[] = {pitch * 4};
    const std::uint32_t box[] = {32, 32};
    const TensorMap map = TiledTensorMap{d_out.as<float>(), dims, strides, box, TensorMapSwizzle::none}.encode();

    const Kernel store(
        KernelSpec{"store_boxes",
                   {},
                   {{"map", {Scalar::tensor_map}}, {"tiles", {Scalar::f32, true}}, {"corners", {Scalar::i32, true}}},
                   128,
                   0,
                   Arch::parse("sm_90a")},
        store_boxes_source);
    const Arg store_args[] = {map, d_tiles.as<float>(), d_corners.as<int>()};
    store.launch(stream, {.grid = {4}, .block = {128}}, store_args);
    const Kernel copy(
        KernelSpec{
            "copy_floats", {}, {{"in", {Scalar::f32, true}}, {"out", {Scalar::f32, true}}, {"n", {Scalar::i32}}}},
        copy_source);
    const Arg copy_args[] = {d_out.as<float>(), d_copy.as<float>(), static_cast<std::int32_t>(out.size())};
    copy.launch(stream, {.grid = {8}, .block = {256}}, copy_args);
    stream.synchronize();
    d_copy.download(std::span<float>(out));

    // Copies are exact: tolerance 0. Every element of the tensor written, the row padding and the
    // guard not.
    const OutputCheck check = check_output(out, expected, layout, 0);
    const std::size_t shape[] = {rows, cols};
    CAPTURE(describe_faults(check, shape));
    CHECK(check.passed());
}
