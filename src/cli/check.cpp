// kjit check OP: every configuration of an op's kernels run on the GPU over its built-in layers
// (or the ones given) with fresh random inputs into NaN-poisoned outputs, against the float64
// reference; with --compile-only, compiled for each arch and inspected instead — compile
// failures, register spills, and on sm_90a wgmma that ptxas serialised or a setmaxnreg it
// ignored — the check a build box runs before shipping a cache.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <ranges>
#include <set>
#include <sstream>
#include <thread>

#include "cli.hpp"

namespace kjit::cli {

bool config_holds(const std::string& config, const std::vector<std::string>& words) {
    std::set<std::string> have;
    std::istringstream in(config);
    for (std::string w; in >> w;) have.insert(w);
    return std::ranges::all_of(words, [&](const std::string& w) { return have.contains(w); });
}

namespace {

struct CheckOptions {
    Common common;
    std::string op;
    std::vector<std::string> archs;
    bool compile_only = false, changed_only = false, failed_only = false;
    unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
    LayerOptions layer;
    std::string shapes_file;
    std::vector<std::string> config;
    int iters = 10;
    AttentionOptions attention;
};

bool is_attention(const std::string& op) { return op == attention_op || op.starts_with("flash_attention2_forward"); }

/// The kernel families an op runs: conv2d_bn_silu's every kernel (each mainloop and layout),
/// flash_attention2's (both mainloops and split-KV's combine), or the family of that name.
std::vector<std::string> families_of(const std::string& op) {
    std::vector<std::string> families;
    for (const auto& f : shipped_kernels())
        if (f.name == op || (op == "conv2d_bn_silu" && f.name.starts_with("conv2d_bn_silu_")) ||
            (op == attention_op && f.name.starts_with("flash_attention2_")))  // both mainloops, the combine
            families.emplace_back(f.name);
    if (families.empty()) {
        std::vector<std::string_view> names{"conv2d_bn_silu", attention_op};
        for (const auto& f : shipped_kernels()) names.push_back(f.name);
        throw UsageError(fmt::format("unknown op '{}': kjit check takes {}", op, fmt::join(names, ", ")));
    }
    return families;
}

/// What is wrong with one compiled configuration, or nothing.
std::vector<std::string> faults_of(const CompileOutcome& c) {
    if (!c.result) {
        // The compiler's first error says why; the message's first line only says that it failed.
        const std::string_view e = c.error;
        const std::size_t at = e.find(": error");
        const std::size_t start = at == std::string_view::npos ? 0 : e.rfind('\n', at) + 1;
        return {"does not compile: " + std::string(e.substr(start, e.find('\n', start) - start))};
    }
    std::vector<std::string> faults;
    const auto& compiled = c.result->entry->compiled;
    const auto& r = compiled.resources;
    if (r.spill_store_bytes || r.spill_load_bytes)
        faults.push_back(
            fmt::format("registers spill ({} B stored, {} B loaded)", r.spill_store_bytes, r.spill_load_bytes));
    // ptxas says why it serialised wgmma (C7513, C7515 …) or ignored setmaxnreg (C7508).
    if (compiled.log.find("wgmma.mma_async instructions are serialized") != std::string::npos)
        faults.push_back("ptxas serialised its wgmma");
    if (compiled.log.find("C7508") != std::string::npos) faults.push_back("ptxas ignored its setmaxnreg");
    return faults;
}

int check_compiles(const CheckOptions& o, const std::vector<std::string>& families) {
    if (o.layer.given() || o.attention.given() || !o.shapes_file.empty() || !o.config.empty())
        throw UsageError(
            "--compile-only compiles every configuration of the op's kernels: it takes no layer or attention "
            "problem, --shapes or --config (those choose what runs on the GPU)");
    std::vector<Arch> archs;
    for (const auto& a : o.archs) archs.push_back(Arch::parse(a));
    if (archs.empty()) archs.push_back(local_arch_or_explain("check"));
    const CompileJobs work = compile_jobs(families, archs);
    Runtime& rt = runtime(o.common);

    struct Row {
        const CompileJob* job;
        int registers;
        std::vector<std::string> faults;
    };
    std::vector<Row> rows;
    std::size_t compiled = 0;  // the rest came from the cache: their source and options are unchanged
    const auto started = std::chrono::steady_clock::now();
    const std::size_t threads = compile_in_parallel(rt, work.jobs, o.jobs, [&](const CompileOutcome& c) {
        if (!c.result || c.result->origin == Origin::compiled) ++compiled;
        rows.push_back({c.job, c.result ? c.result->entry->compiled.resources.registers : 0, faults_of(c)});
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The failing configurations last, each group in the registry's order.
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
        if (a.faults.empty() != b.faults.empty()) return a.faults.empty();
        return a.job < b.job;
    });
    const auto failing = std::ranges::count_if(rows, [](const Row& r) { return !r.faults.empty(); });
    if (o.common.json) {
        nlohmann::json list = nlohmann::json::array();
        for (const Row& r : rows)
            list.push_back({{"kernel", r.job->kernel->id()},
                            {"arch", r.job->arch.name()},
                            {"registers", r.registers},
                            {"ok", r.faults.empty()},
                            {"faults", r.faults}});
        fmt::print("{}\n", nlohmann::json{{"op", o.op},
                                          {"configurations", list},
                                          {"failed", failing},
                                          {"compiled", compiled},
                                          {"other_arch", work.other_arch},
                                          {"seconds", seconds}}
                               .dump(2));
    } else {
        fmt::print("{:<64} {:<7} {:>9}  {}\n", "configuration", "arch", "registers", "result");
        for (const Row& r : rows)
            fmt::print("{:<64} {:<7} {:>9}  {}\n", r.job->kernel->id(), r.job->arch.name(),
                       r.registers ? std::to_string(r.registers) : "-",
                       r.faults.empty() ? "ok" : fmt::format("FAIL: {}", fmt::join(r.faults, "; ")));
        fmt::print(
            "{}: {} configurations for {} ({} compiled, {} unchanged from the cache) in {:.1f} s ({} jobs): {} "
            "ok, {} failed{}\n",
            o.op, rows.size(), fmt::join(archs | std::views::transform([](Arch a) { return a.name(); }), ", "),
            compiled, rows.size() - compiled, seconds, threads, rows.size() - failing, failing,
            work.other_arch ? fmt::format("; {} built for other archs only, not checked", work.other_arch)
                            : std::string());
    }
    return failing ? failure : ok;
}

// ---- on the GPU ---------------------------------------------------------------------------------

/// One configuration on one input: the op, and what came of it.
struct Trial {
    Trial(std::size_t input_, std::string config_, std::shared_ptr<const RuntimeOp> op_, bool channels_last_ = false)
        : input(input_), config(std::move(config_)), op(std::move(op_)), channels_last(channels_last_) {}

    std::size_t input;   ///< index into the inputs
    std::string config;  ///< as --config and kjit run write it (elementwise ops: the kernel)
    std::shared_ptr<const RuntimeOp> op;
    bool channels_last;
    std::optional<OutputCheck> output;
    double us = NAN;
    std::string fault;  ///< why it failed: its kernel did not compile, its launch failed, its output
    bool ran = false;

    [[nodiscard]] bool failed() const { return !fault.empty(); }
};

/// What the trials of one input run on.
struct Input {
    std::string name, why;                  ///< the layer's key or the op on its shapes; the edge it is for
    std::optional<Layer> layer;             ///< conv inputs
    std::optional<ElementwiseCase> values;  ///< elementwise inputs
};

/// The conv trials: every configuration of the layers (those of `family`, matching --config).
void conv_trials(const CheckOptions& o, const std::string& family, const DeviceTraits& device,
                 std::vector<Input>& inputs, std::vector<Trial>& trials) {
    std::vector<CheckLayer> layers;
    if (o.layer.given()) layers.push_back({layer_of(o.layer), "the layer given"});
    else if (!o.shapes_file.empty())
        for (const Layer& l : parse_layers(read_option_file(o.shapes_file, "--shapes"), "--shapes " + o.shapes_file))
            layers.push_back({l, "from --shapes"});
    else layers.assign(conv_check_layers().begin(), conv_check_layers().end());
    for (const auto& [layer, why] : layers) {
        check_fits_host(layer);
        const std::size_t input = inputs.size();
        inputs.push_back({conv2d_problem_key(layer.attrs, layer.shape), why, layer, std::nullopt});
        for (const auto& config : conv2d_bn_silu_configurations(layer.attrs, layer.shape, device)) {
            if (!config_holds(config, o.config)) continue;
            std::shared_ptr<const Conv2dOp> op = make_conv2d_bn_silu(layer.attrs, layer.shape, config, device);
            if (family != "conv2d_bn_silu" && op->kernel().name() != family) continue;
            trials.emplace_back(input, config, op, config.starts_with("NHWC=1"));
        }
    }
}

void elementwise_trials(const CheckOptions& o, const std::string& family, std::vector<Input>& inputs,
                        std::vector<Trial>& trials) {
    if (!o.shapes_file.empty() || !o.config.empty())
        throw UsageError(
            fmt::format("{} has one configuration and takes no --shapes or --config: give its input "
                        "with --batch --cin --hw, or none for its built-in shapes",
                        family));
    for (auto& c : elementwise_check_cases(family, o.layer)) {
        std::vector<ShapeView> shapes(c.inputs.begin(), c.inputs.end());
        (void)c.op->compute_concrete_output_shape(shapes, {});  // a shape the op refuses: said now
        trials.emplace_back(inputs.size(), c.op->kernel_for_launch(0).id(), c.op);
        inputs.push_back({c.name, "", std::nullopt, std::move(c)});
    }
}

/// What compiling the trials' kernels found.
struct Compiled {
    std::size_t kernels = 0;
    std::set<std::string> compiled;             ///< ids not found in the cache: new, or their source changed
    std::map<std::string, std::string> failed;  ///< the first compiler error, by id
};

/// Compiles every trial's kernels on all cores.
Compiled compile_trials(const std::vector<Trial>& trials, Runtime& rt, Arch arch, unsigned jobs) {
    std::map<std::string, const Kernel*> kernels;
    for (const Trial& t : trials)
        for (std::size_t launch = 0; launch < t.op->n_launches(); ++launch)
            kernels.emplace(t.op->kernel_for_launch(launch).id(), &t.op->kernel_for_launch(launch));
    std::vector<CompileJob> work;
    for (const auto& [id, k] : kernels) work.push_back({k, k->target(arch)});
    Compiled out;
    out.kernels = work.size();
    compile_in_parallel(rt, work, jobs, [&](const CompileOutcome& c) {
        const std::string& id = c.job->kernel->id();
        if (!c.result || c.result->origin == Origin::compiled) out.compiled.insert(id);
        if (!c.result) out.failed.emplace(id, faults_of(c).front());
    });
    return out;
}

/// Runs a trial: its output checked, then timed.
void run_trial(Trial& t, Runtime& rt, const Stream& stream, const OpCall& call, std::span<const double> ref,
               double tolerance, std::size_t row_padding, int iters, Scalar output_type = Scalar::f32) {
    t.ran = true;
    try {
        t.output = checked_forward(*t.op, rt, stream, call.inputs, call.params, call.output_shape, ref, tolerance,
                                   row_padding, nullptr, output_type);
        if (!t.output->passed()) t.fault = describe_faults(*t.output, call.output_shape);
        t.us = time_forward(*t.op, rt, stream, call, iters);
    } catch (const Error& e) {
        t.fault = fmt::format("{}", e.what());
    }
}

/// Runs the trials of one conv layer, on one draw of its tensors in each layout they need.
void run_conv_input(const Input& in, std::span<Trial*> trials, Runtime& rt, const Stream& stream, int iters) {
    const Layer& l = *in.layer;
    const ConvValues values(l.attrs, l.shape);
    const auto ref = conv2d_bn_silu_reference(values.x, values.w, values.scale, values.shift, l.attrs, l.shape);
    std::optional<ConvTensors> nchw, nhwc;
    std::vector<double> ref_nhwc;
    // Rows padded by 16 bytes: the padding is checked untouched, and TMA still stores the rows.
    constexpr std::size_t row_padding = 4;
    for (Trial* t : trials) {
        auto& tensors = t->channels_last ? nhwc : nchw;
        if (!tensors) tensors.emplace(stream.device(), l.attrs, l.shape, t->channels_last, values);
        const Shape& y = tensors->y_shape();
        if (t->channels_last && ref_nhwc.empty()) ref_nhwc = to_channels_last<double>(ref, y[0], y[3], y[1] * y[2]);
        const auto& op = dynamic_cast<const Conv2dOp&>(*t->op);
        run_trial(*t, rt, stream, tensors->call(op), t->channels_last ? ref_nhwc : ref, conv_tolerance(op), row_padding,
                  iters);
    }
}

/// `values` on the device as `type`; 16-bit ones are rounded to it first, in place, so that they
/// are what the device holds.
DeviceBuffer upload_as(const Device& device, std::vector<float>& values, Scalar type) {
    DeviceBuffer buffer(device, values.size() * byte_size(type));
    if (type == Scalar::f32) {
        buffer.upload(std::span<const float>(values));
        return buffer;
    }
    std::vector<std::uint16_t> bits(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        bits[i] = to_16bit(values[i], type);
        values[i] = from_16bit(bits[i], type);
    }
    buffer.upload(std::span<const std::uint16_t>(bits));
    return buffer;
}

void run_elementwise_input(const Input& in, std::span<Trial*> trials, Runtime& rt, const Stream& stream, int iters) {
    const ElementwiseCase& c = *in.values;
    std::mt19937_64 rng{std::random_device{}()};
    std::uniform_real_distribution<float> unit(-1, 1);
    std::vector<std::vector<float>> values;
    std::vector<DeviceBuffer> buffers;
    std::vector<Tensor> tensors;
    for (const Shape& s : c.inputs) {
        auto& v = values.emplace_back(element_count(s));
        for (auto& e : v) e = unit(rng);
        buffers.push_back(upload_as(stream.device(), v, c.input_type));
    }
    std::vector<ShapeView> shapes;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        tensors.push_back({buffers[i].as<void>(), c.inputs[i]});
        shapes.push_back(c.inputs[i]);
    }
    const auto ref = c.reference(values);
    for (Trial* t : trials) {
        const Shape y_shape = t->op->compute_concrete_output_shape(shapes, {});
        const DeviceBuffer y(stream.device(),
                             (1 + t->op->n_chained_outputs()) * element_count(y_shape) * byte_size(c.output_type));
        const std::vector<Tensor> chained = chained_outputs_after(*t->op, y.as<void>(), y_shape);
        const OpCall call{.inputs = tensors,
                          .params = {},
                          .output = y.as<void>(),
                          .output_shape = y_shape,
                          .output_row_stride = static_cast<int>(t->op->forward_output_row_elems(y_shape)),
                          .chained_outputs = chained};
        run_trial(*t, rt, stream, call, ref, c.tolerance, 0, iters, c.output_type);
    }
}

void print_trials(const CheckOptions& o, const std::vector<Input>& inputs, std::vector<Trial>& trials,
                  const Device& device, std::size_t kernels, std::size_t compiled, double seconds) {
    const auto ran = std::ranges::count_if(trials, [](const Trial& t) { return t.ran || t.failed(); });
    const auto failing = std::ranges::count_if(trials, &Trial::failed);
    // Each input's failing configurations after its passing ones, and the failures again at the end.
    std::ranges::stable_sort(trials, [](const Trial& a, const Trial& b) {
        return a.input != b.input ? a.input < b.input : !a.failed() && b.failed();
    });
    if (o.common.json) {
        nlohmann::json runs = nlohmann::json::array();
        for (const Trial& t : trials) {
            if ((!t.ran && !t.failed()) || (o.failed_only && !t.failed())) continue;
            runs.push_back({{"input", inputs[t.input].name},
                            {"config", t.config},
                            {"kernel", t.op->kernel_for_launch(0).id()},
                            {"passed", !t.failed()},
                            {"relative_error", t.output ? nlohmann::json(t.output->error) : nlohmann::json()},
                            {"tolerance", t.output ? nlohmann::json(t.output->tolerance) : nlohmann::json()},
                            {"median_us", std::isnan(t.us) ? nlohmann::json() : nlohmann::json(t.us)},
                            {"fault", t.fault}});
        }
        fmt::print("{}\n", nlohmann::json{{"op", o.op},
                                          {"device", device.name()},
                                          {"arch", device.arch().name()},
                                          {"kernels", kernels},
                                          {"compiled", compiled},
                                          {"runs", runs},
                                          {"not_rerun", trials.size() - ran},
                                          {"failed", failing},
                                          {"reference", reference_kind},
                                          {"seconds", seconds}}
                               .dump(2));
        return;
    }
    std::size_t shown = inputs.size();
    for (const Trial& t : trials) {
        if ((!t.ran && !t.failed()) || (o.failed_only && !t.failed())) continue;
        if (t.input != shown) {
            shown = t.input;
            const Input& in = inputs[t.input];
            fmt::print("\n{}{}\n  {:<64} {:>9}  {:<6} {:>9}\n", in.name,
                       in.why.empty() ? "" : fmt::format(" ({})", in.why), "configuration", "error", "result", "µs");
        }
        fmt::print("  {:<64} {:>9}  {:<6} {:>9}\n", t.config, t.output ? fmt::format("{:.2e}", t.output->error) : "-",
                   t.failed() ? "FAIL" : "ok", std::isnan(t.us) ? "-" : fmt::format("{:.1f}", t.us));
    }
    if (failing) {
        fmt::print("\nfailed:\n");
        for (const Trial& t : trials)
            if (t.failed()) fmt::print("  {} [{}]: {}\n", inputs[t.input].name, t.config, t.fault);
    }
    fmt::print(
        "\n{} on {} ({}): {} configurations on {} inputs against {}; {} kernels ({} compiled, {} unchanged from the "
        "cache){}; {:.1f} s: {} ok, {} failed\n",
        o.op, device.name(), device.arch().name(), ran, inputs.size(), reference_kind, kernels, compiled,
        kernels - compiled,
        trials.size() > std::size_t(ran)
            ? fmt::format("; {} configurations of unchanged kernels not rerun (--changed)", trials.size() - ran)
            : std::string(),
        seconds, ran - failing, failing);
}

/// kjit check flash_attention2 (or one of its two families): the problem's options, not a layer's.
int check_attention_on_gpu(const CheckOptions& o) {
    if (o.layer.given() || o.layer.window_given() || o.layer.groups != 1 || !o.shapes_file.empty() || o.changed_only)
        throw UsageError(
            fmt::format("{} takes --batch, --heads, --kv-heads, --seq, --kv-seq, --head-dim, --dtype, --causal and "
                        "--layout (or none, for its built-in problems), not a conv layer's options, --shapes or "
                        "--changed",
                        o.op));
    return check_attention(o.common, o.layer.batch, o.attention, o.config, o.op, o.failed_only, o.iters);
}

int check_on_gpu(const CheckOptions& o, const std::vector<std::string>& families) {
    const bool conv = o.op.starts_with("conv2d_bn_silu");
    if (!o.archs.empty())
        throw UsageError("--arch is for --compile-only: on the GPU, kjit check runs the local device's arch");
    if (is_attention(o.op)) return check_attention_on_gpu(o);
    if (o.attention.given())
        throw UsageError(
            fmt::format("--heads, --seq, --head-dim, --dtype, --causal and --layout are {}'s: {} takes a layer or its "
                        "built-in ones",
                        attention_op, o.op));
    if (!conv && !is_elementwise_family(o.op))
        throw UsageError(
            fmt::format("{} is a kernel with no op to run against a reference: kjit check {} "
                        "--compile-only checks that its configurations compile",
                        o.op, o.op));
    // What is wrong with the input is said before a GPU is asked for. The configurations are the
    // local device's where there is one (checking_device), so they need not be listed again.
    std::vector<Input> inputs;
    std::vector<Trial> trials;
    if (conv) conv_trials(o, families.size() == 1 ? families[0] : o.op, checking_device(), inputs, trials);
    else elementwise_trials(o, o.op, inputs, trials);

    if (trials.empty())
        throw UsageError(fmt::format(
            "no configuration of {} takes {}{}", o.op,
            o.layer.given() || !o.shapes_file.empty() ? "the layers given" : "its built-in layers",
            o.config.empty() ? ""
                             : fmt::format(" and holds {} (kjit tune lists a layer's)", fmt::join(o.config, " "))));
    const Device device = gpu_or_explain("check");
    Runtime& rt = runtime(o.common);
    const auto started = std::chrono::steady_clock::now();
    const auto [kernels, compiled, failed] = compile_trials(trials, rt, device.arch(), o.jobs);
    Stream stream(device);
    const bool progress = isatty(STDERR_FILENO);  // a line rewritten in place: for a terminal only
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        std::vector<Trial*> mine;
        for (Trial& t : trials) {
            if (t.input != i) continue;
            const std::string& id = t.op->kernel_for_launch(0).id();
            if (const auto f = failed.find(id); f != failed.end()) t.fault = f->second;
            else if (!o.changed_only || compiled.contains(id)) mine.push_back(&t);
        }
        if (mine.empty()) continue;
        if (inputs[i].layer) run_conv_input(inputs[i], mine, rt, stream, o.iters);
        else run_elementwise_input(inputs[i], mine, rt, stream, o.iters);
        if (progress) fmt::print(stderr, "\rkjit check: {} of {} inputs run", i + 1, inputs.size());
    }
    if (progress) fmt::print(stderr, "\n");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    print_trials(o, inputs, trials, device, kernels, compiled.size(), seconds);
    return std::ranges::any_of(trials, &Trial::failed) ? failure : ok;
}

}  // namespace

void add_check(CLI::App& app, int& exit_code) {
    auto* sub = app.add_subcommand(
        "check",
        "Run every configuration of an op's kernels on the GPU, over its built-in edge-case layers or the ones given, "
        "against the float64 reference (NaN-poisoned outputs, fresh random inputs): error, pass/fail, µs; exit 1 on "
        "any failure. With --compile-only, compile each for each arch and report compile failures, spills and "
        "serialised wgmma instead (needs no GPU)");
    static CheckOptions o;
    add_common_options(*sub, o.common, true);
    sub->add_option(
           "op", o.op,
           "conv2d_bn_silu (every conv kernel), one conv kernel family (conv2d_bn_silu_depthwise_forward …), "
           "flash_attention2 (both attention kernels, or one: flash_attention2_forward_sm90 …), add, cast, "
           "concat_channels, maxpool2d, maxpool2d_chain or upsample_nearest2d; with --compile-only any shipped "
           "kernel")
        ->required();
    add_layer_options(*sub, o.layer);
    add_attention_options(*sub, o.attention);
    sub->add_option("--shapes", o.shapes_file, "JSON file of conv layers to run (as kjit tune --shapes takes)")
        ->check(CLI::ExistingFile);
    sub->add_option("--config", o.config,
                    "Only the configurations holding KEY=VALUE (repeatable: TMA=1, SPLIT_K=2, BLOCK_M=64 …)");
    sub->add_option("--iters", o.iters, "Timed graph replays a configuration (default 10)")->check(positive_int);
    sub->add_flag("--changed", o.changed_only,
                  "Run only the configurations whose kernel this command compiled: those whose source changed "
                  "(KJIT_KERNELS_DIR) or that the cache lacked");
    sub->add_flag("--failed", o.failed_only,
                  "List only the configurations that failed (the summary still counts every one run)");
    sub->add_flag("--compile-only", o.compile_only, "Compile and inspect every configuration; run none");
    sub->add_option("--arch", o.archs,
                    "With --compile-only: target arch, e.g. sm_90a (repeatable; default: the local GPU's)");
    sub->add_option("-j,--jobs", o.jobs, "Parallel compiles (default: the core count)")->check(positive_int);
    sub->footer(R"(The kernel-developer loop:
  kjit check conv2d_bn_silu_depthwise_forward       every configuration on the built-in layers
  cp -r kernels_src mine && $EDITOR mine/conv2d_bn_silu_depthwise_forward.cu
  KJIT_KERNELS_DIR=mine kjit check conv2d_bn_silu_depthwise_forward
                                                    recompiles exactly the configurations whose source
                                                    changed (says how many, on all cores), reruns them all
  KJIT_KERNELS_DIR=mine kjit check conv2d_bn_silu --changed      only the recompiled ones, every conv kernel
  kjit check conv2d_bn_silu --batch 8 --cin 96 --cout 96 --hw 56 56 --kernel-size 3 3 --pad 1 --groups 96
                                                    one layer of yours, every configuration
  kjit check conv2d_bn_silu --compile-only --arch sm_90a --arch sm_80      a build box without a GPU

The layer options each op takes (others are refused, not ignored):
  conv2d_bn_silu and its families   --batch --cin --cout --hw, --kernel-size --stride --pad --groups
  maxpool2d                         --batch --cin --hw, a square --kernel-size K K, --stride, --pad
  maxpool2d_chain                   --batch --cin --hw, an odd square --kernel-size K K (stride 1, pad K/2)
  concat_channels                   --batch --cin --hw, --cout (the second input's channels)
  add, upsample_nearest2d           --batch --cin --hw
  cast                              --batch --cin --hw (every pair of f32, f16 and bf16, bit for bit)
  flash_attention2 and its families --batch --heads --seq, [--kv-heads --kv-seq --head-dim --dtype --causal
                                    --layout]; none: its built-in problems (ragged, grouped, causal, one
                                    query, no keys, head dim 96, both layouts)
A pool's --kernel-size given without a layer runs on the built-in shapes.)");
    sub->callback([&exit_code] {
        const std::vector<std::string> families = families_of(o.op);
        exit_code = o.compile_only ? check_compiles(o, families) : check_on_gpu(o, families);
    });
}

}  // namespace kjit::cli
