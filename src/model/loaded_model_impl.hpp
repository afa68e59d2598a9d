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
    LoadTimes times;
    std::optional<DeviceBuffer> parameter_memory;   // every parameter slot, one allocation
    std::optional<DeviceBuffer> activation_memory;  // every value with its own buffer, one allocation
    std::vector<std::vector<DeviceSpan>> params;    // per node, per slot
    std::vector<std::optional<DeviceSpan>> tight;   // per value that has its own buffer; graph inputs have none
    std::vector<std::optional<DeviceSpan>> padded;  // per value: where the op pads its rows
    std::vector<void*> input_pointers;              // per value, the current forward's
    std::optional<Graph> graph;

    /// Value `v` where it lives: its own buffer, or its channel slice of the one holding it (at
    /// that tensor's image stride; 0 where the slice is tight).
    Tensor value(std::size_t v) const {
        const ModelPlan::Storage& at = plan.storage()[v];
        const Shape& shape = plan.values()[v].shape;
        void* base = tight[at.value] ? tight[at.value]->as<void>() : input_pointers[at.value];
        if (at.value == v) return {base, shape};
        const Shape& whole = plan.values()[at.value].shape;  // a fused op's output: the add's, whole
        const std::size_t stride = element_count(whole) / whole[0];
        const std::size_t offset = at.channel ? at.channel * whole[2] * whole[3] : 0;  // channels: NCHW concats
        return {static_cast<std::byte*>(base) + offset * byte_size(plan.values()[v].type), shape,
                stride == element_count(shape) / shape[0] || shape[0] == 1 ? 0 : stride};
    }

    void run_node(std::size_t n, const Stream& stream) {
        const ModelPlan::Node& node = plan.nodes()[n];
        if (node.fused()) return;  // another node's launch made it
        std::vector<Tensor> inputs;
        for (std::size_t v : node.inputs) inputs.push_back(value(v));
        const Tensor out = value(node.output);
        if (node.op->is_channel_concat()) return copy_into_concat(node, inputs, out, stream);
        std::vector<void*> node_params;
        for (auto& p : params[n]) node_params.push_back(p.as<void>());
        std::vector<Tensor> chained;
        for (std::size_t v : node.chained) chained.push_back(value(v));
        const RuntimeOp& op = node.launched_op();
        const std::size_t row = op.forward_output_row_elems(out.shape),
                          stride = op.forward_output_row_stride(out.shape);
        void* target = padded[node.output] ? padded[node.output]->as<void>() : out.data;
        const void* residual = node.residual ? value(*node.residual).data : nullptr;
        op.forward(
            *runtime, stream,
            {inputs, node_params, target, out.shape, static_cast<int>(stride), out.image_stride, residual, chained});
        const std::size_t bytes = byte_size(plan.values()[node.output].type);
        if (padded[node.output])  // back to tight rows for whoever reads it (the plan never places it)
            copy_2d_async(stream, tight[node.output]->address(), row * bytes, padded[node.output]->address(),
                          stride * bytes, row * bytes, element_count(out.shape) / row);
    }

    /// A concat's inputs the plan could not place in its output, copied there: one 2-D copy of
    /// an image's channels per image each.
    static void copy_into_concat(const ModelPlan::Node& node, std::span<const Tensor> inputs, const Tensor& out,
                                 const Stream& stream) {
        std::vector<std::size_t> first_channel{0};
        for (const Tensor& t : inputs) first_channel.push_back(first_channel.back() + t.shape[1]);
        const std::size_t plane = out.shape[2] * out.shape[3];
        for (const ModelPlan::ConcatCopy& c : node.copies) {
            const Tensor& in = inputs[c.input];
            const auto address = [](const void* p, std::size_t floats) {
                return reinterpret_cast<std::uint64_t>(static_cast<const float*>(p) + floats);
            };
            copy_2d_async(stream, address(out.data, first_channel[c.input] * plane),
                          image_stride_of(out) * sizeof(float), address(in.data, 0),
                          image_stride_of(in) * sizeof(float), in.shape[1] * plane * sizeof(float), in.shape[0]);
        }
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
        for (std::size_t v : plan.outputs()) out.push_back(value(v));  // tight: the plan keeps outputs so
        return out;
    }

    /// Output `i`; UsageError where the graph has no such output.
    Tensor output(std::size_t i) const {
        if (i >= plan.outputs().size()) throw UsageError(fmt::format("output {} of {}", i, plan.outputs().size()));
        return value(plan.outputs()[i]);
    }
};

namespace detail {
/// The whole file; `what` names it in the error ("the graph file").
std::string read_file(const std::filesystem::path& file, std::string_view what);
}  // namespace detail

}  // namespace kjit
