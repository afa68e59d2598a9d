// GPU tests: load, launch and check outputs on a real device. Exit 77 (ctest: Skipped) with the
// reason where there is no driver or no GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <kjit/registry.hpp>

#include "support.hpp"

using namespace kjit;

namespace {

std::mt19937_64 rng{std::random_device{}()};  // fresh inputs every run

template <class T>
std::vector<T> random_values(std::size_t n) {
    std::vector<T> v(n);
    if constexpr (std::is_floating_point_v<T>) {
        std::uniform_real_distribution<T> d(-2, 2);
        for (auto& x : v) x = d(rng);
    } else {
        std::uniform_int_distribution<T> d(-1000, 1000);
        for (auto& x : v) x = d(rng);
    }
    return v;
}

/// ‖a − b‖ / ‖b‖ in float64.
template <class T>
double relative_error(const std::vector<T>& out, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        num += (static_cast<double>(out[i]) - ref[i]) * (static_cast<double>(out[i]) - ref[i]);
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / den);
}

/// y, read back from `dy`, equals a·x + b·y0 to fp32 rounding.
void check_affine(const DeviceBuffer& dy, const std::vector<float>& x, const std::vector<float>& y0, double a,
                  double b) {
    std::vector<float> y(x.size());
    dy.download(std::span<float>(y));
    std::vector<double> ref(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) ref[i] = a * x[i] + b * y0[i];
    CHECK(relative_error(y, ref) <= 1e-6);
}

/// The shipped axpby as a typed kernel class: arguments checked at compile time.
class AxpbyF32 : public TypedKernel<param<"x", float*>, param<"y", float*>, param<"alpha", float>, param<"beta", float>,
                                    param<"n", std::int64_t>> {
public:
    explicit AxpbyF32(std::int64_t items)
        : TypedKernel("axpby", {{"T", Scalar::f32}, {"BLOCK", std::int64_t{256}}, {"ITEMS", items}}, 256) {}
};

/// Runs one axpby configuration on a ragged size; checks values and the guard region after y.
template <class T>
void check_axpby(const Kernel& k, std::int64_t n, unsigned grid) {
    CAPTURE(k.id());
    CAPTURE(n);
    const auto device = Device::get(0);
    Stream stream(device);
    constexpr std::int64_t guard = 1024;
    auto x = random_values<T>(n);
    auto y = random_values<T>(n + guard);
    const std::vector<T> y_before = y;
    const T alpha = 3, beta = -2;
    DeviceBuffer dx(device, n * sizeof(T)), dy(device, (n + guard) * sizeof(T));
    dx.upload(std::span<const T>(x));
    dy.upload(std::span<const T>(y));
    const Arg args[] = {dx.as<T>(), dy.as<T>(), alpha, beta, n};
    k.launch(stream, {.grid = {grid}, .block = {256}}, args);
    stream.synchronize();
    dy.download(std::span<T>(y));

    std::vector<double> ref(n);
    for (std::int64_t i = 0; i < n; ++i) ref[i] = double(alpha) * x[i] + double(beta) * y_before[i];
    const std::vector<T> valid(y.begin(), y.begin() + n);
    if constexpr (std::is_floating_point_v<T>) CHECK(relative_error(valid, ref) <= 1e-6);
    else CHECK(relative_error(valid, ref) == 0.0);
    CHECK(std::equal(y.begin() + n, y.end(), y_before.begin() + n));  // guard untouched
}

}  // namespace

TEST_CASE("every shipped axpby configuration is correct on ragged sizes and any grid") {
    for (const auto& family : shipped_kernels()) {
        if (family.name != "axpby") continue;
        const auto all = family.configurations();
        for (const Kernel& k : test::configurations_to_test(std::span<const Kernel>(all)))
            for (std::int64_t n : {1, 255, 1'000'003}) {
                for (unsigned grid : {1u, 7u, 4096u}) {
                    if (std::get<Scalar>(k.constants()[0].value) == Scalar::f32) check_axpby<float>(k, n, grid);
                    else check_axpby<std::int32_t>(k, n, grid);
                }
            }
    }
}

TEST_CASE("typed launch: arguments checked at compile time, same results") {
    const auto device = Device::get(0);
    Stream stream(device);
    const std::int64_t n = 100'001;
    auto x = random_values<float>(n), y = random_values<float>(n);
    const auto y0 = y;
    DeviceBuffer dx(device, n * 4), dy(device, n * 4);
    dx.upload(std::span<const float>(x));
    dy.upload(std::span<const float>(y));
    const AxpbyF32 axpby(4);
    axpby.launch(stream, Dim3{64}, Dim3{256}, static_cast<const float*>(dx.as<float>()), dy.as<float>(), 0.5f, 2.0f, n);
    stream.synchronize();
    check_affine(dy, x, y0, 0.5, 2.0);
}

TEST_CASE("after the first launch, launches are memory hits: no load, no compile, no SQL") {
    const auto device = Device::get(0);
    Stream stream(device);
    test::TempDir dir;
    Runtime rt(dir.path());
    const Kernel k = test::axpby(Scalar::f32, 1);
    DeviceBuffer dx(device, 4096 * 4), dy(device, 4096 * 4);
    const Arg args[] = {dx.as<float>(), dy.as<float>(), 1.0f, 0.0f, std::int64_t{4096}};
    rt.launch(k, stream, {.grid = {16}, .block = {256}}, args);
    const auto first = rt.stats();
    CHECK(first.compiles == 1);
    CHECK(first.loads == 1);
    for (int i = 0; i < 100; ++i) rt.launch(k, stream, {.grid = {16}, .block = {256}}, args);
    stream.synchronize();
    const auto after = rt.stats();
    CHECK(after.compiles == 1);
    CHECK(after.loads == 1);
    CHECK(after.cache_hits == 0);
    CHECK(after.memory_hits - first.memory_hits == 100);

    Runtime fresh(dir.path());  // new runtime over the same database: loads from SQLite
    fresh.launch(k, stream, {.grid = {16}, .block = {256}}, args);
    stream.synchronize();
    CHECK(fresh.stats().compiles == 0);
    CHECK(fresh.stats().cache_hits == 1);
}

TEST_CASE("outputs are written exactly where they should be: NaN poison and a NaN guard") {
    const auto device = Device::get(0);
    Stream stream(device);
    const Kernel k = test::scale_kernel("", 3);
    for (int n : {1, 1000, 65'537}) {
        CAPTURE(n);
        const int guard = 333;
        auto in = random_values<float>(n);
        std::vector<float> out(n + guard, std::numeric_limits<float>::quiet_NaN());
        DeviceBuffer din(device, n * 4), dout(device, (n + guard) * 4);
        din.upload(std::span<const float>(in));
        dout.upload(std::span<const float>(out));
        const Arg args[] = {din.as<float>(), dout.as<float>(), std::int32_t{n}};
        k.launch(stream, {.grid = {static_cast<unsigned>((n + 127) / 128)}, .block = {128}}, args);
        stream.synchronize();
        dout.download(std::span<float>(out));
        int written = 0, guard_kept = 0;
        for (int i = 0; i < n; ++i) written += out[i] == in[i] * 3;
        for (int i = n; i < n + guard; ++i) guard_kept += std::isnan(out[i]);
        CHECK(written == n);
        CHECK(guard_kept == guard);
    }
}

TEST_CASE("more than 48 KB of dynamic shared memory: kjit raises the limit itself") {
    const auto device = Device::get(0);
    Stream stream(device);
    const Kernel k(
        KernelSpec{"reverse_block",
                   {},
                   {{"in", {Scalar::f32, true}}, {"out", {Scalar::f32, true}}, {"per_block", {Scalar::i32}}},
                   1024},
        "__device__ void reverse_block(const float* in, float* out, int per_block) {\n"
        "    extern __shared__ float staged[];\n"
        "    const long long base = (long long)blockIdx.x * per_block;\n"
        "    for (int i = threadIdx.x; i < per_block; i += blockDim.x) staged[i] = in[base + i];\n"
        "    __syncthreads();\n"
        "    for (int i = threadIdx.x; i < per_block; i += blockDim.x) out[base + i] = staged[per_block - 1 - i];\n"
        "}\n");
    const int per_block = 40'000;  // 160 000 bytes
    const int blocks = 3;
    auto in = random_values<float>(per_block * blocks);
    std::vector<float> out(in.size(), std::numeric_limits<float>::quiet_NaN());
    DeviceBuffer din(device, in.size() * 4), dout(device, out.size() * 4);
    din.upload(std::span<const float>(in));
    dout.upload(std::span<const float>(out));
    const Arg args[] = {din.as<float>(), dout.as<float>(), std::int32_t{per_block}};
    k.launch(stream, {.grid = {blocks}, .block = {1024}, .shared_bytes = per_block * 4}, args);
    stream.synchronize();
    dout.download(std::span<float>(out));
    int right = 0;
    for (int b = 0; b < blocks; ++b)
        for (int i = 0; i < per_block; ++i) right += out[b * per_block + i] == in[b * per_block + per_block - 1 - i];
    CHECK(right == per_block * blocks);

    const unsigned too_much = static_cast<unsigned>(device.max_shared_bytes_per_block()) + 4;
    CHECK_THROWS_WITH_AS(k.launch(stream, {.grid = {1}, .block = {256}, .shared_bytes = too_much}, args),
                         doctest::Contains("dynamic shared memory"), UsageError);
}

TEST_CASE("bad launches are refused before the driver sees them") {
    const auto device = Device::get(0);
    Stream stream(device);
    const Kernel k = test::axpby(Scalar::f32, 1);
    DeviceBuffer d(device, 1024);
    const Arg wrong[] = {d.as<float>(), d.as<float>(), 1.0, 1.0f, std::int64_t{1}};
    CHECK_THROWS_WITH_AS(k.launch(stream, {.grid = {1}, .block = {256}}, wrong),
                         doctest::Contains("must be f32, but f64 was given"), UsageError);
    const Arg right[] = {d.as<float>(), d.as<float>(), 1.0f, 1.0f, std::int64_t{1}};
    CHECK_THROWS_WITH_AS(k.launch(stream, {.grid = {1}, .block = {512}}, right),
                         doctest::Contains("compiled for at most 256"), UsageError);
    CHECK_THROWS_WITH_AS(k.launch(stream, {.grid = {0}, .block = {256}}, right), doctest::Contains("at least 1"),
                         UsageError);
    k.launch(stream, {.grid = {1}, .block = {256}}, right);  // the stream is still usable
    stream.synchronize();
}

TEST_CASE("a cubin for another arch is loaded through its PTX") {
    const auto device = Device::get(0);
    test::TempDir dir;
    Runtime rt(dir.path());
    const Kernel k = test::axpby();
    const auto native = rt.compile(k, CompileOptions{.arch = device.arch()}).entry;
    CHECK(Module(device, native->compiled.cubin, native->compiled.ptx).load_path() == LoadPath::cubin);

    const auto other = rt.compile(k, test::options_for(device.arch().major() >= 9 ? "sm_80" : "sm_90")).entry;
    if (device.arch().major() >= 9) {  // sm_80 SASS does not run on sm_90; its PTX does
        const Module m(device, other->compiled.cubin, other->compiled.ptx);
        CHECK(m.load_path() == LoadPath::ptx);
        CHECK(m.function(k.entry_point_name()) != nullptr);
        CHECK_THROWS_WITH_AS((void)m.function("missing_entry_point"), doctest::Contains("no entry point"), CudaError);
    }
}

TEST_CASE("with the driver initialised, repeated compiles still carry ptxas' resource report") {
    (void)Device::get(0);  // cuInit has run
    const Kernel k = test::scale_kernel("", 4242);
    for (int i = 0; i < 3; ++i) {
        const Compiled c = compile(k, CompileOptions{.arch = Device::get(0).arch()});
        CAPTURE(c.log);
        CHECK(c.resources.registers > 0);
    }
}

TEST_CASE("loading an entry built for another arch: PTX when it fits, else a recompile for the device") {
    const auto device = Device::get(0);
    test::TempDir dir;
    Runtime rt(dir.path());
    const Kernel k = test::scale_kernel("", 5);
    const auto newest = supported_arch_numbers().back();
    REQUIRE(newest > device.arch().number());
    test::LogCapture log;
    const LoadedKernel& future_arch = rt.load(k, device, test::options_for(fmt::format("sm_{}", newest)));
    CHECK(future_arch.entry->arch == device.arch().name());  // recompiled for the device
    CHECK(future_arch.module.load_path() == LoadPath::cubin);
    CHECK(future_arch.function != nullptr);
    REQUIRE(log.warnings().size() == 1);
    CHECK(log.warnings()[0].find("recompiling for " + device.arch().name()) != std::string::npos);

    if (device.arch().major() >= 9) {
        const LoadedKernel& older = rt.load(k, device, test::options_for("sm_80"));
        CHECK(older.module.load_path() == LoadPath::ptx);
        CHECK(older.entry->arch == "sm_80");
    }
}

TEST_CASE("a new runtime's load reads only the cubin from SQLite, the PTX when the cubin does not fit") {
    const auto device = Device::get(0);
    test::TempDir dir;
    const Kernel k = test::scale_kernel("", 6);
    {
        Runtime warm(dir.path());
        (void)warm.compile(k, test::options_for(device.arch().name()));
        (void)warm.compile(k, test::options_for("sm_80"));
    }
    Runtime rt(dir.path());
    const LoadedKernel& native = rt.load(k, device);
    CHECK(native.module.load_path() == LoadPath::cubin);
    CHECK(native.entry->compiled.ptx.empty());  // never read
    CHECK(native.entry->compiled.resources.registers > 0);
    CHECK(rt.stats().cache_hits == 1);
    CHECK(rt.stats().compiles == 0);
    CHECK(rt.stats().fetch_ms > 0);  // the load's two parts, timed
    CHECK(rt.stats().module_load_ms > 0);
    CHECK(rt.compile(k, test::options_for(device.arch().name())).entry->compiled.ptx.find(".entry") !=
          std::string::npos);          // compile() still hands out whole entries
    if (device.arch().major() >= 9) {  // sm_80 SASS does not run here: its PTX is fetched and JIT-compiled
        const LoadedKernel& older = rt.load(k, device, test::options_for("sm_80"));
        CHECK(older.module.load_path() == LoadPath::ptx);
        CHECK(older.entry->arch == "sm_80");
        CHECK(rt.stats().compiles == 0);
    }
}

TEST_CASE("a captured graph replays its launches") {
    const auto device = Device::get(0);
    Stream stream(device);
    const Kernel k = test::axpby(Scalar::f32, 1);
    const std::int64_t n = 10'000;
    auto x = random_values<float>(n), y = random_values<float>(n);
    const auto y0 = y;
    DeviceBuffer dx(device, n * 4), dy(device, n * 4);
    dx.upload(std::span<const float>(x));
    dy.upload(std::span<const float>(y));
    const Arg args[] = {dx.as<float>(), dy.as<float>(), 1.0f, 2.0f, n};
    k.launch(stream, {.grid = {40}, .block = {256}}, args);  // load outside the capture
    stream.synchronize();
    dy.upload(std::span<const float>(y0));
    const Graph graph = Graph::capture(stream, [&] { k.launch(stream, {.grid = {40}, .block = {256}}, args); });
    graph.launch(stream);  // y = x + 2·y0
    graph.launch(stream);  // y = x + 2·(x + 2·y0) = 3x + 4·y0
    stream.synchronize();
    check_affine(dy, x, y0, 3.0, 4.0);
}

TEST_CASE("chained launches see each other's writes: programmatic dependent launch on sm_90+, stream and graph") {
    const auto device = Device::get(0);
    Stream stream(device);
    const Kernel k = test::axpby(Scalar::f32, 4);
    const std::int64_t n = 1 << 22;  // ~4000 blocks: the next launch's blocks start while these drain
    auto a = random_values<float>(n), b = random_values<float>(n);
    DeviceBuffer da(device, n * 4), db(device, n * 4);
    const Arg b_from_a[] = {da.as<float>(), db.as<float>(), 0.75f, -0.5f, n};
    const Arg a_from_b[] = {db.as<float>(), da.as<float>(), -0.5f, 0.75f, n};
    const LaunchConfig config{.grid = {static_cast<unsigned>(n / 1024)}, .block = {256}};
    const char* switched = std::getenv("KJIT_DEPENDENT_LAUNCH");
    const bool allowed = !(switched && std::string_view(switched) == "0");
    CHECK(Runtime::global().load(k, device).dependent_launch == (allowed && device.arch().number() >= 90));
    constexpr int links = 100;  // each reads what the one before wrote
    std::vector<double> ra(a.begin(), a.end()), rb(b.begin(), b.end());
    for (int i = 0; i < links; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
            if (i % 2 == 0) rb[j] = 0.75 * ra[j] - 0.5 * rb[j];
            else ra[j] = -0.5 * rb[j] + 0.75 * ra[j];
        }
    auto chain = [&] {
        for (int i = 0; i < links; ++i) k.launch(stream, config, i % 2 == 0 ? b_from_a : a_from_b);
    };
    auto check_chain = [&](auto&& run) {
        da.upload(std::span<const float>(a));
        db.upload(std::span<const float>(b));
        run();
        stream.synchronize();
        std::vector<float> out_a(n), out_b(n);
        da.download(std::span<float>(out_a));
        db.download(std::span<float>(out_b));
        CHECK(relative_error(out_a, ra) <= 1e-5);
        CHECK(relative_error(out_b, rb) <= 1e-5);
    };
    SUBCASE("on a stream") { check_chain(chain); }
    SUBCASE("captured in one graph") {
        const Graph graph = Graph::capture(stream, chain);
        check_chain([&] { graph.launch(stream); });
    }
}

TEST_CASE("events time work on a stream") {
    const auto device = Device::get(0);
    Stream stream(device);
    Event start(device), stop(device);
    const Kernel k = test::axpby();
    const std::int64_t n = 1 << 24;
    DeviceBuffer dx(device, n * 4), dy(device, n * 4);
    const Arg args[] = {dx.as<float>(), dy.as<float>(), 1.0f, 1.0f, n};
    k.launch(stream, {.grid = {1024}, .block = {256}}, args);  // warm-up: compile and load
    start.record(stream);
    k.launch(stream, {.grid = {1024}, .block = {256}}, args);
    stop.record(stream);
    stop.synchronize();
    CHECK(Event::elapsed_ms(start, stop) > 0.0f);
}

TEST_CASE("fill_async and copy_2d_async run in stream order: a copy after a fill reads the filled bytes") {
    const auto device = Device::get(0);
    const Stream stream(device);
    const std::size_t bytes = (1 << 20) + 3;  // ragged: not a multiple of any word
    DeviceBuffer src(device, bytes), dst(device, bytes + 64);
    const auto before = random_values<std::int32_t>(bytes / 4 + 1);
    src.upload(std::as_bytes(std::span(before)).first(bytes));
    dst.fill(0x5A);
    src.fill_async(stream, 0xAB);
    copy_2d_async(stream, dst.address() + 32, bytes, src.address(), bytes, bytes, 1);
    stream.synchronize();
    std::vector<std::uint8_t> out(bytes + 64);
    dst.download(std::span(out));
    CHECK(std::ranges::count(std::span(out).subspan(32, bytes), 0xAB) == static_cast<std::ptrdiff_t>(bytes));
    CHECK(std::ranges::count(std::span(out).first(32), 0x5A) == 32);  // nothing outside was written
    CHECK(std::ranges::count(std::span(out).last(32), 0x5A) == 32);
}

TEST_CASE("a device span copies only its bytes; a moved-from buffer is empty") {
    const auto device = Device::get(0);
    DeviceBuffer buffer(device, 4096 + 5);
    buffer.fill(0x11);
    const DeviceSpan middle = buffer.subspan(1000, 77);
    CHECK(middle.address() == buffer.address() + 1000);
    const auto ints = random_values<std::int32_t>(77);
    const std::vector<std::uint8_t> values(ints.begin(), ints.end());  // each int's low byte
    middle.upload(std::span(values));
    std::vector<std::uint8_t> out(buffer.size_bytes());
    buffer.download(std::span(out));
    CHECK(std::equal(values.begin(), values.end(), out.begin() + 1000));
    CHECK(std::ranges::count(std::span(out).first(1000), 0x11) == 1000);  // nothing outside was written
    CHECK(std::ranges::count(std::span(out).subspan(1077), 0x11) == static_cast<std::ptrdiff_t>(out.size() - 1077));
    CHECK_THROWS_WITH_AS((void)buffer.subspan(4000, 102), doctest::Contains("do not fit device memory of 4101 bytes"),
                         UsageError);
    CHECK_THROWS_AS(middle.upload(std::span(values), 1), UsageError);
    const std::uint64_t address = buffer.address();
    DeviceBuffer moved = std::move(buffer);
    CHECK(moved.address() == address);
    CHECK(buffer.address() == 0);  // NOLINT(bugprone-use-after-move): what a moved-from buffer promises
    CHECK(buffer.size_bytes() == 0);
}

int main(int argc, char** argv) {
    if (const std::string reason = device_unavailable_reason(); !reason.empty()) {
        std::printf("SKIPPED: GPU tests need a CUDA device: %s\n", reason.c_str());
        return 77;
    }
    // A fresh cache for the process-wide runtime, so the tests compile what they launch.
    kjit::test::TempDir cache;
    ::setenv("KJIT_CACHE_DIR", cache.path().c_str(), 1);
    const auto device = Device::get(0);
    std::printf("GPU tests on %s (%s, %d SMs), NVRTC %s\n", device.name().c_str(), device.arch().name().c_str(),
                device.multiprocessor_count(), nvrtc_version().c_str());
    // Every shipped configuration this device runs, compiled on all cores before the cases:
    // compiled one after another inside them (the cases cover nearly every configuration), NVRTC
    // and ptxas took minutes of the suite. Cases with a Runtime of their own still compile theirs.
    std::vector<Kernel> shipped;
    for (const auto& family : shipped_kernels())
        for (auto& k : family.configurations())
            if (k.runs_on(device.arch())) shipped.push_back(std::move(k));
    std::vector<const Kernel*> all;
    for (const Kernel& k : shipped) all.push_back(&k);
    const auto start = std::chrono::steady_clock::now();
    Runtime::global().compile_all(all, device.arch());
    std::printf("%zu shipped kernel configurations compiled in %.1f s\n", all.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    doctest::Context context(argc, argv);
    return context.run();
}
