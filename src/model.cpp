// A graph of RuntimeOps: planned from JSON for one batch size (op factories, topological
// order, shapes, parameter slots), then loaded onto a device (parameters, activations,
// kernels) and run op by op or replayed as one CUDA graph.
#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/error.hpp>
#include <kjit/model.hpp>
#include <kjit/ops.hpp>
#include <nlohmann/json.hpp>

#include "log.hpp"

namespace kjit {
namespace {

using json = nlohmann::json;

/// A node's "attrs" object; every error names the node.
class JsonAttrs final : public NodeAttrs {
public:
    JsonAttrs(const json& attrs, std::string node) : attrs_(attrs), node_(std::move(node)) {}

    bool has(std::string_view key) const override { return attrs_.contains(key); }

    int integer(std::string_view key, std::optional<int> fallback) const override {
        if (!has(key)) return fallback ? *fallback : missing(key);
        return as_int(attrs_.at(key), key);
    }

    std::vector<int> integers(std::string_view key, std::size_t count, std::optional<int> fallback) const override {
        if (!has(key)) {
            if (!fallback) missing(key);
            return std::vector<int>(count, *fallback);
        }
        const json& v = attrs_.at(key);
        if (!v.is_array()) return std::vector<int>(count, as_int(v, key));
        if (v.size() != count) fail(fmt::format("attribute '{}' takes {} numbers, {} given", key, count, v.size()));
        std::vector<int> out;
        for (const auto& e : v) out.push_back(as_int(e, key));
        return out;
    }

    double number(std::string_view key, std::optional<double> fallback) const override {
        if (!has(key)) return fallback ? *fallback : missing(key);
        const json& v = attrs_.at(key);
        if (!v.is_number()) fail(fmt::format("attribute '{}' is {}: it must be a number", key, v.dump()));
        return v.get<double>();
    }

private:
    int as_int(const json& v, std::string_view key) const {
        if (!v.is_number_integer() || v.get<std::int64_t>() < INT32_MIN || v.get<std::int64_t>() > INT32_MAX ||
            (v.is_number_unsigned() && v.get<std::uint64_t>() > INT32_MAX))
            fail(fmt::format("attribute '{}' is {}: it must be a whole number that fits 32 bits", key, v.dump()));
        return v.get<int>();
    }
    [[noreturn]] int missing(std::string_view key) const { fail(fmt::format("attribute '{}' is missing", key)); }
    [[noreturn]] void fail(const std::string& what) const {
        throw UsageError(fmt::format("node '{}': {}", node_, what));
    }
    const json& attrs_;
    std::string node_;
};

MadeOp made(std::unique_ptr<RuntimeOp> op, std::span<const ShapeView> inputs) {
    Shape out = op->compute_concrete_output_shape(inputs, {});
    return {std::move(op), std::move(out)};
}

MadeOp make_conv(const NodeAttrs& a, std::span<const ShapeView> in, const DeviceTraits& device) {
    if (in.size() != 1) throw UsageError(fmt::format("conv2d_bn_silu takes 1 input, {} given", in.size()));
    if (in[0].size() != 4) throw UsageError("conv2d_bn_silu needs an NCHW input");
    const auto kernel = a.integers("kernel", 2, 1), stride = a.integers("stride", 2, 1), pad = a.integers("pad", 2, 0);
    const Conv2dAttrs attrs{.kernel_h = kernel[0], .kernel_w = kernel[1], .stride_h = stride[0], .stride_w = stride[1],
                            .pad_h = pad[0], .pad_w = pad[1], .groups = a.integer("groups", 1)};
    auto dim = [](std::size_t v) {
        if (v > static_cast<std::size_t>(INT32_MAX)) throw UsageError(fmt::format("size {} exceeds 32 bits", v));
        return static_cast<int>(v);
    };
    const Conv2dShape shape{dim(in[0][0]), dim(in[0][1]), dim(in[0][2]), dim(in[0][3]), a.integer("c_out")};
    const auto [oh, ow] = conv2d_output_size(attrs, shape);
    return {dispatch_conv2d_bn_silu(attrs, shape, device),
            {in[0][0], static_cast<std::size_t>(shape.c_out), static_cast<std::size_t>(oh), static_cast<std::size_t>(ow)}};
}

std::mutex registry_mutex;

std::map<std::string, OpFactory, std::less<>>& registry() {
    static std::map<std::string, OpFactory, std::less<>> ops{
        {"conv2d_bn_silu", make_conv},
        {"add", [](const NodeAttrs&, std::span<const ShapeView> in, const DeviceTraits&) {
             return made(std::make_unique<AddOp>(), in);
         }},
        {"concat", [](const NodeAttrs&, std::span<const ShapeView> in, const DeviceTraits&) {
             return made(std::make_unique<ConcatChannelsOp>(in.size()), in);
         }},
        {"maxpool2d", [](const NodeAttrs& a, std::span<const ShapeView> in, const DeviceTraits&) {
             const int k = a.integer("kernel");
             return made(std::make_unique<MaxPool2dOp>(k, a.integer("stride", k), a.integer("pad", 0)), in);
         }},
        {"upsample_nearest2d", [](const NodeAttrs& a, std::span<const ShapeView> in, const DeviceTraits&) {
             return made(std::make_unique<UpsampleNearest2dOp>(a.integer("scale", 2)), in);
         }},
    };
    return ops;
}

/// A shape from JSON: positive integers, "B" for the batch.
Shape shape_of(const json& j, int batch, const std::string& what) {
    if (!j.is_array() || j.empty()) throw UsageError(fmt::format("{}: the shape must be a non-empty list", what));
    Shape shape;
    for (const auto& d : j) {
        if (d.is_string() && d.get<std::string>() == "B") shape.push_back(static_cast<std::size_t>(batch));
        else if (d.is_number_unsigned() && d.get<std::uint64_t>() > 0 && d.get<std::uint64_t>() <= INT32_MAX)
            shape.push_back(d.get<std::size_t>());
        else throw UsageError(fmt::format("{}: shape entry {} is neither \"B\" nor a positive size", what, d.dump()));
    }
    return shape;
}

const json& field(const json& j, const char* key, const std::string& where) {
    if (!j.is_object() || !j.contains(key)) throw UsageError(fmt::format("{}: \"{}\" is missing", where, key));
    return j.at(key);
}

std::string string_field(const json& j, const char* key, const std::string& where) {
    const json& v = field(j, key, where);
    if (!v.is_string()) throw UsageError(fmt::format("{}: \"{}\" must be a string", where, key));
    return v.get<std::string>();
}

}  // namespace

void register_op(std::string name, OpFactory factory) {
    std::lock_guard lock(registry_mutex);
    registry().insert_or_assign(std::move(name), std::move(factory));
}

// ---- plan ---------------------------------------------------------------------------------------------------

ModelPlan ModelPlan::from_json(std::string_view graph_json, int batch, const DeviceTraits& device) {
    if (batch <= 0) throw UsageError(fmt::format("batch {} must be positive", batch));
    json g;
    try {
        g = json::parse(graph_json);
    } catch (const json::exception& e) {
        throw UsageError(fmt::format("the graph is not valid JSON: {}", e.what()));
    }
    if (!g.is_object()) throw UsageError("the graph must be a JSON object with inputs, outputs and nodes");
    ModelPlan plan;
    plan.batch_ = batch;
    std::unordered_map<std::string, std::size_t> value_of;  // name → index into values_
    auto add_value = [&](const std::string& name, Shape shape, const std::string& what) {
        if (name.empty()) throw UsageError(fmt::format("{} has an empty name", what));
        if (!value_of.emplace(name, plan.values_.size()).second)
            throw UsageError(fmt::format("{}: the name '{}' is used twice", what, name));
        plan.values_.push_back({name, std::move(shape)});
        return plan.values_.size() - 1;
    };
    const json& inputs = field(g, "inputs", "the graph");
    if (!inputs.is_array() || inputs.empty()) throw UsageError("the graph: \"inputs\" must be a non-empty list");
    for (const auto& in : inputs) {
        const std::string name = string_field(in, "name", "a graph input");
        plan.inputs_.push_back(add_value(name, shape_of(field(in, "shape", "input '" + name + "'"), batch,
                                                        "input '" + name + "'"),
                                         "input '" + name + "'"));
    }

    // Topological order (Kahn), keeping the file's order among ready nodes.
    const json& nodes = field(g, "nodes", "the graph");
    if (!nodes.is_array()) throw UsageError("the graph: \"nodes\" must be a list");
    std::vector<std::string> names;
    std::unordered_map<std::string, std::size_t> node_index;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const std::string name = string_field(nodes[i], "name", fmt::format("node {}", i + 1));
        if (value_of.contains(name) || !node_index.emplace(name, i).second)
            throw UsageError(fmt::format("node '{}': the name is used twice", name));
        names.push_back(name);
    }
    std::vector<std::vector<std::string>> node_inputs(nodes.size());
    std::vector<std::size_t> waiting(nodes.size(), 0);
    std::vector<std::vector<std::size_t>> consumers(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const json& list = field(nodes[i], "inputs", "node '" + names[i] + "'");
        if (!list.is_array() || list.empty())
            throw UsageError(fmt::format("node '{}': \"inputs\" must be a non-empty list of names", names[i]));
        for (const auto& in : list) {
            if (!in.is_string()) throw UsageError(fmt::format("node '{}': input {} is not a name", names[i], in.dump()));
            const std::string name = in.get<std::string>();
            node_inputs[i].push_back(name);
            if (auto producer = node_index.find(name); producer != node_index.end()) {
                ++waiting[i];
                consumers[producer->second].push_back(i);
            } else if (!value_of.contains(name)) {
                throw UsageError(fmt::format("node '{}': input '{}' is neither a graph input nor a node", names[i], name));
            }
        }
    }
    std::vector<std::size_t> order, ready;
    for (std::size_t i = nodes.size(); i-- > 0;)
        if (!waiting[i]) ready.push_back(i);
    while (!ready.empty()) {
        const std::size_t i = ready.back();
        ready.pop_back();
        order.push_back(i);
        std::vector<std::size_t> now;
        for (std::size_t c : consumers[i])
            if (--waiting[c] == 0) now.push_back(c);
        std::sort(now.rbegin(), now.rend());
        ready.insert(ready.end(), now.begin(), now.end());
    }
    if (order.size() != nodes.size()) {
        std::vector<std::string> stuck;
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (waiting[i]) stuck.push_back(names[i]);
        throw UsageError(fmt::format("the graph has a cycle through the nodes {}", fmt::join(stuck, ", ")));
    }

    for (std::size_t i : order) {
        const json& n = nodes[i];
        const std::string& name = names[i];
        Node node{name, string_field(n, "op", "node '" + name + "'"), {}, 0, nullptr, {}, std::nullopt};
        OpFactory factory;
        {
            std::lock_guard lock(registry_mutex);
            const auto& ops = registry();
            const auto it = ops.find(node.op_name);
            if (it == ops.end()) {
                std::vector<std::string> known;
                for (const auto& [op, f] : ops) known.push_back(op);
                throw UsageError(fmt::format("node '{}': unknown op '{}' (known: {})", name, node.op_name,
                                             fmt::join(known, ", ")));
            }
            factory = it->second;
        }
        std::vector<ShapeView> shapes;
        for (const auto& in : node_inputs[i]) {
            node.inputs.push_back(value_of.at(in));
            shapes.push_back(plan.values_[node.inputs.back()].shape);
        }
        static const json no_attrs = json::object();
        const json& attrs = n.contains("attrs") ? n.at("attrs") : no_attrs;
        if (!attrs.is_object()) throw UsageError(fmt::format("node '{}': \"attrs\" must be an object", name));
        const JsonAttrs node_attrs(attrs, name);
        Shape output;
        try {
            MadeOp m = factory(node_attrs, shapes, device);
            if (m.op->n_activation_inputs() != shapes.size())
                throw UsageError(fmt::format("the op takes {} inputs, {} given", m.op->n_activation_inputs(),
                                             shapes.size()));
            output = m.op->compute_concrete_output_shape(shapes, m.output_shape);
            if (output.empty() || element_count(output) == 0) throw UsageError("its output would be empty");
            auto shapes_of_params = m.op->param_shapes(shapes, output);
            const auto slots = m.op->param_names();
            if (slots.size() != shapes_of_params.size())
                throw UsageError(fmt::format("the op names {} parameter slots for {} shapes", slots.size(),
                                             shapes_of_params.size()));
            for (std::size_t p = 0; p < slots.size(); ++p)
                node.params.push_back({fmt::format("{}.{}", name, slots[p]), std::move(shapes_of_params[p])});
            node.op = std::move(m.op);
        } catch (const UsageError& e) {
            const std::string what = e.what();
            if (what.starts_with("node '")) throw;
            std::vector<std::string> shown;
            for (const auto& s : shapes) shown.push_back(fmt::format("[{}]", fmt::join(s, ", ")));
            throw UsageError(fmt::format("node '{}' ({}, inputs {}): {}", name, node.op_name, fmt::join(shown, " "),
                                         what));
        }
        if (node.op_name == "conv2d_bn_silu") node.bn_eps = node_attrs.number("bn_eps", 1e-5);
        node.output = add_value(name, std::move(output), "node '" + name + "'");
        plan.nodes_.push_back(std::move(node));
    }

    const json& outputs = field(g, "outputs", "the graph");
    if (!outputs.is_array() || outputs.empty()) throw UsageError("the graph: \"outputs\" must be a non-empty list");
    for (const auto& o : outputs) {
        if (!o.is_string() || !value_of.contains(o.get<std::string>()))
            throw UsageError(fmt::format("graph output {} is not a node or an input", o.dump()));
        plan.outputs_.push_back(value_of.at(o.get<std::string>()));
    }
    return plan;
}

// ---- loaded model -----------------------------------------------------------------------------------------------

struct LoadedModel::Impl {
    Device device;
    Runtime* runtime;
    ModelPlan plan;
    std::vector<std::vector<DeviceBuffer>> params;     // per node, per slot
    std::vector<std::optional<DeviceBuffer>> tight;    // per value; graph inputs have none
    std::vector<std::optional<DeviceBuffer>> padded;   // per value: where the op pads its rows
    std::vector<void*> input_pointers;                 // per value, the current forward's
    std::optional<Graph> graph;

    void* value_pointer(std::size_t v) const {
        return tight[v] ? tight[v]->as<void>() : input_pointers[v];
    }

    void run_node(std::size_t n, const Stream& stream) {
        const ModelPlan::Node& node = plan.nodes()[n];
        std::vector<Tensor> inputs;
        for (std::size_t v : node.inputs) inputs.push_back({value_pointer(v), plan.values()[v].shape});
        std::vector<void*> node_params;
        for (auto& p : params[n]) node_params.push_back(p.as<void>());
        const Shape& shape = plan.values()[node.output].shape;
        const std::size_t row = node.op->forward_output_row_elems(shape), stride = node.op->forward_output_row_stride(shape);
        void* out = padded[node.output] ? padded[node.output]->as<void>() : tight[node.output]->as<void>();
        node.op->forward(*runtime, stream, inputs, node_params, out, shape, static_cast<int>(stride));
        if (padded[node.output])  // back to tight rows for whoever reads it
            copy_2d_async(stream, tight[node.output]->address(), row * sizeof(float), padded[node.output]->address(),
                          stride * sizeof(float), row * sizeof(float), element_count(shape) / row);
    }

    void set_inputs(std::span<void* const> inputs) {
        if (inputs.size() != plan.inputs().size())
            throw UsageError(fmt::format("the graph takes {} inputs, {} given", plan.inputs().size(), inputs.size()));
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            if (!inputs[i])
                throw UsageError(fmt::format("input '{}' is a null pointer: pass a device buffer",
                                             plan.values()[plan.inputs()[i]].name));
            input_pointers[plan.inputs()[i]] = inputs[i];
        }
    }

    std::vector<Tensor> outputs() const {
        std::vector<Tensor> out;
        for (std::size_t v : plan.outputs()) out.push_back({value_pointer(v), plan.values()[v].shape});
        return out;
    }
};

LoadedModel::LoadedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadedModel::~LoadedModel() = default;
LoadedModel::LoadedModel(LoadedModel&&) noexcept = default;
LoadedModel& LoadedModel::operator=(LoadedModel&&) noexcept = default;

LoadedModel LoadedModel::load(std::string_view graph_json, const Device& device, int batch, Runtime& runtime) {
    auto impl = std::make_unique<Impl>(Impl{device, &runtime, ModelPlan::from_json(graph_json, batch, DeviceTraits::of(device)),
                                            {}, {}, {}, {}, std::nullopt});
    const ModelPlan& plan = impl->plan;
    const std::size_t values = plan.values().size();
    impl->tight.resize(values);
    impl->padded.resize(values);
    impl->input_pointers.assign(values, nullptr);

    std::vector<const Kernel*> kernels;
    std::set<std::string> seen;
    for (const auto& node : plan.nodes()) {
        auto& slots = impl->params.emplace_back();
        for (std::size_t p = 0; p < node.params.size(); ++p) {
            auto& buffer = slots.emplace_back(device, std::max<std::size_t>(1, element_count(node.params[p].shape)) * sizeof(float));
            if (auto init = node.op->param_init_data(p)) {
                if (init->size() != element_count(node.params[p].shape) * sizeof(float))
                    throw UsageError(fmt::format("{}: param_init_data gives {} bytes for {} floats", node.params[p].key,
                                                 init->size(), element_count(node.params[p].shape)));
                buffer.upload(std::span<const std::byte>(*init));
            } else {
                buffer.fill(0);
            }
        }
        const Shape& shape = plan.values()[node.output].shape;
        impl->tight[node.output].emplace(device, element_count(shape) * sizeof(float));
        const std::size_t row = node.op->forward_output_row_elems(shape), stride = node.op->forward_output_row_stride(shape);
        if (row == 0 || element_count(shape) % row || stride < row)
            throw UsageError(fmt::format("node '{}': rows of {} elements every {} do not tile its output [{}]", node.name,
                                         row, stride, fmt::join(shape, ", ")));
        if (stride > row) impl->padded[node.output].emplace(device, element_count(shape) / row * stride * sizeof(float));
        for (std::size_t l = 0; l < node.op->n_launches(); ++l) {
            const Kernel& k = node.op->kernel_for_launch(l);
            if (seen.insert(k.id()).second) kernels.push_back(&k);
        }
    }

    // Every kernel compiled (or fetched) in parallel, then loaded.
    std::atomic<std::size_t> next{0};
    std::mutex failure_mutex;
    std::exception_ptr failure;
    std::vector<std::thread> workers(std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(),
                                                                     static_cast<unsigned>(kernels.size()))));
    for (auto& w : workers)
        w = std::thread([&] {
            for (std::size_t i; (i = next++) < kernels.size();) {
                try {
                    (void)runtime.compile(*kernels[i], CompileOptions{.arch = device.arch()});
                } catch (...) {
                    std::lock_guard lock(failure_mutex);
                    if (!failure) failure = std::current_exception();
                }
            }
        });
    for (auto& w : workers) w.join();
    if (failure) std::rethrow_exception(failure);
    for (const Kernel* k : kernels) (void)runtime.load(*k, device);
    return LoadedModel(std::move(impl));
}

namespace {

/// The whole file; `what` names it in the error ("the graph file").
std::string read_file(const std::filesystem::path& file, std::string_view what) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw UsageError(fmt::format("cannot read {} {}", what, file.string()));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

LoadedModel LoadedModel::load_file(const std::filesystem::path& graph, const Device& device, int batch,
                                   Runtime& runtime) {
    return load(read_file(graph, "the graph file"), device, batch, runtime);
}

WeightsReport LoadedModel::load_weights(const std::filesystem::path& safetensors) {
    const std::string bytes = read_file(safetensors, "the weights file");
    try {
        return load_weights(parse_safetensors(std::as_bytes(std::span(bytes))));
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", safetensors.string(), e.what()));
    }
}

WeightsReport LoadedModel::load_weights(const std::map<std::string, SafeTensor>& tensors) {
    WeightsReport report;
    std::set<std::string> used;
    std::vector<std::string> missing, mismatched;
    // Checked first, uploaded after: a bad file changes nothing.
    std::vector<std::pair<DeviceBuffer*, std::vector<float>>> uploads;
    auto floats_of = [&](const std::string& key, const SafeTensor& t, const Shape& shape) -> std::optional<std::vector<float>> {
        if (t.dtype != "F32" || t.shape != shape) {
            mismatched.push_back(fmt::format("{}: the file has {} [{}], the model needs F32 [{}]", key, t.dtype,
                                             fmt::join(t.shape, ", "), fmt::join(shape, ", ")));
            return std::nullopt;
        }
        std::vector<float> v(element_count(shape));
        std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
        used.insert(key);
        return v;
    };
    for (std::size_t n = 0; n < impl_->plan.nodes().size(); ++n) {
        const auto& node = impl_->plan.nodes()[n];
        // Raw BatchNorm tensors stand in for bn_scale and bn_shift.
        const std::string raw[] = {node.name + ".bn.weight", node.name + ".bn.bias", node.name + ".bn.running_mean",
                                   node.name + ".bn.running_var"};
        const bool has_raw = node.bn_eps && std::all_of(std::begin(raw), std::end(raw), [&](const std::string& k) {
                                 return tensors.contains(k);
                             });
        for (std::size_t p = 0; p < node.params.size(); ++p) {
            const auto& [key, shape] = node.params[p];
            if (auto it = tensors.find(key); it != tensors.end()) {
                if (auto v = floats_of(key, it->second, shape)) uploads.emplace_back(&impl_->params[n][p], *std::move(v));
            } else if (!(has_raw && (key.ends_with(".bn_scale") || key.ends_with(".bn_shift")))) {
                missing.push_back(key);
            }
        }
        if (has_raw && !tensors.contains(node.name + ".bn_scale")) {
            const Shape channels{node.params.empty() ? 0 : node.params[0].shape[0]};
            std::vector<std::vector<float>> bn;
            for (const auto& k : raw)
                if (auto v = floats_of(k, tensors.at(k), channels)) bn.push_back(*std::move(v));
            if (bn.size() == 4) {
                auto folded = fold_batch_norm(bn[0], bn[1], bn[2], bn[3], static_cast<float>(*node.bn_eps));
                for (std::size_t p = 0; p < node.params.size(); ++p) {
                    if (node.params[p].key.ends_with(".bn_scale")) uploads.emplace_back(&impl_->params[n][p], folded.scale);
                    if (node.params[p].key.ends_with(".bn_shift")) uploads.emplace_back(&impl_->params[n][p], folded.shift);
                }
                ++report.folded;
            }
        }
    }
    if (!missing.empty() || !mismatched.empty()) {
        std::string what;
        if (!missing.empty()) what += fmt::format("missing: {}", fmt::join(missing, ", "));
        if (!mismatched.empty()) what += fmt::format("{}mismatched: {}", what.empty() ? "" : "; ", fmt::join(mismatched, "; "));
        throw UsageError(fmt::format("the weights do not fit the model ({}); nothing was loaded", what));
    }
    for (auto& [buffer, values] : uploads) buffer->upload(std::span<const float>(values));
    report.loaded = uploads.size();
    for (const auto& [key, t] : tensors)
        if (!used.contains(key)) report.extra.push_back(key);
    if (!report.extra.empty())
        detail::warn(fmt::format("{} tensors in the weights file belong to no parameter and were ignored: {}",
                                 report.extra.size(), fmt::join(report.extra, ", ")));
    return report;
}

std::vector<Tensor> LoadedModel::forward(std::span<void* const> inputs, const Stream& stream) {
    impl_->set_inputs(inputs);
    for (std::size_t n = 0; n < impl_->plan.nodes().size(); ++n) impl_->run_node(n, stream);
    return impl_->outputs();
}

void LoadedModel::capture(std::span<void* const> inputs, const Stream& stream) {
    impl_->graph.reset();
    impl_->graph.emplace(Graph::capture(stream, [&] { (void)forward(inputs, stream); }));
}

void LoadedModel::replay(const Stream& stream) const {
    if (!impl_->graph) throw UsageError("replay() before capture(): capture the forward first");
    impl_->graph->launch(stream);
}

std::vector<Tensor> LoadedModel::outputs() const { return impl_->outputs(); }

std::vector<float> LoadedModel::read_output(std::size_t i, const Stream& stream) const {
    const auto all = impl_->outputs();
    if (i >= all.size()) throw UsageError(fmt::format("output {} of {}", i, all.size()));
    const std::size_t bytes = element_count(all[i].shape) * sizeof(float);
    DeviceBuffer staging(impl_->device, bytes);
    copy_2d_async(stream, staging.address(), bytes, reinterpret_cast<std::uint64_t>(all[i].data), bytes, bytes, 1);
    stream.synchronize();
    std::vector<float> host(bytes / sizeof(float));
    staging.download(std::span<float>(host));
    return host;
}

std::vector<double> LoadedModel::node_times_ms(std::span<void* const> inputs, const Stream& stream, int iterations) {
    impl_->set_inputs(inputs);
    const std::size_t n = impl_->plan.nodes().size();
    std::vector<std::vector<double>> samples(n);
    std::vector<Event> marks;
    for (std::size_t i = 0; i <= n; ++i) marks.emplace_back(impl_->device);
    for (int it = 0; it < std::max(1, iterations); ++it) {
        marks[0].record(stream);
        for (std::size_t i = 0; i < n; ++i) {
            impl_->run_node(i, stream);
            marks[i + 1].record(stream);
        }
        marks[n].synchronize();
        for (std::size_t i = 0; i < n; ++i) samples[i].push_back(Event::elapsed_ms(marks[i], marks[i + 1]));
    }
    std::vector<double> medians;
    for (auto& s : samples) {
        std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
        medians.push_back(s[s.size() / 2]);
    }
    return medians;
}

const ModelPlan& LoadedModel::plan() const noexcept { return impl_->plan; }

DeviceBuffer& LoadedModel::parameter(std::string_view key) {
    for (std::size_t n = 0; n < impl_->plan.nodes().size(); ++n)
        for (std::size_t p = 0; p < impl_->plan.nodes()[n].params.size(); ++p)
            if (impl_->plan.nodes()[n].params[p].key == key) return impl_->params[n][p];
    throw UsageError(fmt::format("the model has no parameter '{}'", key));
}

}  // namespace kjit
