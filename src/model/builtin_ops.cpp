// The ops a graph names, by name: the table of op factories register_op extends. The planner
// and the executor know no op by name; only this file does.
#include <climits>
#include <mutex>

#include <fmt/format.h>
#include <kjit/attention.hpp>
#include <kjit/conv.hpp>
#include <kjit/elementwise.hpp>
#include <kjit/error.hpp>
#include <kjit/model.hpp>

#include "model/builtin_ops.hpp"

namespace kjit {
namespace {

MadeOp made(std::unique_ptr<RuntimeOp> op, const NodeInputs& inputs) {
    Shape out = op->compute_concrete_output_shape(inputs.shapes, {});
    return {std::move(op), std::move(out)};
}

MadeOp make_conv(const NodeAttrs& a, const NodeInputs& inputs, const DeviceTraits& device) {
    const std::span<const ShapeView> in = inputs.shapes;
    if (in.size() != 1) throw UsageError(fmt::format("conv2d_bn_silu takes 1 input, {} given", in.size()));
    if (in[0].size() != 4) throw UsageError("conv2d_bn_silu needs an NCHW input");
    const auto kernel = a.integers("kernel", 2, 1), stride = a.integers("stride", 2, 1), pad = a.integers("pad", 2, 0);
    const Conv2dAttrs attrs{.kernel_h = kernel[0],
                            .kernel_w = kernel[1],
                            .stride_h = stride[0],
                            .stride_w = stride[1],
                            .pad_h = pad[0],
                            .pad_w = pad[1],
                            .groups = a.integer("groups", 1),
                            .bn_eps = static_cast<float>(a.number("bn_eps", 1e-5))};
    auto dim = [](std::size_t v) {
        if (v > static_cast<std::size_t>(INT32_MAX)) throw UsageError(fmt::format("size {} exceeds 32 bits", v));
        return static_cast<int>(v);
    };
    const Conv2dShape shape{dim(in[0][0]), dim(in[0][1]), dim(in[0][2]), dim(in[0][3]), a.integer("c_out")};
    const auto [oh, ow] = conv2d_output_size(attrs, shape);
    return {
        dispatch_conv2d_bn_silu(attrs, shape, device),
        {in[0][0], static_cast<std::size_t>(shape.c_out), static_cast<std::size_t>(oh), static_cast<std::size_t>(ow)}};
}

/// y = x in another element type: f32, f16 or bf16, rounded to nearest even.
MadeOp make_cast(const NodeAttrs& a, const NodeInputs& in, const DeviceTraits&) {
    if (in.size() != 1) throw UsageError(fmt::format("cast takes 1 input, {} given", in.size()));
    const Scalar to = detail::element_type_named(a.choice("to", detail::element_type_names));
    MadeOp m = made(std::make_unique<CastOp>(in.types[0], to), in);
    m.output_type = to;
    m.input_types = {in.types[0]};
    return m;
}

/// Fused attention on q, k, v of one 16-bit type, in the tiles dispatch picks for this device.
MadeOp make_attention(const NodeAttrs& a, const NodeInputs& in, const DeviceTraits& device) {
    if (in.size() != 3) throw UsageError(fmt::format("attention takes 3 inputs (q, k, v), {} given", in.size()));
    const Scalar dtype = in.types[0];
    if (dtype != Scalar::f16 && dtype != Scalar::bf16)
        throw UsageError(fmt::format("attention reads f16 or bf16, q is {}: cast it first", short_name(dtype)));
    static constexpr std::string_view layouts[] = {"bhsd", "bshd"};
    const auto layout = a.choice("layout", layouts, "bhsd") == "bshd" ? AttentionLayout::bshd : AttentionLayout::bhsd;
    const bool causal = a.flag("causal", false);
    const double scale = a.number("scale", 0);
    if (a.has("scale") && !(scale > 0))
        throw UsageError(
            fmt::format("attribute 'scale' is {}: it must be positive (leave it out for 1/sqrt(D))", scale));
    const AttentionShape shape = attention_shape(in.shapes, layout, dtype, causal);
    MadeOp m = made(
        std::make_unique<AttentionForwardOp>(dtype, shape.head_dim, causal, dispatch_attention(shape, device, layout),
                                             layout, static_cast<float>(scale), device.multiprocessors),
        in);
    m.output_type = dtype;
    m.input_types.assign(3, dtype);
    return m;
}

std::mutex registry_mutex;

std::map<std::string, OpFactory, std::less<>>& registry() {
    static std::map<std::string, OpFactory, std::less<>> ops{
        {"conv2d_bn_silu", make_conv},
        {"add", [](const NodeAttrs&, const NodeInputs& in,
                   const DeviceTraits&) { return made(std::make_unique<AddOp>(), in); }},
        {"concat", [](const NodeAttrs&, const NodeInputs& in,
                      const DeviceTraits&) { return made(std::make_unique<ConcatChannelsOp>(in.size()), in); }},
        {"maxpool2d",
         [](const NodeAttrs& a, const NodeInputs& in, const DeviceTraits&) {
             const int k = a.integer("kernel");
             return made(std::make_unique<MaxPool2dOp>(k, a.integer("stride", k), a.integer("pad", 0)), in);
         }},
        {"upsample_nearest2d",
         [](const NodeAttrs& a, const NodeInputs& in, const DeviceTraits&) {
             return made(std::make_unique<UpsampleNearest2dOp>(a.integer("scale", 2)), in);
         }},
        {"cast", make_cast},
        {"attention", make_attention},
    };
    return ops;
}

}  // namespace

void register_op(std::string name, OpFactory factory) {
    std::lock_guard lock(registry_mutex);
    registry().insert_or_assign(std::move(name), std::move(factory));
}

Scalar detail::element_type_named(std::string_view name) {
    for (const Scalar t : {Scalar::f32, Scalar::f16, Scalar::bf16})
        if (short_name(t) == name) return t;
    throw UsageError(fmt::format("'{}' is not an element type (f32, f16 or bf16)", name));
}

OpFactory detail::find_op_factory(std::string_view name, std::vector<std::string>& known) {
    std::lock_guard lock(registry_mutex);
    const auto& ops = registry();
    if (const auto it = ops.find(name); it != ops.end()) return it->second;
    for (const auto& [op, f] : ops) known.push_back(op);
    return {};
}

}  // namespace kjit
