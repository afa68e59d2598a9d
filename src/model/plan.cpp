// A graph planned from JSON for one batch size: op factories by name, topological order,
// concrete shapes and parameter slots. No GPU needed.
#include <algorithm>
#include <climits>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/error.hpp>
#include <kjit/model.hpp>
#include <nlohmann/json.hpp>

#include "model/builtin_ops.hpp"

namespace kjit {
namespace {

using json = nlohmann::json;

/// A node's "attrs" object; every error names the node.
class JsonAttrs final : public NodeAttrs {
public:
    JsonAttrs(const json& attrs, std::string node) : attrs_(attrs), node_(std::move(node)) {}

    bool has(std::string_view key) const override {
        read_.emplace(key);
        return attrs_.contains(key);
    }

    /// The attributes the op never asked for: a misspelt key would otherwise be ignored and its
    /// default used. Every error names the node.
    void check_all_read(const std::string& op) const {
        for (const auto& [key, value] : attrs_.items())
            if (!read_.contains(key))
                fail(fmt::format("unknown attribute '{}' of op '{}' (it reads {})", key, op,
                                 read_.empty() ? std::string("none") : fmt::format("{}", fmt::join(read_, ", "))));
    }

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

    bool flag(std::string_view key, std::optional<bool> fallback) const override {
        if (!has(key)) return fallback ? *fallback : static_cast<bool>(missing(key));
        const json& v = attrs_.at(key);
        if (!v.is_boolean()) fail(fmt::format("attribute '{}' is {}: it must be true or false", key, v.dump()));
        return v.get<bool>();
    }

    std::string choice(std::string_view key, std::span<const std::string_view> allowed,
                       std::optional<std::string_view> fallback) const override {
        if (!has(key)) {
            if (!fallback) missing(key);
            return std::string(*fallback);
        }
        const json& v = attrs_.at(key);
        if (!v.is_string() || std::ranges::find(allowed, v.get<std::string>()) == allowed.end())
            fail(fmt::format("attribute '{}' is {}: it must be one of \"{}\"", key, v.dump(),
                             fmt::join(allowed, "\", \"")));
        return v.get<std::string>();
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
    mutable std::set<std::string, std::less<>> read_;  // keys the op asked for, present or not
};

/// Throws unless every key of the object `j` is one of `known` (a misspelt key would be ignored).
void only_keys(const json& j, std::initializer_list<std::string_view> known, const std::string& where) {
    if (!j.is_object()) return;  // the field checks say what is wrong with it
    for (const auto& [key, value] : j.items())
        if (std::ranges::find(known, key) == known.end())
            throw UsageError(
                fmt::format("{}: unknown key \"{}\" (the keys are {})", where, key, fmt::join(known, ", ")));
}

/// A graph input's "dtype" (f32 where it gives none).
Scalar element_type_of(const json& in, const std::string& what) {
    if (!in.contains("dtype")) return Scalar::f32;
    const json& v = in.at("dtype");
    if (v.is_string())
        for (std::string_view name : detail::element_type_names)
            if (v.get<std::string>() == name) return detail::element_type_named(name);
    throw UsageError(fmt::format("{}: \"dtype\" is {}: it must be one of \"{}\"", what, v.dump(),
                                 fmt::join(detail::element_type_names, "\", \"")));
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

// ---- plan ---------------------------------------------------------------------------------------------------

ModelPlan ModelPlan::from_json(std::string_view graph_json, int batch, const DeviceTraits& device,
                               PlanOptions options) {
    if (batch <= 0) throw UsageError(fmt::format("batch {} must be positive", batch));
    json g;
    try {
        g = json::parse(graph_json);
    } catch (const json::exception& e) {
        throw UsageError(fmt::format("the graph is not valid JSON: {}", e.what()));
    }
    if (!g.is_object()) throw UsageError("the graph must be a JSON object with inputs, outputs and nodes");
    only_keys(g, {"name", "inputs", "nodes", "outputs"}, "the graph");
    ModelPlan plan;
    plan.batch_ = batch;
    plan.options_ = options;
    std::unordered_map<std::string, std::size_t> value_of;  // name → index into values_
    auto add_value = [&](const std::string& name, Shape shape, Scalar type, const std::string& what) {
        if (name.empty()) throw UsageError(fmt::format("{} has an empty name", what));
        if (!value_of.emplace(name, plan.values_.size()).second)
            throw UsageError(fmt::format("{}: the name '{}' is used twice", what, name));
        plan.values_.push_back({name, std::move(shape), type});
        return plan.values_.size() - 1;
    };
    const json& inputs = field(g, "inputs", "the graph");
    if (!inputs.is_array() || inputs.empty()) throw UsageError("the graph: \"inputs\" must be a non-empty list");
    for (const auto& in : inputs) {
        const std::string name = string_field(in, "name", "a graph input");
        const std::string what = "input '" + name + "'";
        only_keys(in, {"name", "shape", "dtype"}, what);
        plan.inputs_.push_back(
            add_value(name, shape_of(field(in, "shape", what), batch, what), element_type_of(in, what), what));
    }

    // Topological order (Kahn), keeping the file's order among ready nodes.
    const json& nodes = field(g, "nodes", "the graph");
    if (!nodes.is_array()) throw UsageError("the graph: \"nodes\" must be a list");
    std::vector<std::string> names;
    std::unordered_map<std::string, std::size_t> node_index;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const std::string name = string_field(nodes[i], "name", fmt::format("node {}", i + 1));
        only_keys(nodes[i], {"name", "op", "inputs", "attrs"}, "node '" + name + "'");
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
            if (!in.is_string())
                throw UsageError(fmt::format("node '{}': input {} is not a name", names[i], in.dump()));
            const std::string name = in.get<std::string>();
            node_inputs[i].push_back(name);
            if (auto producer = node_index.find(name); producer != node_index.end()) {
                ++waiting[i];
                consumers[producer->second].push_back(i);
            } else if (!value_of.contains(name)) {
                throw UsageError(
                    fmt::format("node '{}': input '{}' is neither a graph input nor a node", names[i], name));
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
        Node node{name, string_field(n, "op", "node '" + name + "'"), {}, 0, nullptr, {}, {}};
        std::vector<std::string> known;
        const OpFactory factory = detail::find_op_factory(node.op_name, known);
        if (!factory)
            throw UsageError(
                fmt::format("node '{}': unknown op '{}' (known: {})", name, node.op_name, fmt::join(known, ", ")));
        std::vector<ShapeView> shapes;
        std::vector<Scalar> types;
        for (const auto& in : node_inputs[i]) {
            node.inputs.push_back(value_of.at(in));
            shapes.push_back(plan.values_[node.inputs.back()].shape);
            types.push_back(plan.values_[node.inputs.back()].type);
        }
        static const json no_attrs = json::object();
        const json& attrs = n.contains("attrs") ? n.at("attrs") : no_attrs;
        if (!attrs.is_object()) throw UsageError(fmt::format("node '{}': \"attrs\" must be an object", name));
        const JsonAttrs node_attrs(attrs, name);
        Shape output;
        Scalar output_type = Scalar::f32;
        try {
            MadeOp m = factory(node_attrs, NodeInputs{shapes, types}, device);
            node_attrs.check_all_read(node.op_name);
            if (m.op->n_activation_inputs() != shapes.size())
                throw UsageError(
                    fmt::format("the op takes {} inputs, {} given", m.op->n_activation_inputs(), shapes.size()));
            if (m.input_types.empty()) m.input_types.assign(shapes.size(), Scalar::f32);
            if (m.input_types.size() != shapes.size())
                throw UsageError(
                    fmt::format("the op names {} input types for {} inputs", m.input_types.size(), shapes.size()));
            for (std::size_t in = 0; in < types.size(); ++in)
                if (types[in] != m.input_types[in])
                    throw UsageError(
                        fmt::format("input '{}' is {}, the op reads {}: put a cast node before it "
                                    "({{\"op\": \"cast\", \"attrs\": {{\"to\": \"{}\"}}}})",
                                    node_inputs[i][in], short_name(types[in]), short_name(m.input_types[in]),
                                    short_name(m.input_types[in])));
            output_type = m.output_type;
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
            throw UsageError(
                fmt::format("node '{}' ({}, inputs {}): {}", name, node.op_name, fmt::join(shown, " "), what));
        }
        node.output = add_value(name, std::move(output), output_type, "node '" + name + "'");
        plan.nodes_.push_back(std::move(node));
    }

    const json& outputs = field(g, "outputs", "the graph");
    if (!outputs.is_array() || outputs.empty()) throw UsageError("the graph: \"outputs\" must be a non-empty list");
    for (const auto& o : outputs) {
        if (!o.is_string() || !value_of.contains(o.get<std::string>()))
            throw UsageError(fmt::format("graph output {} is not a node or an input", o.dump()));
        plan.outputs_.push_back(value_of.at(o.get<std::string>()));
    }
    plan.plan_storage();
    return plan;
}

struct ModelPlan::Dataflow {
    std::vector<std::optional<std::size_t>> producer;  ///< per value, the node making it (none: a graph input)
    std::vector<std::vector<std::size_t>> readers;     ///< per value, the nodes reading it, in order

    explicit Dataflow(const ModelPlan& plan) : producer(plan.values_.size()), readers(plan.values_.size()) {
        for (std::size_t n = 0; n < plan.nodes_.size(); ++n) {
            producer[plan.nodes_[n].output] = n;
            for (std::size_t v : plan.nodes_[n].inputs) readers[v].push_back(n);
        }
    }
};

void ModelPlan::plan_storage() {
    for (Node& n : nodes_) n.residual.reset(), n.made_by.reset(), n.chain.reset(), n.chained.clear();
    const Dataflow flow(*this);
    place_concat_inputs(flow);
    fuse_residual_adds(flow);
    chain_ops(flow);
}

// ---- zero-copy concat ------------------------------------------------------------------------------------

void ModelPlan::place_concat_inputs(const Dataflow& flow) {
    storage_.clear();
    for (std::size_t v = 0; v < values_.size(); ++v) storage_.push_back({v, 0});
    const auto& [producer, readers] = flow;
    // An op that takes strided tensors, or a concat (its copies take any stride).
    const auto strided_ok = [](const RuntimeOp& op) { return op.takes_image_strides() || op.is_channel_concat(); };
    const auto describe = [](const Node& n) { return fmt::format("node '{}' ({})", n.name, n.op_name); };
    std::vector<const Node*> placed_by(values_.size(), nullptr);

    // Why input `v` of concat `c`, to sit at an image stride of `stride` elements, must be copied ("": it need not).
    const auto why_copied = [&](std::size_t v, const Node& c, std::size_t stride) -> std::string {
        if (!options_.place_concat_inputs) return "zero-copy concat is off";
        if (placed_by[v])
            return placed_by[v] == &c ? "it is this concat's input more than once"
                                      : fmt::format("it is also an input of concat '{}'", placed_by[v]->name);
        if (!producer[v]) return "a graph input: it lives in the caller's buffer";
        const Node& p = nodes_[*producer[v]];
        const Shape& shape = values_[v].shape;
        if (p.op->forward_output_row_stride(shape) != p.op->forward_output_row_elems(shape))
            return fmt::format("{} writes padded rows", describe(p));
        if (stride == element_count(shape) / shape[0] || batch_ == 1) return "";  // the slice is tight
        if (std::ranges::find(outputs_, v) != outputs_.end())
            return "a graph output, which the caller reads tight: at batch > 1 a slice is not";
        if (!strided_ok(*p.op)) return fmt::format("{} writes tight images only", describe(p));
        for (std::size_t r : readers[v])
            if (&nodes_[r] != &c && !strided_ok(*nodes_[r].op))
                return fmt::format("{} reads it and takes tight images only", describe(nodes_[r]));
        return "";
    };
    // Outer concats first (reverse topological order), so an inner one placed in an outer one's
    // output places its inputs there too.
    for (std::size_t n = nodes_.size(); n-- > 0;) {
        Node& c = nodes_[n];
        c.copies.clear();
        if (!c.op->is_channel_concat()) continue;
        const Storage out = storage_[c.output];
        const Shape& root = values_[out.value].shape;
        const std::size_t stride = element_count(root) / root[0];
        std::size_t channel = out.channel;
        for (std::size_t i = 0; i < c.inputs.size(); ++i) {
            const std::size_t v = c.inputs[i];
            if (std::string why = why_copied(v, c, stride); why.empty()) {
                storage_[v] = {out.value, channel};
                placed_by[v] = &c;
            } else {
                c.copies.push_back({i, std::move(why)});
            }
            channel += values_[v].shape[1];
        }
    }
}

std::size_t ModelPlan::launches() const {
    std::size_t n = 0;
    for (const Node& node : nodes_)
        n += node.fused() ? 0 : node.op->is_channel_concat() ? node.copies.size() : node.launched_op().n_launches();
    return n;
}

std::vector<const Kernel*> ModelPlan::kernels() const {
    std::vector<const Kernel*> out;
    std::set<std::string_view> seen;
    for (const Node& node : nodes_) {
        if (node.op->is_channel_concat() || node.fused()) continue;
        const RuntimeOp& op = node.launched_op();
        for (std::size_t l = 0; l < op.n_launches(); ++l)
            if (const Kernel& k = op.kernel_for_launch(l); seen.insert(k.id()).second) out.push_back(&k);
    }
    return out;
}

// ---- fused residual adds -----------------------------------------------------------------------------------

void ModelPlan::fuse_residual_adds(const Dataflow& flow) {
    if (!options_.fuse_residual_adds) return;
    const auto& producer = flow.producer;
    // The add alone reads it: no other node, and not the caller.
    const auto read_by_add_alone = [&](std::size_t v) {
        return flow.readers[v].size() == 1 && std::ranges::find(outputs_, v) == outputs_.end();
    };
    // Elements from one image of `v` to the next, where it lives.
    const auto image_stride = [&](std::size_t v) {
        const Shape& own = values_[v].shape;
        const Shape& whole = values_[storage_[v].value].shape;
        return batch_ == 1 ? element_count(own) / own[0] : element_count(whole) / whole[0];
    };
    for (Node& add : nodes_) {
        if (!add.op->is_elementwise_add() || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) continue;
        for (int first : {0, 1}) {
            const std::size_t made = add.inputs[first], residual = add.inputs[1 - first];
            if (!producer[made] || !read_by_add_alone(made) || storage_[made].value != made) continue;
            Node& p = nodes_[*producer[made]];
            const Shape& shape = values_[made].shape;
            // The residual must exist when p runs, and be laid out as p's new output.
            if (!p.op->accepts_residual_add() || p.residual || p.fused() ||
                p.op->forward_output_row_stride(shape) != p.op->forward_output_row_elems(shape) ||
                (producer[residual] && *producer[residual] >= *producer[made]) ||
                image_stride(residual) != image_stride(add.output))
                continue;
            if (image_stride(add.output) != element_count(shape) / shape[0] && !p.op->takes_image_strides()) continue;
            p.residual = residual;
            storage_[made] = storage_[add.output];  // p writes the add's output; its own is never made
            add.made_by = *producer[made];
            break;
        }
    }
}

// ---- chained ops -------------------------------------------------------------------------------------------

void ModelPlan::chain_ops(const Dataflow& flow) {
    if (!options_.chain_ops) return;
    // A chain grows from its head, in order, by a node that reads only the last link's output.
    // Its outputs are then written when the head runs, earlier than the order says: no node in
    // between reads them, since every reader comes after the node that makes them.
    for (std::size_t h = 0; h < nodes_.size(); ++h) {
        Node& head = nodes_[h];
        if (head.fused() || head.residual || head.op->is_channel_concat()) continue;
        for (std::size_t last = h;;) {
            const std::size_t made = nodes_[last].output;
            std::unique_ptr<RuntimeOp> longer;
            std::size_t next = 0;
            for (std::size_t r : flow.readers[made]) {
                const Node& n = nodes_[r];
                if (n.inputs.size() != 1 || n.fused() || n.residual) continue;
                if ((longer = head.launched_op().chained_with(*n.op, values_[made].shape))) {
                    next = r;
                    break;
                }
            }
            if (!longer) break;
            head.chain = std::move(longer);
            head.chained.push_back(nodes_[next].output);
            nodes_[next].made_by = h;
            last = next;
        }
    }
}

std::vector<std::pair<std::size_t, ModelPlan::ConvLayer>> ModelPlan::conv_layers() const {
    std::vector<std::pair<std::size_t, ConvLayer>> layers;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        const auto* conv = dynamic_cast<const Conv2dOp*>(nodes_[i].op.get());
        if (!conv) continue;
        const Shape& x = values_[nodes_[i].inputs[0]].shape;
        const Shape& y = values_[nodes_[i].output].shape;
        const auto dim = [](std::size_t v) { return static_cast<int>(v); };  // the plan checked 32 bits
        layers.push_back({i, {conv->attrs(), {dim(x[0]), dim(x[1]), dim(x[2]), dim(x[3]), dim(y[1])}}});
    }
    return layers;
}

std::vector<std::pair<std::size_t, AttentionShape>> ModelPlan::attention_layers() const {
    std::vector<std::pair<std::size_t, AttentionShape>> layers;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        const auto* attention = dynamic_cast<const AttentionForwardOp*>(nodes_[i].op.get());
        if (!attention) continue;
        std::vector<ShapeView> inputs;
        for (std::size_t v : nodes_[i].inputs) inputs.push_back(values_[v].shape);
        layers.emplace_back(i, attention->shape_of(inputs));
    }
    return layers;
}

void ModelPlan::replace_op(std::size_t node, std::unique_ptr<RuntimeOp> op) {
    Node& n = nodes_.at(node);
    std::vector<ShapeView> inputs;
    for (std::size_t i : n.inputs) inputs.push_back(values_[i].shape);
    const Shape& output = values_[n.output].shape;
    // Its weights must be the old op's; the slots it writes itself (param_is_weight) may differ.
    const auto weights = [&](const RuntimeOp& o, std::span<const Shape> shapes,
                             std::span<const std::string_view> names) {
        std::vector<std::pair<std::string_view, Shape>> w;
        for (std::size_t p = 0; p < shapes.size() && p < names.size(); ++p)
            if (o.param_is_weight(p)) w.emplace_back(names[p], shapes[p]);
        return w;
    };
    std::vector<Shape> old_slots;
    for (const Param& p : n.params) old_slots.push_back(p.shape);
    std::vector<Shape> slots;
    bool same_output = false;
    try {
        same_output = op->compute_concrete_output_shape(inputs, output) == output;
        slots = op->param_shapes(inputs, output);
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("node '{}': the op put in its place takes other shapes: {}", n.name, e.what()));
    }
    const auto names = op->param_names();
    if (!same_output || names.size() != slots.size() ||
        weights(*op, slots, names) != weights(*n.op, old_slots, n.op->param_names()))
        throw UsageError(fmt::format("node '{}': the op put in its place takes other shapes or weights", n.name));
    n.params.clear();
    for (std::size_t p = 0; p < slots.size(); ++p)
        n.params.push_back({fmt::format("{}.{}", n.name, names[p]), std::move(slots[p])});
    n.op = std::move(op);
    plan_storage();  // the new op may take image strides or residuals where the old did not, or not
}

}  // namespace kjit
