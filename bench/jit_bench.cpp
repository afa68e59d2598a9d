// Times kjit's JIT path (issue 5). One JSON object per line; bench/jit_report.py makes tables.
//   kjit_jit_bench host              key, SQLite hit, memory hit (no GPU needed)
//   kjit_jit_bench start [--runs N]  cold (empty cache) and warm-cache starts, each in a new process
//   kjit_jit_bench hot               host time per launch: kjit's launch paths against cuLaunchKernel
//                                    (and, on a 9.0 device, the 1x1 conv on the TMA kernel: conv_tma)
//   kjit_jit_bench source DIR        writes the benchmarked kernels' sources for the peers (CuPy)
// Two kernels: axpby (f32, 256 threads × 4 items) and the 1x1 conv GEMM (128x64x32x8) on
// 256->256 channels at 28x28, batch 1.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include <fmt/format.h>
#include <kjit/kjit.hpp>
#include <nlohmann/json.hpp>

using namespace kjit;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

/// y ← α·x + β·y, the same configuration the registry ships (and CuPy and Triton run).
class Axpby final : public TypedKernel<param<"x", float*>, param<"y", float*>, param<"alpha", float>,
                                       param<"beta", float>, param<"n", std::int64_t>> {
public:
    Axpby()
        : TypedKernel("axpby", {{"T", Scalar::f32}, {"BLOCK", std::int64_t{256}}, {"ITEMS", std::int64_t{4}}}, 256) {}
};

constexpr std::int64_t axpby_n = 1 << 16;
constexpr Conv2dShape conv_shape{1, 256, 28, 28, 256};
Conv2dBnSiluGemmForward make_conv() { return {128, 64, 32, 8}; }

const Shape conv_x_shape{1, 256, 28, 28};
const Shape conv_y_shape{1, 256, 28, 28};
constexpr int conv_m = 28 * 28;

DeviceBuffer random_buffer(const Device& device, std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1, 1);
    std::vector<float> v(n);
    for (auto& e : v) e = d(rng);
    DeviceBuffer b(device, n * sizeof(float));
    b.upload(std::span<const float>(v));
    return b;
}

/// Device data of one benchmarked kernel, allocated outside every timed region.
struct Problem {
    std::vector<DeviceBuffer> buffers;  // axpby: x, y; conv: x, w, scale, shift, y

    Problem(const Device& device, std::string_view kernel) {
        const bool conv = kernel == "conv";
        const std::size_t sizes_axpby[] = {axpby_n, axpby_n};
        const std::size_t sizes_conv[] = {256 * 784, 256 * 256, 256, 256, 256 * 784};
        const std::span<const std::size_t> sizes = conv ? std::span<const std::size_t>(sizes_conv)
                                                        : std::span<const std::size_t>(sizes_axpby);
        for (std::size_t i = 0; i < sizes.size(); ++i) buffers.push_back(random_buffer(device, sizes[i], 7 + i));
    }
    float* operator[](std::size_t i) { return buffers[i].as<float>(); }
};

/// The conv op's forward through `runtime`: what a graph executor does per node.
OpCall conv_call(const Tensor (&inputs)[1], void* const (&params)[3], Problem& p) {
    return {inputs, params, p[4], conv_y_shape, conv_m};
}

void conv_forward(const RuntimeOp& op, Runtime& runtime, const Stream& stream, Problem& p) {
    const Tensor inputs[] = {{p[0], conv_x_shape}};
    void* const params[] = {p[1], p[2], p[3]};
    op.forward(runtime, stream, conv_call(inputs, params, p));
}

LaunchConfig axpby_config() { return {.grid = {axpby_n / 1024}, .block = {256}}; }

// ---- start: one new process per measurement ---------------------------------------------------

/// Context creation (cuInit, primary context, a stream) and the device buffers: reported, then
/// excluded from the figures that follow.
struct Context {
    Clock::time_point started = Clock::now();
    Device device = Device::get(0);
    Stream stream{device};
    double created_us = us_since(started);
};

/// A child's device side where a GPU exists: context (its creation time reported in `r`) and
/// the kernel's buffers, both made before any timed region.
struct ChildDevice {
    std::optional<Context> ctx;
    std::optional<Problem> problem;
    ChildDevice(std::string_view kernel_name, json& r) {
        if (device_count() == 0) return;
        ctx.emplace();
        r["context_us"] = ctx->created_us;
        problem.emplace(ctx->device, kernel_name);
    }
};

/// Each step of the kernel's path, timed on its own, through the public step APIs.
json child_steps(std::string_view kernel_name) {
    json r{{"mode", "steps"}, {"kernel", kernel_name}};
    auto [ctx, problem] = ChildDevice(kernel_name, r);
    const CompileOptions options{.arch = ctx ? ctx->device.arch() : Arch::parse("sm_90")};

    const auto t0 = Clock::now();
    auto t = t0;
    auto step = [&](const char* name) {
        r[name] = us_since(t);
        t = Clock::now();
    };
    Runtime runtime(Cache::default_directory());  // opens the SQLite cache
    Cache& cache = runtime.cache();
    step("open_us");
    std::optional<Axpby> axpby;
    std::optional<Conv2dBnSiluGemmForward> conv;
    if (kernel_name == "conv") conv.emplace(make_conv());
    else axpby.emplace();
    const Kernel& kernel = conv ? conv->kernel() : *axpby;
    step("construct_us");
    const CacheKey key = kernel.key(options);
    step("key_us");
    std::optional<CacheEntry> entry = cache.find(key, Cache::Blobs::cubin);  // what the Runtime's load reads
    step("find_us");
    r["hit"] = entry.has_value();
    if (!entry) {
        Compiled compiled = compile(kernel, options);
        step("compile_us");
        entry = make_cache_entry(kernel, options, std::move(compiled));
        cache.store(*entry);
        step("store_us");
    }
    if (ctx) {
        Module module(ctx->device, entry->compiled.cubin, entry->compiled.ptx);
        CUfunc_st* fn = module.function(kernel.entry_point_name());
        const LoadedKernel loaded{std::move(module), fn, std::make_shared<const CacheEntry>(*std::move(entry)),
                                  options.arch};
        step("load_us");
        Problem& p = *problem;
        ArgPack pack(kernel.params(), kernel.id());
        LaunchConfig config = axpby_config();
        if (conv) {
            const Tensor inputs[] = {{p[0], conv_x_shape}};
            void* const params[] = {p[1], p[2], p[3]};
            conv->pack_args({inputs, params, p[4], conv_y_shape, conv_m}, pack);
            const Dims g = conv->grid(conv_y_shape), b = conv->block();
            config = {{g[0]}, {b[0]}, conv->shared_bytes_for_launch(0)};
        } else {
            for (const Arg& a : {Arg(p[0]), Arg(p[1]), Arg(2.0f), Arg(0.5f), Arg(axpby_n)}) pack.push(a);
        }
        runtime.launch_packed(kernel, loaded, ctx->stream, config, pack.data());
        ctx->stream.synchronize();
        step("launch_us");
    }
    r["total_us"] = us_since(t0);
    return r;
}

/// What a user's program does: construct the kernel, launch it through the process-wide
/// Runtime (which opens the cache on first use), wait for it.
json child_end_to_end(std::string_view kernel_name) {
    json r{{"mode", "e2e"}, {"kernel", kernel_name}};
    auto [ctx, problem] = ChildDevice(kernel_name, r);

    const auto t0 = Clock::now();
    if (kernel_name == "conv") {
        const auto op = make_conv();
        if (ctx) conv_forward(op, Runtime::global(), ctx->stream, *problem);
        else (void)Runtime::global().compile(op.kernel(), {.arch = Arch::parse("sm_90")});
    } else {
        const Axpby axpby;
        if (ctx) axpby.launch(ctx->stream, axpby_config(), (*problem)[0], (*problem)[1], 2.0f, 0.5f, axpby_n);
        else (void)Runtime::global().compile(axpby, {.arch = Arch::parse("sm_90")});
    }
    if (ctx) ctx->stream.synchronize();
    r["total_us"] = us_since(t0);
    r["launched"] = ctx.has_value();
    const auto s = Runtime::global().stats();
    r["origin"] = s.compiles ? "compiled" : s.cache_hits ? "sqlite" : "memory";
    return r;
}

json run_child(const fs::path& cache_dir, std::string_view mode, std::string_view kernel) {
    const std::string command = fmt::format("KJIT_CACHE_DIR='{}' '{}' child {} {}", cache_dir.string(),
                                            fs::read_symlink("/proc/self/exe").string(), mode, kernel);
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) throw Error("popen failed: " + command);
    std::string out;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    if (pclose(pipe) != 0) throw Error(fmt::format("child failed: {}\n{}", command, out));
    return json::parse(out);
}

/// Medians over runs of every numeric field.
json summarise(const std::vector<json>& runs) {
    json r = runs.front();
    for (auto& [name, value] : r.items())
        if (value.is_number_float()) {
            std::vector<double> v;
            for (const auto& run : runs) v.push_back(run.at(name).get<double>());
            value = median(v);
        }
    r["runs"] = runs.size();
    return r;
}

int start(int runs) {
    const fs::path root = fs::temp_directory_path() / fmt::format("kjit-jit-bench-{}", getpid());
    for (const char* kernel : {"axpby", "conv"})
        for (const char* mode : {"steps", "e2e"}) {
            std::vector<json> cold, warm;
            for (int i = 0; i < std::max(1, runs / 3); ++i) {  // NVRTC dominates: fewer cold runs
                const fs::path dir = root / fmt::format("{}-{}-{}", kernel, mode, i);
                fs::create_directories(dir);
                cold.push_back(run_child(dir, mode, kernel));
            }
            const fs::path populated = root / fmt::format("{}-{}-0", kernel, mode);
            for (int i = 0; i < runs; ++i) warm.push_back(run_child(populated, mode, kernel));
            json c = summarise(cold), w = summarise(warm);
            c["bench"] = "cold", w["bench"] = "warm";
            fmt::print("{}\n{}\n", c.dump(), w.dump());
            std::fflush(stdout);
        }
    fs::remove_all(root);
    return 0;
}

// ---- hot: host time per launch ------------------------------------------------------------------

/// The driver's own cuLaunchKernel, looked up in the libcuda kjit already loaded.
using LaunchKernelFn = int (*)(CUfunc_st*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream_st*, void**, void**);
LaunchKernelFn raw_launch_kernel() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto* fn = lib ? reinterpret_cast<LaunchKernelFn>(dlsym(lib, "cuLaunchKernel")) : nullptr;
    if (!fn) throw Error("cuLaunchKernel not found in libcuda.so.1");
    return fn;
}

void raw_launch(LaunchKernelFn fn, CUfunc_st* f, const LaunchConfig& c, const Stream& s, void** args) {
    if (int rc = fn(f, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.shared_bytes, s.handle(), args,
                    nullptr))
        throw Error(fmt::format("cuLaunchKernel returned {}", rc));
}

int hot(int launches) {
    Context ctx;
    const Stream& stream = ctx.stream;
    Problem pa(ctx.device, "axpby"), pc(ctx.device, "conv");
    Runtime& rt = Runtime::global();
    const auto raw = raw_launch_kernel();

    const Axpby axpby;
    float *x = pa[0], *y = pa[1], alpha = 2.0f, beta = 0.5f;
    std::int64_t n = axpby_n;
    void* axpby_args[] = {&x, &y, &alpha, &beta, &n};
    CUfunc_st* axpby_fn = rt.load(axpby, ctx.device).function;

    const auto conv = make_conv();
    const Dims g = conv.grid(conv_y_shape), b = conv.block();
    const LaunchConfig conv_config{{g[0]}, {b[0]}, conv.shared_bytes_for_launch(0)};
    std::int32_t batch = 1, c_in = 256, c_out = 256, m = conv_m, stride = conv_m;
    std::int64_t x_image = std::int64_t{c_in} * m, y_image = std::int64_t{c_out} * stride;  // tight images
    float *cx = pc[0], *cw = pc[1], *cs = pc[2], *ch = pc[3], *cy = pc[4], *no_residual = nullptr;
    void* conv_args[] = {&cx, &cw, &cs, &ch, &cy, &batch, &c_in, &c_out, &m, &stride, &x_image, &y_image, &no_residual};
    conv_forward(conv, rt, stream, pc);  // loads the module and raises the shared-memory limit
    CUfunc_st* conv_fn = rt.load(conv.kernel(), ctx.device).function;
    const Conv2dBnSiluGemmForward::KernelType conv_typed(conv.kernel());
    const Arg generic[] = {x, y, alpha, beta, n};

    struct Method {
        const char* kernel;
        const char* path;
        std::function<void()> launch;
        std::vector<double> ns{};
    };
    std::vector<Method> methods{
        {"axpby", "raw cuLaunchKernel", [&] { raw_launch(raw, axpby_fn, axpby_config(), stream, axpby_args); }},
        {"axpby", "typed launch", [&] { axpby.launch(stream, axpby_config(), x, y, alpha, beta, n); }},
        {"axpby", "Kernel::launch (Arg span)", [&] { axpby.Kernel::launch(stream, axpby_config(), generic); }},
        {"conv", "raw cuLaunchKernel", [&] { raw_launch(raw, conv_fn, conv_config, stream, conv_args); }},
        {"conv", "typed launch",
         [&] {
             conv_typed.launch(stream, conv_config, cx, cw, cs, ch, cy, batch, c_in, c_out, m, stride, x_image, y_image,
                               no_residual);
         }},
        {"conv", "RuntimeOp::forward", [&] { conv_forward(conv, rt, stream, pc); }},
    };
    // On a 9.0 device, the same layer on the Hopper kernel: its tensor maps are built on the first
    // call and found in the op's cache after, so forward's cost is that lookup plus the packing.
    const DeviceTraits traits = DeviceTraits::of(ctx.device);
    std::optional<Conv2dBnSiluGemmTmaForward> conv_tma;
    std::optional<ArgPack> tma_pack;
    if (traits.hopper()) {
        conv_tma.emplace(Sm90Tiles::configurations().front(), traits);
        conv_forward(*conv_tma, rt, stream, pc);
        const Tensor inputs[] = {{pc[0], conv_x_shape}};
        void* const params[] = {pc[1], pc[2], pc[3]};
        tma_pack.emplace(conv_tma->kernel().params(), conv_tma->kernel().id());
        conv_tma->pack_args(conv_call(inputs, params, pc), *tma_pack);
        const Dims tg = conv_tma->grid(conv_y_shape), tb = conv_tma->block();
        const LaunchConfig tma_config{{tg[0], tg[1], tg[2]}, {tb[0]}, conv_tma->shared_bytes_for_launch(0)};
        CUfunc_st* tma_fn = rt.load(conv_tma->kernel(), ctx.device).function;
        methods.push_back({"conv_tma", "raw cuLaunchKernel",
                           [&, tma_config, tma_fn] { raw_launch(raw, tma_fn, tma_config, stream, tma_pack->data()); }});
        methods.push_back({"conv_tma", "RuntimeOp::forward", [&] { conv_forward(*conv_tma, rt, stream, pc); }});
    }
    // Rounds of 100 launches per method, interleaved so drift hits every method alike; the
    // stream is drained between rounds (untimed) so no launch waits for queue space.
    constexpr int round = 100;
    for (int pass = 0; pass < 2; ++pass)
        for (int r = 0; r < launches / round; ++r)
            for (auto& method : methods) {
                for (int i = 0; i < round; ++i) {
                    const auto t = Clock::now();
                    method.launch();
                    if (pass) method.ns.push_back(1000 * us_since(t));
                }
                stream.synchronize();
            }
    for (const auto& method : methods) {
        const auto& raw_ns = std::find_if(methods.begin(), methods.end(), [&](const Method& o) {
                                 return o.kernel == std::string_view(method.kernel);
                             })->ns;
        fmt::print("{}\n", json{{"bench", "hot"},
                                {"kernel", method.kernel},
                                {"path", method.path},
                                {"launches", method.ns.size()},
                                {"median_ns", median(method.ns)},
                                {"p90_ns", percentile(method.ns, 0.9)},
                                {"raw_median_ns", median(raw_ns)}}
                               .dump());
    }
    return 0;
}

// ---- host: the costs that need no GPU ------------------------------------------------------------

/// Median ns per call of `f`, over `batches` batches of `per_batch` calls.
template <class F>
double ns_per_call(F&& f, int batches, int per_batch) {
    std::vector<double> v;
    for (int b = 0; b < batches; ++b) {
        const auto t = Clock::now();
        for (int i = 0; i < per_batch; ++i) f();
        v.push_back(1000 * us_since(t) / per_batch);
    }
    return median(v);
}

int host() {
    const fs::path dir = fs::temp_directory_path() / fmt::format("kjit-jit-bench-host-{}", getpid());
    const CompileOptions options{.arch = Arch::parse("sm_90")};
    for (const char* name : {"axpby", "conv"}) {
        // shared_ptr: it deletes through the concrete type (Kernel has no virtual destructor).
        auto make = [&]() -> std::shared_ptr<const Kernel> {
            if (name == std::string_view("conv")) return std::make_shared<const Kernel>(make_conv().kernel());
            return std::make_shared<const Axpby>();
        };
        json r{{"bench", "host"}, {"kernel", name}};
        r["construct_us"] = ns_per_call([&] { (void)make(); }, 50, 20) / 1000;
        std::vector<double> first_key;
        for (int i = 0; i < 200; ++i) {
            const auto k = make();
            const auto t = Clock::now();
            (void)k->key(options);
            first_key.push_back(1000 * us_since(t));
        }
        r["key_ns"] = median(first_key);
        const auto kernel = make();
        r["memo_key_ns"] = ns_per_call([&] { (void)kernel->key(options); }, 200, 1000);

        {  // populate, then hit SQLite from an open connection, and as a new Runtime's first lookup
            Runtime warmer(dir);
            (void)warmer.compile(*kernel, options);
        }
        {
            Cache cache(dir);
            const CacheKey key = kernel->key(options);
            std::vector<double> hits;
            for (int i = 0; i < 500; ++i) {
                const auto t = Clock::now();
                if (!cache.find(key)) throw Error("expected a cache hit");
                hits.push_back(us_since(t));
            }
            r["sqlite_hit_us"] = median(hits);
            r["entry_bytes"] = cache.find(key)->compiled.cubin.size() + cache.find(key)->compiled.ptx.size();
        }
        std::vector<double> first_hits;
        for (int i = 0; i < 50; ++i) {
            Runtime rt(dir);
            const auto t = Clock::now();
            if (rt.compile(*kernel, options).origin != Origin::cache) throw Error("expected an SQLite hit");
            first_hits.push_back(us_since(t));
        }
        r["runtime_first_hit_us"] = median(first_hits);
        Runtime rt(dir);
        (void)rt.compile(*kernel, options);
        r["memory_hit_ns"] = ns_per_call([&] { (void)rt.compile(*kernel, options); }, 200, 1000);
        fmt::print("{}\n", r.dump());
        std::fflush(stdout);
    }
    fs::remove_all(dir);
    return 0;
}

int write_sources(const fs::path& dir) {
    fs::create_directories(dir);
    const Axpby axpby;
    const auto conv = make_conv();
    std::ofstream(dir / "axpby.cu") << axpby.source();
    std::ofstream(dir / "conv.cu") << conv.kernel().source();
    const Dims g = conv.grid(conv_y_shape), b = conv.block();
    std::ofstream(dir / "launch.json") << json{
        {"axpby",
         {{"entry", axpby.entry_point_name()}, {"grid", axpby_config().grid.x}, {"block", 256}, {"n", axpby_n}}},
        {"conv",
         {{"entry", conv.kernel().entry_point_name()},
          {"grid", g[0]},
          {"block", b[0]},
          {"shared_bytes", conv.shared_bytes_for_launch(0)},
          {"c_in", conv_shape.c_in},
          {"c_out", conv_shape.c_out},
          {"hw", conv_shape.height}}}}.dump(2);
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto usage = [&] {
        std::fprintf(stderr, "usage: %s host | start [--runs N] | hot [--launches N] | source DIR\n", argv[0]);
        return 2;
    };
    if (args.empty()) return usage();
    auto number = [&](const char* flag, int fallback) {
        const auto it = std::find(args.begin(), args.end(), flag);
        return it != args.end() && it + 1 != args.end() ? std::stoi(*(it + 1)) : fallback;
    };
    if (args[0] == "host") return host();
    if (args[0] == "start") return start(number("--runs", 10));
    if (args[0] == "hot") return hot(number("--launches", 10000));
    if (args[0] == "source" && args.size() == 2) return write_sources(args[1]);
    if (args[0] == "child" && args.size() == 3) {
        fmt::print("{}\n", (args[1] == "steps" ? child_steps(args[2]) : child_end_to_end(args[2])).dump());
        return 0;
    }
    return usage();
} catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_jit_bench: %s\n", e.what());
    return 1;
}
