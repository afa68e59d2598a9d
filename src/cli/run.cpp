// kjit run / kjit tune conv2d_bn_silu: one layer on the GPU — checked against the float64
// reference and timed (run), or every configuration timed and the winner stored (tune); NCHW
// tensors, or with --channels-last NHWC ones and the channels-last Hopper kernel.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct RunOptions {
    Common common;
    std::string op;
    int batch = 1, cin = 0, cout = 0, stride = 1, pad = 0, groups = 1, iters = 100;
    std::vector<int> hw, kernel_size{1, 1};
    std::vector<std::string> config;
    std::string shapes_file;
    bool channels_last = false;
};

/// The family tuned winners of the options' layout are stored under.
const char* tuned_family(const RunOptions& o) {
    return conv2d_tuned_family(o.channels_last ? Conv2dLayout::nhwc : Conv2dLayout::nchw);
}

Layer layer_of(const RunOptions& o) {
    if (o.hw.size() != 2) throw UsageError("give the layer: --batch B --cin K --cout N --hw H W, all positive");
    return make_layer({.batch = o.batch,
                       .cin = o.cin,
                       .cout = o.cout,
                       .height = o.hw[0],
                       .width = o.hw[1],
                       .kernel_h = o.kernel_size[0],
                       .kernel_w = o.kernel_size[1],
                       .stride = o.stride,
                       .pad = o.pad,
                       .groups = o.groups});
}

std::vector<Layer> layers_from(const std::string& file) {
    return parse_layers(read_option_file(file, "--shapes"), "--shapes " + file);
}

/// Device buffers of one layer, filled with fresh random values: x and W on the host as the
/// reference takes them (NCHW, [C_OUT][C_IN/groups][KH][KW]), on the device in the run's layout.
struct Tensors {
    std::vector<float> x, w, scale, shift;
    DeviceBuffer dx, dw, dscale, dshift, dy;
    Shape x_shape, y_shape;
    int row;
    bool channels_last;
};

/// [N][A][B] → [N][B][A]: NCHW to NHWC (A = C, B = H·W) and back, W to [C_OUT][KH][KW][C_IN].
std::vector<float> swap_inner(const std::vector<float>& v, std::size_t n, std::size_t a, std::size_t b) {
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < a; ++j)
            for (std::size_t k = 0; k < b; ++k) out[(i * b + k) * a + j] = v[(i * a + j) * b + k];
    return out;
}

Tensors make_tensors(const Device& device, const Layer& l, bool channels_last) {
    const auto& s = l.shape;
    const auto [oh, ow] = conv2d_output_size(l.attrs, s);
    std::mt19937_64 rng{std::random_device{}()};
    std::uniform_real_distribution<float> unit(-1, 1);
    auto random = [&](std::size_t n, float scale) {
        std::vector<float> v(n);
        for (auto& e : v) e = unit(rng) * scale;
        return v;
    };
    const int fan_in = s.c_in / l.attrs.groups * l.attrs.kernel_h * l.attrs.kernel_w;
    auto x = random(1ULL * s.batch * s.c_in * s.height * s.width, 1.0f);
    auto w = random(1ULL * s.c_out * fan_in, 1.7f / std::sqrt(float(fan_in)));
    auto scale = random(s.c_out, 1.0f), shift = random(s.c_out, 1.0f);
    auto upload = [&](const std::vector<float>& v) {
        DeviceBuffer b(device, v.size() * sizeof(float));
        b.upload(std::span<const float>(v));
        return b;
    };
    const std::size_t y_elems = 1ULL * s.batch * s.c_out * oh * ow;
    const auto n = [](int v) { return static_cast<std::size_t>(v); };
    const std::size_t plane = n(s.height) * n(s.width), taps = n(l.attrs.kernel_h) * n(l.attrs.kernel_w);
    Tensors t{x,
              w,
              scale,
              shift,
              upload(channels_last ? swap_inner(x, n(s.batch), n(s.c_in), plane) : x),
              upload(channels_last ? swap_inner(w, n(s.c_out), n(s.c_in), taps) : w),
              upload(scale),
              upload(shift),
              DeviceBuffer(device, y_elems * sizeof(float)),
              channels_last ? Shape{n(s.batch), n(s.height), n(s.width), n(s.c_in)}
                            : Shape{n(s.batch), n(s.c_in), n(s.height), n(s.width)},
              channels_last ? Shape{n(s.batch), n(oh), n(ow), n(s.c_out)} : Shape{n(s.batch), n(s.c_out), n(oh), n(ow)},
              channels_last ? s.c_out : oh * ow,
              channels_last};
    return t;
}

/// Median µs of one forward over `iters` CUDA-graph replays.
double time_forward(const RuntimeOp& op, Runtime& rt, const Stream& stream, Tensors& t, int iters) {
    const Tensor inputs[] = {{t.dx.as<float>(), t.x_shape}};
    void* const params[] = {t.dw.as<float>(), t.dscale.as<float>(), t.dshift.as<float>()};
    auto once = [&] { op.forward(rt, stream, {inputs, params, t.dy.as<float>(), t.y_shape, t.row}); };
    once();  // compile or load
    const Graph graph = Graph::capture(stream, once);
    graph.launch(stream);
    std::vector<Event> marks;
    for (int i = 0; i <= iters; ++i) marks.emplace_back(stream.device());
    marks[0].record(stream);
    std::vector<double> us;
    for (int i = 1; i <= iters; ++i) {
        graph.launch(stream);
        marks[i].record(stream);
    }
    stream.synchronize();
    for (int i = 1; i <= iters; ++i) us.push_back(1000.0 * Event::elapsed_ms(marks[i - 1], marks[i]));
    return median(std::move(us));
}

/// ‖y − ref‖ / ‖ref‖ of the last forward over every output, and how long the reference took.
struct Check {
    double error, seconds;
};

/// What the check compares against, for the output: every output, so nothing is sampled.
constexpr const char* reference_kind = "the float64 CPU reference, every output, on all cores";

Check check_against_reference(const Layer& l, Tensors& t) {
    std::vector<float> y(t.dy.size_bytes() / sizeof(float));
    t.dy.download(std::span<float>(y));
    if (t.channels_last) y = swap_inner(y, t.y_shape[0], t.y_shape[1] * t.y_shape[2], t.y_shape[3]);  // to NCHW
    const auto start = std::chrono::steady_clock::now();
    const auto ref = conv2d_bn_silu_reference(t.x, t.w, t.scale, t.shift, l.attrs, l.shape);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = y[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return {std::isfinite(num) ? std::sqrt(num / den) : INFINITY, seconds};
}

void check_op_name(const RunOptions& o) {
    if (o.op != "conv2d_bn_silu")
        throw UsageError(fmt::format("unknown op '{}': kjit run and tune take conv2d_bn_silu", o.op));
}

/// A layer whose inputs, output and float64 reference do not fit this machine's memory is
/// refused before anything is allocated (it ended in std::bad_alloc, or the OOM killer).
void check_fits_host(const Layer& l) {
    const auto& s = l.shape;
    const auto [oh, ow] = conv2d_output_size(l.attrs, s);
    const double x = 1.0 * s.batch * s.c_in * s.height * s.width,
                 w = 1.0 * s.c_out * (s.c_in / l.attrs.groups) * l.attrs.kernel_h * l.attrs.kernel_w,
                 y = 1.0 * s.batch * s.c_out * oh * ow;
    // x and W twice (as generated, and in the run's layout), y as read back, and its reference.
    const double bytes = 8.0 * (x + w) + 4.0 * y + 8.0 * y;
    const double memory = 1.0 * sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE);
    if (bytes > memory)
        throw UsageError(
            fmt::format("this layer's tensors and its float64 reference take {:.1f} GB of host memory; "
                        "this machine has {:.1f} GB: choose a smaller layer or batch",
                        bytes / 1e9, memory / 1e9));
}

int run(const RunOptions& o) {
    check_op_name(o);
    const Layer l = layer_of(o);
    std::string config;
    for (const auto& c : o.config) config += (config.empty() ? "" : " ") + c;
    // The channels-last kernel's configurations are its tiles after NHWC=1.
    if (o.channels_last && !config.empty() && !config.starts_with("NHWC=1")) config = "NHWC=1 " + config;
    if (!o.channels_last && config.find("NHWC") != std::string::npos)
        throw UsageError("NHWC=1 names the channels-last kernel: add --channels-last to run it on NHWC tensors");
    // What is wrong with the layer or the configuration is said before a GPU is asked for.
    check_fits_host(l);
    if (!config.empty()) (void)make_conv2d_bn_silu(l.attrs, l.shape, config, checking_device());
    const Device device = gpu_or_explain("run");
    Runtime& rt = runtime(o.common);
    const DeviceTraits traits = DeviceTraits::of(device);
    const auto op = !config.empty()   ? make_conv2d_bn_silu(l.attrs, l.shape, config, traits)
                    : o.channels_last ? dispatch_conv2d_bn_silu_nhwc(l.attrs, l.shape, device, rt.cache())
                                      : dispatch_conv2d_bn_silu(l.attrs, l.shape, device, rt.cache());
    // What dispatch would run and why; a tuned winner or --config may differ from it, and then
    // says so.
    const std::string why =
        o.channels_last
            ? "the channels-last TMA + wgmma implicit GEMM (sm_90a): one im2col box per K step, both operands from "
              "shared memory"
            : conv2d_bn_silu_dispatch_reason(l.attrs, l.shape, traits);
    const std::string picked = conv2d_bn_silu_config(*op);
    const std::string dispatched = conv2d_bn_silu_config(*(o.channels_last
                                                               ? dispatch_conv2d_bn_silu_nhwc(l.attrs, l.shape, traits)
                                                               : dispatch_conv2d_bn_silu(l.attrs, l.shape, traits)));
    const char* source = !config.empty() ? "config" : picked != dispatched ? "tuned" : "dispatch";
    std::string ran;  // what ran instead of dispatch's pick, and why
    if (picked != dispatched)
        ran = config.empty()
                  ? fmt::format("\n  ran: the tuned winner stored for this layer and device (dispatch picks {})",
                                dispatched)
                  : fmt::format("\n  ran: --config (dispatch picks {})", dispatched);
    Stream stream(device);
    Tensors t = make_tensors(device, l, o.channels_last);
    const double us = time_forward(*op, rt, stream, t, std::max(1, o.iters));
    const auto [error, reference_s] = check_against_reference(l, t);
    const auto& s = l.shape;
    const auto [oh, ow] = conv2d_output_size(l.attrs, s);
    const double pixels = 1.0 * s.batch * oh * ow;
    const double flops = 2.0 * pixels * s.c_out * (s.c_in / l.attrs.groups) * l.attrs.kernel_h * l.attrs.kernel_w;
    const double bytes = 4.0 * (t.x.size() + t.w.size() + 2.0 * s.c_out + pixels * s.c_out);
    const bool tf32 = conv2d_rounds_to_tf32(*op);
    const double tolerance = tf32 ? 2e-3 : 1e-5;
    if (o.common.json) {
        const nlohmann::json j{{"kernel", op->kernel_for_launch(0).id()},
                               {"config", picked},
                               {"dispatch", why},
                               {"source", source},
                               {"dispatch_config", dispatched},
                               {"device", device.name()},
                               {"relative_error", error},
                               {"reference", reference_kind},
                               {"reference_s", reference_s},
                               {"tolerance", tolerance},
                               {"median_us", us},
                               {"tflops", flops / us / 1e6},
                               {"gbps", bytes / us / 1e3}};
        fmt::print("{}\n", j.dump(2));
    } else {
        fmt::print(
            "{} [{}] on {}\n  dispatch: {}{}\n  error ‖y−ref‖/‖ref‖ = {:.2e} (tolerance {:.0e}) against {} "
            "({:.1f} s)\n  median {:.1f} µs over {} graph replays, {:.1f} TFLOP/s, {:.0f} GB/s\n",
            op->kernel_for_launch(0).id(), picked, device.name(), why, ran, error, tolerance, reference_kind,
            reference_s, us, o.iters, flops / us / 1e6, bytes / us / 1e3);
    }
    return error <= tolerance ? ok : failure;
}

int tune(const RunOptions& o) {
    check_op_name(o);
    const std::vector<Layer> layers = o.shapes_file.empty() ? std::vector<Layer>{layer_of(o)}
                                                            : layers_from(o.shapes_file);
    for (const Layer& l : layers) check_fits_host(l);
    const Device device = gpu_or_explain("tune");
    const DeviceTraits traits = DeviceTraits::of(device);
    Runtime& rt = runtime(o.common);
    Stream stream(device);
    nlohmann::json report = nlohmann::json::array();
    int status = ok;
    for (const Layer& l : layers) {
        Tensors t = make_tensors(device, l, o.channels_last);
        const auto configs = o.channels_last ? conv2d_bn_silu_nhwc_configs(l.attrs, l.shape, traits)
                                             : conv2d_bn_silu_candidates(l.attrs, l.shape, traits);
        std::vector<std::unique_ptr<Conv2dOp>> ops;
        std::vector<const Kernel*> kernels;
        for (const auto& config : configs) {
            ops.push_back(make_conv2d_bn_silu(l.attrs, l.shape, config, traits));
            for (std::size_t launch = 0; launch < ops.back()->n_launches(); ++launch)
                kernels.push_back(&ops.back()->kernel_for_launch(launch));
        }
        // The candidates missing from the cache compile on all cores first, not one by one as
        // each is timed (52 of them took ~50 s serially on the H200's host).
        rt.compile_all(kernels, device.arch());
        std::vector<std::pair<double, std::string>> timed;
        for (std::size_t i = 0; i < configs.size(); ++i)
            timed.emplace_back(time_forward(*ops[i], rt, stream, t, std::max(1, o.iters)), configs[i]);
        std::sort(timed.begin(), timed.end());
        // The winner must also be right before it is stored.
        const auto winner = make_conv2d_bn_silu(l.attrs, l.shape, timed.front().second, traits);
        (void)time_forward(*winner, rt, stream, t, 1);
        const double error = check_against_reference(l, t).error;
        const std::string key = conv2d_problem_key(l.attrs, l.shape);
        const bool right = error <= 2e-3;
        if (right)
            store_tuned(rt.cache(), {tuned_family(o), key, device.name(), device.arch().name(), timed.front().second,
                                     timed.front().first});
        else status = failure;
        if (o.common.json) {
            nlohmann::json tried = nlohmann::json::array();
            for (const auto& [us, config] : timed) tried.push_back({{"config", config}, {"median_us", us}});
            report.push_back({{"layer", key},
                              {"winner", timed.front().second},
                              {"relative_error", error},
                              {"stored", right},
                              {"tried", tried}});
            continue;
        }
        fmt::print("{} on {} ({}): {} configurations\n", key, device.name(), device.arch().name(), timed.size());
        for (const auto& [us, config] : timed)
            fmt::print("  {:>9.1f} µs  {:>5.2f}x  {}\n", us, us / timed.front().first, config);
        fmt::print("  winner {} (error {:.2e} against {}){}\n", timed.front().second, error, reference_kind,
                   right ? ", stored: dispatch uses it from now on" : " FAILED the accuracy check: not stored");
        std::fflush(stdout);  // each layer as it is done, also into a pipe
    }
    if (o.common.json) fmt::print("{}\n", report.dump(2));
    return status;
}

void add_layer_options(CLI::App& sub, RunOptions& o) {
    sub.add_option("op", o.op, "The op: conv2d_bn_silu")->required();
    sub.add_option("--batch", o.batch, "Batch size")->check(positive_int);
    sub.add_option("--cin", o.cin, "Input channels")->check(positive_int);
    sub.add_option("--cout", o.cout, "Output channels")->check(positive_int);
    sub.add_option("--hw", o.hw, "Input height and width")->expected(2)->check(positive_int);
    sub.add_option("--kernel-size", o.kernel_size, "Kernel height and width (default 1 1)")
        ->expected(2)
        ->check(positive_int);
    sub.add_option("--stride", o.stride, "Stride (default 1)")->check(positive_int);
    sub.add_option("--pad", o.pad, "Padding (default 0)")->check(non_negative_int);
    sub.add_option("--groups", o.groups, "Groups (default 1)")->check(positive_int);
    sub.add_option("--iters", o.iters, "Timed graph replays (default 100)")->check(positive_int);
    sub.add_flag("--channels-last", o.channels_last,
                 "NHWC tensors (x [B, H, W, C_IN], W [C_OUT, KH, KW, C_IN], y [B, OH, OW, C_OUT]) and the "
                 "channels-last Hopper kernel (sm_90a; C_IN a multiple of 4, ungrouped)");
}

}  // namespace

void add_run_and_tune(CLI::App& app, int& exit_code) {
    static RunOptions run_options, tune_options;
    auto* r = app.add_subcommand("run",
                                 "Run one layer on the GPU: error against the float64 reference, median µs, "
                                 "TFLOP/s, GB/s");
    add_common_options(*r, run_options.common, true);
    add_layer_options(*r, run_options);
    r->add_option("--config", run_options.config, "Configuration KEY=VALUE (repeatable; default: dispatch)");
    r->callback([&exit_code] { exit_code = run(run_options); });

    auto* t = app.add_subcommand("tune", "Time every valid configuration of a layer on the GPU and store the winner");
    add_common_options(*t, tune_options.common, true);
    add_layer_options(*t, tune_options);
    t->add_option("--shapes", tune_options.shapes_file, "JSON file of layers to tune instead of one")
        ->check(CLI::ExistingFile);
    t->callback([&exit_code] { exit_code = tune(tune_options); });
}

}  // namespace kjit::cli
