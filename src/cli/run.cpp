// kjit run / kjit tune conv2d_bn_silu: one layer on the GPU — checked against the float64
// reference and timed (run), or every configuration timed and the winner stored (tune); NCHW
// tensors, or with --channels-last NHWC ones and the channels-last Hopper kernel. The same
// commands take flash_attention2 (src/cli/attention.cpp).
#include <algorithm>
#include <chrono>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct RunOptions {
    Common common;
    std::string op;
    LayerOptions layer;
    AttentionOptions attention;
    int iters = 100;
    std::vector<std::string> config;
    std::string shapes_file;
    bool channels_last = false;
};

std::vector<Layer> layers_from(const std::string& file) {
    return parse_layers(read_option_file(file, "--shapes"), "--shapes " + file);
}

/// What a run's output held against the float64 reference (every output, written into a fresh
/// NaN-poisoned buffer), and how long the reference took.
struct Checked {
    OutputCheck output;
    double seconds;
};

Checked check_against_reference(const Conv2dOp& op, Runtime& rt, const Stream& stream, const ConvTensors& t) {
    const auto start = std::chrono::steady_clock::now();
    const auto ref = t.reference();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const OpCall call = t.call(op);
    return {checked_forward(op, rt, stream, call.inputs, call.params, call.output_shape, ref, conv_tolerance(op)),
            seconds};
}

/// Throws UsageError for an unknown op, or options of the other op.
void check_op_name(const RunOptions& o) {
    if (o.op != "conv2d_bn_silu" && o.op != attention_op)
        throw UsageError(
            fmt::format("unknown op '{}': kjit run and tune take conv2d_bn_silu and {}", o.op, attention_op));
    if (o.op == attention_op &&
        (o.layer.given() || o.layer.window_given() || o.layer.groups != 1 || o.channels_last || !o.shapes_file.empty()))
        throw UsageError(
            fmt::format("{} takes --batch, --heads, --kv-heads, --seq, --kv-seq, --head-dim, --dtype, "
                        "--causal and --layout, not a conv layer's options",
                        attention_op));
    if (o.op != attention_op && o.attention.given())
        throw UsageError(
            fmt::format("--heads, --seq, --head-dim, --dtype, --causal and --layout are {}'s: {} takes a "
                        "layer (--batch --cin --cout --hw …)",
                        attention_op, o.op));
}

std::string joined_config(const RunOptions& o) {
    std::string config;
    for (const auto& c : o.config) config += (config.empty() ? "" : " ") + c;
    return config;
}

int run(const RunOptions& o) {
    check_op_name(o);
    if (o.op == attention_op) return run_attention(o.common, o.layer.batch, o.attention, joined_config(o), o.iters);
    const Layer l = layer_of(o.layer);
    std::string config = joined_config(o);
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
    Stream stream(device);
    const Conv2dLayout layout = o.channels_last ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    // A tuned winner, one tuned now (KJIT_AUTOTUNE), or dispatch's pick; or --config.
    const PickedConv pick =
        !config.empty() ? PickedConv{make_conv2d_bn_silu(l.attrs, l.shape, config, traits), PickSource::heuristic, {}}
                        : pick_conv2d_bn_silu(l.attrs, l.shape, rt, stream, layout);
    const auto& op = pick.op;
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
    const char* source = !config.empty()                        ? "config"
                         : pick.source == PickSource::tuned     ? "tuned"
                         : pick.source == PickSource::tuned_now ? "tuned now"
                                                                : "dispatch";
    std::string ran;  // what ran instead of dispatch's pick, and why
    if (!config.empty() && picked != dispatched) ran = fmt::format("\n  ran: --config (dispatch picks {})", dispatched);
    if (pick.source == PickSource::tuned)
        ran = fmt::format("\n  ran: the tuned winner stored for this layer, device and driver (dispatch picks {})",
                          dispatched);
    if (pick.source == PickSource::tuned_now)
        ran = fmt::format(
            "\n  ran: the winner of tuning this layer just now (KJIT_AUTOTUNE), stored for later runs (dispatch "
            "picks {})",
            dispatched);
    const ConvTensors t(device, l.attrs, l.shape, o.channels_last);
    const double us = time_forward(*op, rt, stream, t.call(*op), std::max(1, o.iters));
    const auto [checked, reference_s] = check_against_reference(*op, rt, stream, t);
    const double error = checked.error;
    const auto& s = l.shape;
    const auto [oh, ow] = conv2d_output_size(l.attrs, s);
    const double pixels = 1.0 * s.batch * oh * ow;
    const double flops = 2.0 * pixels * s.c_out * (s.c_in / l.attrs.groups) * l.attrs.kernel_h * l.attrs.kernel_w;
    const double bytes = 4.0 * (t.x.size() + t.w.size() + 2.0 * s.c_out + pixels * s.c_out);
    const double tolerance = conv_tolerance(*op);
    if (o.common.json) {
        const nlohmann::json j{{"kernel", op->kernel_for_launch(0).id()},
                               {"config", picked},
                               {"dispatch", why},
                               {"source", source},
                               {"dispatch_config", dispatched},
                               {"device", device.name()},
                               {"relative_error", error},
                               {"passed", checked.passed()},
                               {"faults", describe_faults(checked, t.y_shape())},
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
            "({:.1f} s){}\n  median {:.1f} µs over {} graph replays, {:.1f} TFLOP/s, {:.0f} GB/s\n",
            op->kernel_for_launch(0).id(), picked, device.name(), why, ran, error, tolerance, reference_kind,
            reference_s, checked.passed() ? "" : "\n  WRONG: " + describe_faults(checked, t.y_shape()), us, o.iters,
            flops / us / 1e6, bytes / us / 1e3);
    }
    return checked.passed() ? ok : failure;
}

int tune(const RunOptions& o) {
    check_op_name(o);
    if (o.op == attention_op) return tune_attention(o.common, o.layer.batch, o.attention, o.iters);
    const std::vector<Layer> layers = o.shapes_file.empty() ? std::vector<Layer>{layer_of(o.layer)}
                                                            : layers_from(o.shapes_file);
    for (const Layer& l : layers) check_fits_host(l);
    const Device device = gpu_or_explain("tune");
    Runtime& rt = runtime(o.common);
    Stream stream(device);
    const Conv2dLayout layout = o.channels_last ? Conv2dLayout::nhwc : Conv2dLayout::nchw;
    const TuneTarget target = TuneTarget::of(device, layout);
    nlohmann::json report = nlohmann::json::array();
    int status = ok;
    for (const Layer& l : layers) {
        const TunedLayer tuned = tune_conv2d_bn_silu(
            l.attrs, l.shape, target, rt.cache(),
            gpu_candidate_bench(rt, stream, l.attrs, l.shape, layout, std::max(1, o.iters)));
        const std::string key = conv2d_problem_key(l.attrs, l.shape);
        if (!tuned.winner) status = failure;
        if (o.common.json) {
            nlohmann::json tried = nlohmann::json::array();
            for (const auto& [us, config] : tuned.timed) tried.push_back({{"config", config}, {"median_us", us}});
            report.push_back({{"layer", key},
                              {"winner", tuned.winner ? nlohmann::json(tuned.winner->config) : nlohmann::json()},
                              {"relative_error", tuned.check.error},
                              {"stored", tuned.winner.has_value()},
                              {"wrong", tuned.wrong},
                              {"refused", tuned.refused},
                              {"tried", tried}});
            continue;
        }
        fmt::print("{} on {} ({}, driver {}): {} configurations\n", key, device.name(), device.arch().name(),
                   target.driver, tuned.timed.size());
        for (const auto& [us, config] : tuned.timed)
            fmt::print("  {:>9.1f} µs  {:>5.2f}x  {}\n", us, us / tuned.timed.front().first, config);
        for (const auto& r : tuned.refused) fmt::print("  did not run: {}\n", r);
        for (const auto& w : tuned.wrong) fmt::print("  WRONG against the reference, passed over: {}\n", w);
        if (tuned.winner)
            fmt::print("  winner {} (error {:.2e} against {}), stored: dispatch uses it from now on\n",
                       tuned.winner->config, tuned.check.error, reference_kind);
        else fmt::print("  no configuration matched {}: nothing stored\n", reference_kind);
        std::fflush(stdout);  // each layer as it is done, also into a pipe
    }
    if (o.common.json) fmt::print("{}\n", report.dump(2));
    return status;
}

void add_run_options(CLI::App& sub, RunOptions& o) {
    sub.add_option("op", o.op, "The op: conv2d_bn_silu or flash_attention2")->required();
    add_layer_options(sub, o.layer);
    add_attention_options(sub, o.attention);
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
    add_run_options(*r, run_options);
    r->add_option("--config", run_options.config, "Configuration KEY=VALUE (repeatable; default: dispatch)");
    r->callback([&exit_code] { exit_code = run(run_options); });

    auto* t = app.add_subcommand("tune", "Time every valid configuration of a layer on the GPU and store the winner");
    add_common_options(*t, tune_options.common, true);
    add_run_options(*t, tune_options);
    t->add_option("--shapes", tune_options.shapes_file, "JSON file of layers to tune instead of one")
        ->check(CLI::ExistingFile);
    t->callback([&exit_code] { exit_code = tune(tune_options); });
}

}  // namespace kjit::cli
