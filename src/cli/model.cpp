// kjit model run: a graph of ops (docs/MODEL.md) on the GPU — per-node times, the whole forward,
// and its CUDA graph replay; inputs from a safetensors file or random, outputs saved on request.
#include <algorithm>
#include <numeric>
#include <random>

#include <kjit/model.hpp>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct ModelOptions {
    Common common;
    std::string graph, weights, input, save_outputs;
    int batch = 1, iters = 100;
    bool replay = false;
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
    const Device device = gpu_or_explain("model run");
    Stream stream(device);
    LoadedModel model = LoadedModel::load_file(o.graph, device, o.batch, runtime(o.common));
    const WeightsReport weights = model.load_weights(o.weights);
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
        const auto& [name, shape] = plan.values()[v];
        std::vector<float> values(element_count(shape));
        if (auto it = given.find(name); it != given.end()) {
            if (it->second.dtype != "F32" || it->second.shape != shape)
                throw UsageError(fmt::format("--input: '{}' is {} [{}], the graph needs F32 [{}]", name,
                                             it->second.dtype, fmt::join(it->second.shape, ", "),
                                             fmt::join(shape, ", ")));
            std::memcpy(values.data(), it->second.data.data(), it->second.data.size());
        } else if (!o.input.empty()) {
            throw UsageError(fmt::format("--input {} has no tensor '{}'", o.input, name));
        } else {
            for (auto& x : values) x = unit(rng);
        }
        buffers.emplace_back(device, values.size() * sizeof(float));
        buffers.back().upload(std::span<const float>(values));
        inputs.push_back(buffers.back().as<void>());
    }

    (void)model.forward(inputs, stream);  // warm-up
    stream.synchronize();
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
                             {"kernel", node.op->kernel_for_launch(0).id()},
                             {"shape", plan.values()[node.output].shape},
                             {"ms", node_ms[n]}});
        }
        nlohmann::json j{{"device", device.name()},
                         {"batch", o.batch},
                         {"nodes", nodes},
                         {"node_sum_ms", node_sum_ms},
                         {"forward_ms", forward_ms},
                         {"iters", o.iters},
                         {"weights_folded_bn", weights.folded}};
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
    fmt::print("sum of nodes {:.3f} ms; forward {:.3f} ms (median of {})", node_sum_ms, forward_ms, o.iters);
    if (replay_ms) fmt::print("; CUDA graph replay {:.3f} ms", *replay_ms);
    fmt::print("\n");
    return ok;
}

}  // namespace

void add_model(CLI::App& app, int& exit_code) {
    auto* model = app.add_subcommand("model", "Run a graph of ops (docs/MODEL.md)");
    model->require_subcommand(1);
    static ModelOptions o;
    auto* run = model->add_subcommand("run",
                                      "Load a graph and its weights, run it on the GPU, print per-node times, "
                                      "the forward and (--graph) its CUDA graph replay");
    add_common_options(*run, o.common, true);
    run->add_option("graph", o.graph, "Graph JSON file")->required()->check(CLI::ExistingFile);
    run->add_option("--weights", o.weights, "safetensors file of the parameters, by dotted key")
        ->required()
        ->check(CLI::ExistingFile);
    run->add_option("--batch", o.batch, "Batch size (the graph's \"B\")")->check(positive_int);
    run->add_flag("--graph", o.replay, "Also capture the forward into a CUDA graph and time its replay");
    run->add_option("--iters", o.iters, "Timed runs (median; default 100)")->check(positive_int);
    run->add_option("--input", o.input, "safetensors file of the graph inputs by name (default: random)")
        ->check(CLI::ExistingFile);
    run->add_option("--save-outputs", o.save_outputs, "Write the outputs as a safetensors file");
    run->callback([&exit_code] { exit_code = run_model(o); });
}

}  // namespace kjit::cli
