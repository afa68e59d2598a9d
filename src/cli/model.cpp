// kjit model plan / run / tune: a graph of ops (docs/MODEL.md) planned for a batch size and its
// weights checked, without a GPU (plan); on the GPU, per-node times, the whole forward and its
// CUDA graph replay, inputs from a safetensors file or random, outputs saved on request (run);
// every distinct conv layer of the graph tuned for several batch sizes (tune).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include <kjit/attention.hpp>
#include <kjit/model.hpp>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct ModelOptions {
    Common common;
    std::string graph, weights, input, save_outputs, arch;
    int batch = 1, iters = 100, multiprocessors = 0, max_shared_bytes = 0;
    bool replay = false;
    PlanOptions planning;
    std::vector<int> batches{1};  ///< tune
    bool retune = false;          ///< tune: time layers that have a winner again
};

/// The graph planned for the batch and, with --weights, its weights read once and checked: what
/// a build box can know of a model without a GPU, and what `run` then loads.
struct CheckedModel {
    ModelPlan plan;
    std::optional<SafetensorsFile> weights_file;
    std::optional<WeightsReport> weights;
};

CheckedModel check_model(const ModelOptions& o, const DeviceTraits& device) {
    CheckedModel m{ModelPlan::from_json(read_option_file(o.graph, "the graph"), o.batch, device, o.planning), {}, {}};
    if (o.weights.empty()) return m;
    m.weights_file.emplace(o.weights);  // its errors name the file
    try {
        m.weights = check_weights(m.plan, m.weights_file->tensors());
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", o.weights, e.what()));
    }
    return m;
}

std::string shape_text(ShapeView shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }
/// A value's shape, and its element type where it is not f32: "[1,8,256,64] bf16".
std::string value_text(const ModelPlan::Value& v) {
    return v.type == Scalar::f32 ? shape_text(v.shape) : fmt::format("{} {}", shape_text(v.shape), short_name(v.type));
}

int plan_model(const ModelOptions& o) {
    const auto [device, device_text] = planning_device(o.arch, o.multiprocessors, o.max_shared_bytes);
    const CheckedModel m = check_model(o, device);
    const ModelPlan& plan = m.plan;
    nlohmann::json nodes = nlohmann::json::array();
    std::size_t slots = 0;
    struct Row {
        std::string node, op, inputs, output, params;
        std::vector<std::string> launches;
    };
    std::vector<Row> rows;
    for (const auto& node : plan.nodes()) {
        std::vector<ShapeView> in_shapes;
        std::vector<std::string> in_names;
        for (std::size_t v : node.inputs) {
            in_shapes.push_back(plan.values()[v].shape);
            in_names.push_back(plan.values()[v].name);
        }
        const Shape& out = plan.values()[node.output].shape;
        Row row{node.name,
                node.op_name,
                fmt::format("{}", fmt::join(in_names, ",")),
                value_text(plan.values()[node.output]),
                {},
                {}};
        nlohmann::json params = nlohmann::json::array(), kernels = nlohmann::json::array();
        std::vector<std::string> param_texts;
        for (const auto& p : node.params) {
            params.push_back({{"key", p.key}, {"shape", p.shape}});
            param_texts.push_back(p.key.substr(node.name.size() + 1) + shape_text(p.shape));
        }
        row.params = fmt::format("{}", fmt::join(param_texts, " "));
        slots += node.params.size();
        nlohmann::json j{{"name", node.name},
                         {"op", node.op_name},
                         {"inputs", in_names},
                         {"shape", out},
                         {"dtype", short_name(plan.values()[node.output].type)},
                         {"params", params}};
        if (const auto& at = plan.storage()[node.output]; at.value != node.output) {
            const auto& whole = plan.values()[at.value];
            j["written_into"] = {{"value", whole.name}, {"channel", at.channel}};
            row.launches.push_back(
                fmt::format("writes  into {} channels {}..{}", whole.name, at.channel, at.channel + out[1] - 1));
        }
        if (node.residual) {
            j["residual"] = plan.values()[*node.residual].name;
            row.launches.push_back(fmt::format("adds    {} in its epilogue", plan.values()[*node.residual].name));
        }
        if (!node.chained.empty()) {
            std::vector<std::string> names;
            for (std::size_t v : node.chained) names.push_back(plan.values()[v].name);
            j["chained"] = names;
            row.launches.push_back(fmt::format("writes  {} too, in the same launch", fmt::join(names, ", ")));
        }
        if (node.fused()) {
            const auto& maker = plan.nodes()[*node.made_by];
            j["fused"] = true;
            j["made_by"] = maker.name;
            row.launches.push_back(std::ranges::find(maker.chained, node.output) != maker.chained.end()
                                       ? fmt::format("no launch: node '{}' writes it in its launch", maker.name)
                                       : fmt::format("no launch: node '{}' adds it in its epilogue", maker.name));
            nodes.push_back(std::move(j));
            rows.push_back(std::move(row));
            continue;
        }
        if (node.op->is_channel_concat()) {  // copies of the inputs not placed, no launch of its own
            nlohmann::json copies = nlohmann::json::array();
            for (const auto& c : node.copies) {
                copies.push_back({{"input", in_names[c.input]}, {"reason", c.reason}});
                row.launches.push_back(fmt::format("copy    {}: {}", in_names[c.input], c.reason));
            }
            if (node.copies.empty()) row.launches.push_back("no launch: every input is written in place");
            j["copies"] = copies;
            nodes.push_back(std::move(j));
            rows.push_back(std::move(row));
            continue;
        }
        const RuntimeOp& op = node.launched_op();
        for (std::size_t l = 0; l < op.n_launches(); ++l) {
            const Dims grid = [&] {
                try {
                    return op.grid_for_launch(l, in_shapes, out);
                } catch (const UsageError& e) {
                    throw UsageError(fmt::format("node '{}': {}", node.name, e.what()));
                }
            }();
            const Dims block = op.block();
            const unsigned shared = op.shared_bytes_for_launch(l);
            const std::string& kernel = op.kernel_for_launch(l).id();
            kernels.push_back({{"kernel", kernel}, {"grid", grid}, {"block", block}, {"shared_bytes", shared}});
            row.launches.push_back(fmt::format("launch  {} grid {}x{}x{} block {}{}", kernel, grid[0], grid[1], grid[2],
                                               block[0], shared ? fmt::format(" shared {} B", shared) : ""));
        }
        j["launches"] = kernels;
        nodes.push_back(std::move(j));
        rows.push_back(std::move(row));
    }
    if (o.common.json) {
        nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
        for (std::size_t v : plan.inputs())
            inputs.push_back({{"name", plan.values()[v].name},
                              {"shape", plan.values()[v].shape},
                              {"dtype", short_name(plan.values()[v].type)}});
        for (std::size_t v : plan.outputs())
            outputs.push_back({{"name", plan.values()[v].name},
                               {"shape", plan.values()[v].shape},
                               {"dtype", short_name(plan.values()[v].type)}});
        nlohmann::json j{{"graph", o.graph},   {"batch", o.batch}, {"device", device_text},      {"inputs", inputs},
                         {"outputs", outputs}, {"nodes", nodes},   {"launches", plan.launches()}};
        if (m.weights)
            j["weights"] = {{"file", o.weights},
                            {"slots_filled", m.weights->loaded},
                            {"batch_norms_folded", m.weights->folded},
                            {"extra", m.weights->extra}};
        fmt::print("{}\n", j.dump(2));
        return ok;
    }
    fmt::print("{}, batch {}, planned for {}: {} nodes, {} parameter slots, {} launches and copies\n", o.graph, o.batch,
               device_text, plan.nodes().size(), slots, plan.launches());
    for (std::size_t v : plan.inputs())
        fmt::print("input {} {}\n", plan.values()[v].name, value_text(plan.values()[v]));
    for (const Row& r : rows) {
        fmt::print("{:<24} {:<18} {:<20} <- {}\n", r.node, r.op, r.output, r.inputs);
        if (!r.params.empty()) fmt::print("    params  {}\n", r.params);
        for (const auto& l : r.launches) fmt::print("    {}\n", l);
    }
    for (std::size_t v : plan.outputs())
        fmt::print("output {} {}\n", plan.values()[v].name, value_text(plan.values()[v]));
    if (m.weights)
        fmt::print("weights {}: every slot fits ({} filled, {} BatchNorms folded{})\n", o.weights, m.weights->loaded,
                   m.weights->folded,
                   m.weights->extra.empty() ? "" : fmt::format(", {} tensors no slot takes", m.weights->extra.size()));
    else fmt::print("weights: not checked (--weights FILE checks them)\n");
    return ok;
}

/// Wall milliseconds since the last lap (or since it was made).
class Stopwatch {
public:
    double lap_ms() {
        const auto now = std::chrono::steady_clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - mark_).count();
        mark_ = now;
        return ms;
    }

private:
    std::chrono::steady_clock::time_point mark_ = std::chrono::steady_clock::now();
};

/// Median ms of `work` over `iters` runs on `stream`, each between two events.
template <class Work>
double time_ms(const Device& device, const Stream& stream, int iters, Work&& work) {
    std::vector<double> ms;
    Event start(device), stop(device);
    for (int i = 0; i < iters; ++i) {
        start.record(stream);
        work();
        stop.record(stream);
        stop.synchronize();
        ms.push_back(Event::elapsed_ms(start, stop));
    }
    return median(ms);
}

int run_model(const ModelOptions& o) {
    // The graph and the weights are checked first: their errors need no GPU to be found, and on
    // a GPU are found before every kernel is compiled and loaded. The graph is planned once and
    // the weights are read once.
    const DeviceTraits traits = checking_device();  // the driver initialised: not the model's start
    Stopwatch watch;
    CheckedModel checked = check_model(o, traits);
    if (o.weights.empty()) {  // a graph of ops without weights (casts, attention) runs without a file
        std::vector<std::string> slots;
        for (const auto& node : checked.plan.nodes())
            for (std::size_t p = 0; p < node.params.size(); ++p)
                if (node.op->param_is_weight(p)) slots.push_back(node.params[p].key);
        if (!slots.empty())
            throw UsageError(
                fmt::format("the graph has {} weight slots ({}{}): give --weights FILE", slots.size(),
                            fmt::join(std::span(slots).first(std::min<std::size_t>(3, slots.size())), ", "),
                            slots.size() > 3 ? ", …" : ""));
    }
    const double check_ms = watch.lap_ms();
    const Device device = gpu_or_explain("model run");
    Stream stream(device);
    Runtime& rt = runtime(o.common);
    (void)watch.lap_ms();  // the context and the cache opened: not the model's start
    LoadedModel model = LoadedModel::load(std::move(checked.plan), device, rt);
    (void)watch.lap_ms();
    const WeightsReport weights = checked.weights_file ? model.load_weights(checked.weights_file->tensors())
                                                       : WeightsReport{};
    const double weights_ms = watch.lap_ms();
    const ModelPlan& plan = model.plan();

    // Inputs: from --input by name, else random in [-1, 1) (never zeros).
    std::string input_bytes;
    std::map<std::string, SafeTensor> given;
    if (!o.input.empty()) {
        input_bytes = read_option_file(o.input, "--input");
        given = parse_safetensors(std::as_bytes(std::span(input_bytes)));
    }
    std::vector<DeviceBuffer> buffers;
    std::vector<void*> inputs;
    std::mt19937 rng(0);
    std::uniform_real_distribution<float> unit(-1, 1);
    for (std::size_t v : plan.inputs()) {
        const auto& [name, shape, type] = plan.values()[v];
        std::vector<std::byte> bytes(element_count(shape) * byte_size(type));
        if (auto it = given.find(name); it != given.end()) {
            const char* dtype = type == Scalar::f32 ? "F32" : type == Scalar::f16 ? "F16" : "BF16";  // safetensors
            if (it->second.dtype != dtype || it->second.shape != shape)
                throw UsageError(fmt::format("--input: '{}' is {} [{}], the graph needs {} [{}]", name,
                                             it->second.dtype, fmt::join(it->second.shape, ", "), dtype,
                                             fmt::join(shape, ", ")));
            std::memcpy(bytes.data(), it->second.data.data(), it->second.data.size());
        } else if (!o.input.empty()) {
            throw UsageError(fmt::format("--input {} has no tensor '{}'", o.input, name));
        } else {
            for (std::size_t k = 0; k < element_count(shape); ++k) {
                const float x = unit(rng);
                if (type == Scalar::f32) std::memcpy(bytes.data() + 4 * k, &x, 4);
                else {
                    const std::uint16_t h = to_16bit(x, type);
                    std::memcpy(bytes.data() + 2 * k, &h, 2);
                }
            }
        }
        buffers.emplace_back(device, bytes.size());
        buffers.back().upload(std::span<const std::byte>(bytes));
        inputs.push_back(buffers.back().as<void>());
    }

    (void)watch.lap_ms();  // the inputs are the caller's
    (void)model.forward(inputs, stream);
    stream.synchronize();
    const double first_forward_ms = watch.lap_ms();
    (void)model.read_output(0, stream);
    const double first_output_ms = watch.lap_ms();
    const LoadTimes& load = model.load_times();
    const double start_ms = check_ms + load.plan_ms + load.buffers_ms + load.kernels_ms + weights_ms +
                            first_forward_ms + first_output_ms;
    const auto node_ms = model.node_times_ms(inputs, stream, o.iters);
    const double forward_ms = time_ms(device, stream, o.iters, [&] { (void)model.forward(inputs, stream); });
    std::optional<double> replay_ms;
    if (o.replay) {
        model.capture(inputs, stream);
        model.replay(stream);
        replay_ms = time_ms(device, stream, o.iters, [&] { model.replay(stream); });
    }
    if (!o.save_outputs.empty()) {
        std::vector<std::vector<float>> values;
        std::vector<NamedTensor> named;
        for (std::size_t i = 0; i < plan.outputs().size(); ++i) values.push_back(model.read_output(i, stream));
        for (std::size_t i = 0; i < plan.outputs().size(); ++i) {
            const auto& v = plan.values()[plan.outputs()[i]];
            named.push_back({v.name, v.shape, values[i]});
        }
        write_safetensors(o.save_outputs, named);
    }

    const double node_sum_ms = std::accumulate(node_ms.begin(), node_ms.end(), 0.0);
    if (o.common.json) {
        nlohmann::json nodes = nlohmann::json::array();
        for (std::size_t n = 0; n < plan.nodes().size(); ++n) {
            const auto& node = plan.nodes()[n];
            nodes.push_back({{"name", node.name},
                             {"op", node.op_name},
                             {"kernel", node.launched_op().kernel_for_launch(0).id()},
                             {"shape", plan.values()[node.output].shape},
                             {"ms", node_ms[n]}});
        }
        nlohmann::json j{{"device", device.name()},
                         {"batch", o.batch},
                         {"nodes", nodes},
                         {"node_sum_ms", node_sum_ms},
                         {"forward_ms", forward_ms},
                         {"iters", o.iters},
                         {"launches", plan.launches()},
                         {"weights_folded_bn", weights.folded},
                         {"start_ms",
                          {{"total", start_ms},
                           {"graph_read_plan_weights_check", check_ms},
                           {"tuned_picks", load.plan_ms},
                           {"buffers", load.buffers_ms},
                           {"kernels_read_and_loaded", load.kernels_ms},
                           {"kernel_cache_reads_thread_sum", load.kernel_fetch_thread_ms},
                           {"module_loads_thread_sum", load.module_load_thread_ms},
                           {"weights_upload", weights_ms},
                           {"first_forward", first_forward_ms},
                           {"first_output_read", first_output_ms}}}};
        if (replay_ms) j["replay_ms"] = *replay_ms;
        fmt::print("{}\n", j.dump(2));
        return ok;
    }
    fmt::print("{} on {}, batch {}: {} nodes, {} parameter tensors ({} BatchNorms folded)\n", o.graph, device.name(),
               o.batch, plan.nodes().size(), weights.loaded, weights.folded);
    fmt::print("{:<28} {:<20} {:<22} {:>10}\n", "node", "op", "output", "ms");
    for (std::size_t n = 0; n < plan.nodes().size(); ++n) {
        const auto& node = plan.nodes()[n];
        fmt::print("{:<28} {:<20} {:<22} {:>10.4f}\n", node.name, node.op_name,
                   fmt::format("[{}]", fmt::join(plan.values()[node.output].shape, ",")), node_ms[n]);
    }
    fmt::print("sum of nodes {:.3f} ms; forward {:.3f} ms (median of {}), {} launches and copies", node_sum_ms,
               forward_ms, o.iters, plan.launches());
    if (replay_ms) fmt::print("; CUDA graph replay {:.3f} ms", *replay_ms);
    fmt::print(
        "\nstart to the first output on the host {:.1f} ms: graph read, planned and weights checked {:.1f}, tuned "
        "picks {:.1f}, buffers {:.1f}, kernels read from the cache and loaded {:.1f} (in parallel; summed over the "
        "threads, cache reads {:.1f} and module loads {:.1f}), weights upload {:.1f}, first forward {:.1f}, its first "
        "output read {:.1f}\n",
        start_ms, check_ms, load.plan_ms, load.buffers_ms, load.kernels_ms, load.kernel_fetch_thread_ms,
        load.module_load_thread_ms, weights_ms, first_forward_ms, first_output_ms);
    return ok;
}

/// One distinct conv layer of a graph over the batches tuned: the nodes it serves, and what
/// tuning found.
struct GraphLayer {
    ModelPlan::ConvLayer layer;
    int batch = 0;
    std::size_t nodes = 0;
    std::string heuristic;  ///< the heuristic's configuration
    double heuristic_us = NAN, tuned_us = NAN;
    std::string winner, note;
};

int tune_model(const ModelOptions& o) {
    const std::string graph = read_option_file(o.graph, "the graph");
    // Every batch's plan is checked before a GPU is asked for.
    for (const int batch : o.batches) (void)ModelPlan::from_json(graph, batch, checking_device());
    const Device device = gpu_or_explain("model tune");
    const TuneTarget target = TuneTarget::of(device);
    Runtime& rt = runtime(o.common);
    Stream stream(device);
    std::vector<GraphLayer> layers;
    std::map<std::string, std::size_t> index;  // problem key → layers
    for (const int batch : o.batches)
        for (const auto& [node, l] : ModelPlan::from_json(graph, batch, target.device).conv_layers()) {
            const auto [at, added] = index.emplace(conv2d_problem_key(l.attrs, l.shape), layers.size());
            if (added) {
                GraphLayer& g = layers.emplace_back();
                g.layer = l;
                g.batch = batch;
                g.heuristic = conv2d_bn_silu_config(*dispatch_conv2d_bn_silu(l.attrs, l.shape, target.device));
            }
            ++layers[at->second].nodes;
        }
    const bool progress = isatty(STDERR_FILENO) && !o.common.json;
    const auto started = std::chrono::steady_clock::now();
    int status = ok;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        GraphLayer& g = layers[i];
        const std::string key = conv2d_problem_key(g.layer.attrs, g.layer.shape);
        if (progress) fmt::print(stderr, "\r\033[Kkjit model tune: [{}/{}] {}", i + 1, layers.size(), key);
        if (!o.retune) {
            const PickedConv stored = detail::pick_conv2d_bn_silu(g.layer.attrs, g.layer.shape, target, rt.cache(),
                                                                  false, false, {});
            if (stored.source == PickSource::tuned) {
                g.winner = conv2d_bn_silu_config(*stored.op);
                g.note = "tuned before (--retune times it again)";
                continue;
            }
        }
        const TunedLayer tuned = tune_conv2d_bn_silu(
            g.layer.attrs, g.layer.shape, target, rt.cache(),
            gpu_candidate_bench(rt, stream, g.layer.attrs, g.layer.shape, Conv2dLayout::nchw, std::max(1, o.iters)));
        for (const auto& [us, config] : tuned.timed)
            if (config == g.heuristic) g.heuristic_us = us;
        if (tuned.winner) {
            g.winner = tuned.winner->config;
            g.tuned_us = tuned.winner->microseconds;
        } else {
            g.note = fmt::format("no configuration matched {}: nothing stored", reference_kind);
            status = failure;
        }
    }
    if (progress) fmt::print(stderr, "\r\033[K");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // What the graph's convs cost a forward, batch by batch, where every layer was timed now.
    std::map<int, std::pair<double, double>> totals;
    for (const GraphLayer& g : layers) {
        auto& [before, after] = totals[g.batch];
        before += g.nodes * g.heuristic_us;
        after += g.nodes * g.tuned_us;
    }
    if (o.common.json) {
        nlohmann::json rows = nlohmann::json::array();
        const auto number = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
        for (const GraphLayer& g : layers)
            rows.push_back({{"layer", conv2d_problem_key(g.layer.attrs, g.layer.shape)},
                            {"batch", g.batch},
                            {"nodes", g.nodes},
                            {"heuristic", g.heuristic},
                            {"heuristic_us", number(g.heuristic_us)},
                            {"tuned_us", number(g.tuned_us)},
                            {"winner", g.winner},
                            {"note", g.note}});
        nlohmann::json sums = nlohmann::json::object();
        for (const auto& [batch, t] : totals)
            sums[std::to_string(batch)] = {{"heuristic_us", number(t.first)}, {"tuned_us", number(t.second)}};
        fmt::print("{}\n", nlohmann::json{{"device", device.name()},
                                          {"driver", target.driver},
                                          {"layers", rows},
                                          {"conv_totals", sums},
                                          {"seconds", seconds}}
                               .dump(2));
        return status;
    }
    fmt::print("{} on {} (driver {}): {} distinct conv layers over batch {}\n", o.graph, device.name(), target.driver,
               layers.size(), fmt::join(o.batches, ", "));
    fmt::print("  {:<44} {:>5} {:>13} {:>9} {:>8}  {}\n", "layer", "nodes", "heuristic µs", "tuned µs", "speed-up",
               "winner");
    for (const GraphLayer& g : layers)
        fmt::print("  {:<44} {:>5} {:>13} {:>9} {:>8}  {}\n", conv2d_problem_key(g.layer.attrs, g.layer.shape), g.nodes,
                   std::isnan(g.heuristic_us) ? "-" : fmt::format("{:.1f}", g.heuristic_us),
                   std::isnan(g.tuned_us) ? "-" : fmt::format("{:.1f}", g.tuned_us),
                   std::isnan(g.heuristic_us / g.tuned_us) ? "-" : fmt::format("{:.2f}x", g.heuristic_us / g.tuned_us),
                   g.note.empty() ? g.winner : fmt::format("{} ({})", g.winner, g.note));
    for (const auto& [batch, t] : totals)
        if (!std::isnan(t.first + t.second))
            fmt::print(
                "batch {}: the convs of one forward {:.1f} µs with the heuristic's picks, {:.1f} µs tuned "
                "({:.2f}x), one call per graph replay each\n",
                batch, t.first, t.second, t.first / t.second);
    fmt::print("{:.1f} s; kjit model run uses the winners from now on\n", seconds);
    return status;
}

void add_planning_options(CLI::App& command, PlanOptions& planning) {
    command.add_flag("--no-zero-copy-concat{false}", planning.place_concat_inputs,
                     "Copy every concat input into the concat's output (as without the planner's placement), to "
                     "compare");
    command.add_flag("--no-fused-add{false}", planning.fuse_residual_adds,
                     "Run every add as its own launch (as without fusing it into its producer's epilogue), to compare");
    command.add_flag("--no-chained-ops{false}", planning.chain_ops,
                     "Run every node in its own launch (as without chaining, e.g. SPPF's max pools, into one), to "
                     "compare");
}

}  // namespace

void add_model(CLI::App& app, int& exit_code) {
    auto* model = app.add_subcommand("model", "Plan, check and run a graph of ops (docs/MODEL.md)");
    model->require_subcommand(1);
    static ModelOptions p;
    auto* plan = model->add_subcommand("plan",
                                       "Plan a graph for a batch size without a GPU: its nodes, shapes, parameter "
                                       "slots, the kernels and launches each runs; --weights checks the weights");
    add_common_options(*plan, p.common, true);
    plan->add_option("graph", p.graph, "Graph JSON file")->required()->check(CLI::ExistingFile);
    plan->add_option("--batch", p.batch, "Batch size (the graph's \"B\")")->check(positive_int);
    plan->add_option("--weights", p.weights, "safetensors file of the parameters to check against the plan")
        ->check(CLI::ExistingFile);
    plan->add_option("--arch", p.arch, "Plan for this arch (default: the local GPU's)");
    plan->add_option("--sms", p.multiprocessors, "Multiprocessors of the device planned for (default: by arch)")
        ->check(positive_int);
    plan->add_option("--max-shared-bytes", p.max_shared_bytes,
                     "Opt-in shared memory a block on that device (default: by arch)")
        ->check(positive_int);
    add_planning_options(*plan, p.planning);
    plan->callback([&exit_code] { exit_code = plan_model(p); });

    static ModelOptions o;
    auto* run = model->add_subcommand("run",
                                      "Load a graph and its weights, run it on the GPU, print per-node times, "
                                      "the forward and (--graph) its CUDA graph replay");
    add_common_options(*run, o.common, true);
    run->add_option("graph", o.graph, "Graph JSON file")->required()->check(CLI::ExistingFile);
    run->add_option("--weights", o.weights,
                    "safetensors file of the parameters, by dotted key (needed where the graph has weights)")
        ->check(CLI::ExistingFile);
    run->add_option("--batch", o.batch, "Batch size (the graph's \"B\")")->check(positive_int);
    run->add_flag("--graph", o.replay, "Also capture the forward into a CUDA graph and time its replay");
    run->add_option("--iters", o.iters, "Timed runs (median; default 100)")->check(positive_int);
    run->add_option("--input", o.input, "safetensors file of the graph inputs by name (default: random)")
        ->check(CLI::ExistingFile);
    run->add_option("--save-outputs", o.save_outputs,
                    "Write the outputs as a safetensors file (F32; f16 and bf16 outputs widened)");
    add_planning_options(*run, o.planning);
    run->callback([&exit_code] { exit_code = run_model(o); });

    static ModelOptions t;
    auto* tune = model->add_subcommand("tune",
                                       "Tune every distinct conv layer of a graph for each batch size on the GPU and "
                                       "store the winners (kjit model run, and every dispatch, use them)");
    add_common_options(*tune, t.common, true);
    tune->add_option("graph", t.graph, "Graph JSON file")->required()->check(CLI::ExistingFile);
    tune->add_option("--batch", t.batches, "Batch sizes (repeatable; default 1)")->check(positive_int);
    tune->add_option("--iters", t.iters, "Timed graph replays a candidate (default 20)")->check(positive_int);
    tune->add_flag("--retune", t.retune, "Time the layers that have a winner again");
    t.iters = 20;
    tune->callback([&exit_code] { exit_code = tune_model(t); });
}

}  // namespace kjit::cli
