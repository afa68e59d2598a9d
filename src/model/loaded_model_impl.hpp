// LoadedModel::Impl: a planned graph's device state (parameters, activations, the captured
// graph) and how one node runs, shared by loaded_model.cpp and weights.cpp.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/error.hpp>
#include <kjit/model.hpp>

namespace kjit {

struct LoadedModel::Impl {
    Device device;
    Runtime* runtime;
    ModelPlan plan;
    std::vector<std::vector<DeviceBuffer>> params;    // per node, per slot
    std::vector<std::optional<DeviceBuffer>> tight;   // per value; graph inputs have none
    std::vector<std::optional<DeviceBuffer>> padded;  // per value: where the op pads its rows
    std::vector<void*> input_pointers;                // per value, the current forward's
    std::optional<Graph> graph;

    void* value_pointer(std::size_t v) const { return tight[v] ? tight[v]->as<void>() : input_pointers[v]; }

    void run_node(std::size_t n, const Stream& stream) {
        const ModelPlan::Node& node = plan.nodes()[n];
        std::vector<Tensor> inputs;
        for (std::size_t v : node.inputs) inputs.push_back({value_pointer(v), plan.values()[v].shape});
        std::vector<void*> node_params;
        for (auto& p : params[n]) node_params.push_back(p.as<void>());
        const Shape& shape = plan.values()[node.output].shape;
        const std::size_t row = node.op->forward_output_row_elems(shape),
                          stride = node.op->forward_output_row_stride(shape);
        void* out = padded[node.output] ? padded[node.output]->as<void>() : tight[node.output]->as<void>();
        node.op->forward(*runtime, stream, {inputs, node_params, out, shape, static_cast<int>(stride)});
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

namespace detail {
/// The whole file; `what` names it in the error ("the graph file").
std::string read_file(const std::filesystem::path& file, std::string_view what);
}  // namespace detail

}  // namespace kjit
