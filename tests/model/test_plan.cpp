// Graph planning without a GPU: graph parsing, topological order, shape inference, parameter
// keys and sizes, malformed graphs, custom ops (docs/MODEL.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <kjit/attention.hpp>
#include <kjit/conv.hpp>
#include <kjit/elementwise.hpp>
#include <kjit/model.hpp>

#include "model/graphs.hpp"
#include "support.hpp"

using namespace kjit;

namespace {

const DeviceTraits h200{132, 232448, Arch(9, 0)};

/// A small network touching every op: a strided 3x3 stem, a 1x1 and a 3x3 conv, a residual add,
/// a max pool, an upsample back and a two-way concat.
const char* small_graph = R"({
  "inputs": [{"name": "x", "shape": ["B", 3, 16, 16]}],
  "outputs": ["head"],
  "nodes": [
    {"name": "head", "op": "conv2d_bn_silu", "inputs": ["cat"], "attrs": {"c_out": 8}},
    {"name": "stem", "op": "conv2d_bn_silu", "inputs": ["x"],
     "attrs": {"c_out": 16, "kernel": 3, "stride": 2, "pad": 1, "bn_eps": 0.001}},
    {"name": "a", "op": "conv2d_bn_silu", "inputs": ["stem"], "attrs": {"c_out": 16}},
    {"name": "b", "op": "conv2d_bn_silu", "inputs": ["a"], "attrs": {"c_out": 16, "kernel": [3, 3], "pad": [1, 1]}},
    {"name": "res", "op": "add", "inputs": ["b", "stem"]},
    {"name": "pool", "op": "maxpool2d", "inputs": ["res"], "attrs": {"kernel": 2, "stride": 2}},
    {"name": "up", "op": "upsample_nearest2d", "inputs": ["pool"], "attrs": {"scale": 2}},
    {"name": "cat", "op": "concat", "inputs": ["up", "res"]}
  ]
})";

std::string error_of(std::string_view graph, int batch = 2) {
    try {
        (void)ModelPlan::from_json(graph, batch, h200);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

/// A safetensors file built by hand: header JSON, then `data`.
}  // namespace

TEST_CASE("a graph is planned in topological order with concrete shapes for the batch") {
    const ModelPlan plan = ModelPlan::from_json(small_graph, 2, h200);
    std::vector<std::string> order;
    for (const auto& n : plan.nodes()) order.push_back(n.name);
    CHECK(order == std::vector<std::string>{"stem", "a", "b", "res", "pool", "up", "cat", "head"});
    auto shape_of = [&](std::string_view name) {
        for (const auto& v : plan.values())
            if (v.name == name) return v.shape;
        return Shape{};
    };
    CHECK(shape_of("x") == Shape{2, 3, 16, 16});
    CHECK(shape_of("stem") == Shape{2, 16, 8, 8});
    CHECK(shape_of("b") == Shape{2, 16, 8, 8});
    CHECK(shape_of("pool") == Shape{2, 16, 4, 4});
    CHECK(shape_of("up") == Shape{2, 16, 8, 8});
    CHECK(shape_of("cat") == Shape{2, 32, 8, 8});
    CHECK(shape_of("head") == Shape{2, 8, 8, 8});
    CHECK(plan.values()[plan.outputs()[0]].name == "head");
    CHECK(ModelPlan::from_json(small_graph, 5, h200).values()[0].shape == Shape{5, 3, 16, 16});  // the symbolic batch

    // Which kernel each conv got, and concat's one launch per input.
    CHECK(plan.nodes()[0].op->kernel_for_launch(0).name() == "conv2d_bn_silu_forward");           // 3x3 s2
    CHECK(plan.nodes()[1].op->kernel_for_launch(0).name() == "conv2d_bn_silu_gemm_tma_forward");  // 1x1 on a 9.0 device
    CHECK(plan.nodes()[6].op->n_launches() == 2);
    // Conv nodes carry their BatchNorm ε and fold raw BatchNorm tensors; the others fold nothing.
    auto conv_attrs = [&](std::size_t n) { return dynamic_cast<const Conv2dOp&>(*plan.nodes()[n].op).attrs(); };
    CHECK(conv_attrs(0).bn_eps == doctest::Approx(0.001));
    CHECK(conv_attrs(1).bn_eps == doctest::Approx(1e-5));
    auto param_shapes = [&](std::size_t n) {
        std::vector<Shape> shapes;
        for (const auto& p : plan.nodes()[n].params) shapes.push_back(p.shape);
        return shapes;
    };
    CHECK(plan.nodes()[0].op->param_fold(param_shapes(0)).has_value());
    CHECK_FALSE(plan.nodes()[3].op->param_fold(param_shapes(3)).has_value());
}
TEST_CASE("parameters are keyed {node}.{slot} with the sizes the ops ask for") {
    const ModelPlan plan = ModelPlan::from_json(small_graph, 1, h200);
    std::vector<std::string> keys;
    std::size_t floats = 0;
    for (const auto& n : plan.nodes())
        for (const auto& p : n.params) {
            keys.push_back(fmt::format("{} [{}]", p.key, fmt::join(p.shape, ",")));
            floats += std::accumulate(p.shape.begin(), p.shape.end(), std::size_t{1}, std::multiplies<>());
        }
    CHECK(keys == std::vector<std::string>{"stem.weight [16,3,3,3]", "stem.bn_scale [16]", "stem.bn_shift [16]",
                                           "a.weight [16,16,1,1]", "a.bn_scale [16]", "a.bn_shift [16]",
                                           "b.weight [16,16,3,3]", "b.bn_scale [16]", "b.bn_shift [16]",
                                           "head.weight [8,32,1,1]", "head.bn_scale [8]", "head.bn_shift [8]"});
    CHECK(floats == 16 * 27 + 16 * 16 + 16 * 16 * 9 + 8 * 32 + 3 * 2 * 16 + 2 * 8);
}
TEST_CASE("a plan's conv layers, and a tuned configuration put in a conv node's place") {
    ModelPlan plan = ModelPlan::from_json(small_graph, 2, h200);
    const auto convs = plan.conv_layers();
    REQUIRE(convs.size() == 4);  // stem, a, b, head: in node order
    const auto& [stem_node, stem] = convs[0];
    CHECK(plan.nodes()[stem_node].name == "stem");
    CHECK(stem.attrs.kernel_h == 3);
    CHECK(stem.attrs.stride_h == 2);
    CHECK(stem.attrs.bn_eps == doctest::Approx(0.001));
    CHECK((stem.shape.batch == 2 && stem.shape.c_in == 3 && stem.shape.height == 16 && stem.shape.c_out == 16));
    const auto& [b_node, b] = convs[2];
    const std::string other = "BLOCK_OC=16 BLOCK_OW=32";
    plan.replace_op(b_node, make_conv2d_bn_silu(b.attrs, b.shape, other, h200));
    CHECK(conv2d_bn_silu_config(dynamic_cast<const Conv2dOp&>(*plan.nodes()[b_node].op)) == other);
    // An op that takes other shapes is refused, naming the node; the node keeps its op.
    CHECK_THROWS_WITH_AS(plan.replace_op(b_node, make_conv2d_bn_silu(stem.attrs, stem.shape, other, h200)),
                         doctest::Contains("node 'b': the op put in its place takes other shapes"), UsageError);
    CHECK(conv2d_bn_silu_config(dynamic_cast<const Conv2dOp&>(*plan.nodes()[b_node].op)) == other);
}

TEST_CASE("malformed graphs are errors naming the node") {
    CHECK(error_of("not json").find("not valid JSON") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "n", "op": "softmax", "inputs": ["x"]}]})")
              .find("node 'n': unknown op 'softmax' (known: add, attention, cast, concat, conv2d_bn_silu") !=
          std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["p"],
                       "nodes": [{"name": "p", "op": "add", "inputs": ["q", "x"]},
                                 {"name": "q", "op": "add", "inputs": ["p", "x"]}]})")
              .find("cycle through the nodes p, q") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "n", "op": "add", "inputs": ["x", "ghost"]}]})")
              .find("node 'n': input 'ghost' is neither a graph input nor a node") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "p", "op": "maxpool2d", "inputs": ["x"], "attrs": {"kernel": 2}},
                                 {"name": "n", "op": "add", "inputs": ["x", "p"]}]})")
              .find("node 'n' (add, inputs [2, 3, 8, 8] [2, 3, 4, 4]): add needs equal shapes") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "n", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"kernel": 3}}]})")
              .find("node 'n': attribute 'c_out' is missing") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "n", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 4, "groups": 2}}]})")
              .find("node 'n' (conv2d_bn_silu") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "x", "op": "add", "inputs": ["x", "x"]}]})")
              .find("node 'x': the name is used twice") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["nowhere"],
                       "nodes": [{"name": "n", "op": "add", "inputs": ["x", "x"]}]})")
              .find("graph output \"nowhere\"") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", -3, 8, 8]}], "outputs": ["x"], "nodes": []})")
              .find("input 'x': shape entry -3") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "n", "op": "maxpool2d", "inputs": ["x"], "attrs": {"kernel": 1e99}}]})")
              .find("node 'n': attribute 'kernel'") != std::string::npos);
    CHECK(error_of(small_graph, 0).find("batch 0 must be positive") != std::string::npos);
}
TEST_CASE("unknown keys are errors naming the key: a misspelt one is never silently ignored") {
    const std::string x = R"("inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"])";
    const auto graph = [&](std::string_view extra_top, std::string_view node) {
        return fmt::format(R"({{{}, {} "nodes": [{}]}})", x, extra_top, node);
    };
    CHECK(error_of(graph(R"("node": [],)", R"({"name": "n", "op": "add", "inputs": ["x", "x"]})"))
              .find("the graph: unknown key \"node\" (the keys are name, inputs, nodes, outputs)") !=
          std::string::npos);
    CHECK(error_of(graph("", R"({"name": "n", "op": "add", "inputs": ["x", "x"], "attr": {}})"))
              .find("node 'n': unknown key \"attr\"") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8], "type": "f16"}], "outputs": ["x"],
                       "nodes": []})")
              .find("input 'x': unknown key \"type\" (the keys are name, shape, dtype)") != std::string::npos);
    // An attribute the op never reads: "kernal" for "kernel" would have run a 1x1 convolution.
    const std::string misspelt = error_of(
        graph("", R"({"name": "n", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 4, "kernal": 3}})"));
    CHECK(misspelt.find("node 'n': unknown attribute 'kernal' of op 'conv2d_bn_silu' (it reads ") != std::string::npos);
    CHECK(misspelt.find("kernel") != std::string::npos);
    CHECK(error_of(graph("", R"({"name": "n", "op": "add", "inputs": ["x", "x"], "attrs": {"alpha": 1}})"))
              .find("node 'n': unknown attribute 'alpha' of op 'add' (it reads none)") != std::string::npos);
    CHECK_NOTHROW((void)ModelPlan::from_json(small_graph, 2, h200));  // every key of it is known
}

TEST_CASE("custom ops join the graph through register_op") {
    register_op("twice_add", [](const NodeAttrs&, const NodeInputs& in, const DeviceTraits&) {
        auto op = std::make_unique<AddOp>();
        Shape out = op->compute_concrete_output_shape(in.shapes, {});
        return MadeOp{std::move(op), std::move(out)};
    });
    const auto plan = ModelPlan::from_json(R"({"inputs": [{"name": "x", "shape": ["B", 4, 2, 2]}], "outputs": ["n"],
        "nodes": [{"name": "n", "op": "twice_add", "inputs": ["x", "x"]}]})",
                                           3, h200);
    CHECK(plan.nodes()[0].op_name == "twice_add");
    CHECK(plan.values()[plan.outputs()[0]].shape == Shape{3, 4, 2, 2});
}

TEST_CASE("typed values: casts and attention in a graph, f16 and bf16 between f32 ends") {
    const ModelPlan plan = ModelPlan::from_json(test::attention_graph("bf16", R"({"causal": true})"), 2, h200);
    const auto& values = plan.values();
    const auto value = [&](std::string_view name) { return *std::ranges::find(values, name, &ModelPlan::Value::name); };
    CHECK(value("q").type == Scalar::f32);
    CHECK(value("q16").type == Scalar::bf16);
    CHECK(value("attn").type == Scalar::bf16);
    CHECK(value("attn").shape == Shape{2, 8, 100, 64});
    CHECK(value("out").type == Scalar::f32);
    const auto& attn = plan.nodes()[3];
    REQUIRE(attn.name == "attn");
    const auto& op = dynamic_cast<const AttentionForwardOp&>(*attn.op);
    const AttentionShape shape{2, 8, 2, 100, 300, 64, true, Scalar::bf16};
    CHECK(op.tiles() == dispatch_attention(shape, h200));  // dispatch's pick for the planned device
    const auto layers = plan.attention_layers();
    REQUIRE(layers.size() == 1);
    CHECK(layers[0].first == 3);
    CHECK(layers[0].second == shape);
    CHECK(op.causal());
    CHECK(op.layout() == AttentionLayout::bhsd);
    REQUIRE(!attn.params.empty());
    CHECK(attn.params[0].key == "attn.lse");
    CHECK(attn.params[0].shape == Shape{2, 8, 100});
    CHECK(plan.launches() == 4 + op.n_launches());
    // Two cast kernels (f32 → bf16 thrice, one kernel; bf16 → f32) and attention's.
    CHECK(plan.kernels().size() == 2 + op.n_launches());
    // lse is the op's to write: an empty weights file fits.
    const WeightsReport report = check_weights(plan, {});
    CHECK(report.loaded == 0);

    // Graph inputs may be 16-bit themselves, in [B, S, H, D].
    const ModelPlan direct = ModelPlan::from_json(R"({
      "inputs": [{"name": "q", "shape": ["B", 5, 4, 128], "dtype": "f16"},
                 {"name": "k", "shape": ["B", 7, 4, 128], "dtype": "f16"},
                 {"name": "v", "shape": ["B", 7, 4, 128], "dtype": "f16"}],
      "outputs": ["attn"],
      "nodes": [{"name": "attn", "op": "attention", "inputs": ["q", "k", "v"],
                 "attrs": {"layout": "bshd", "scale": 0.25}}]})",
                                                  1, h200);
    const auto& bshd = dynamic_cast<const AttentionForwardOp&>(*direct.nodes()[0].op);
    CHECK(bshd.layout() == AttentionLayout::bshd);
    CHECK(bshd.dtype() == Scalar::f16);
    CHECK(bshd.scale() == 0.25f);
    CHECK(direct.values()[direct.outputs()[0]].type == Scalar::f16);
    CHECK(direct.nodes()[0].params[0].shape == Shape{1, 4, 5});  // lse [B, H, S]
}

TEST_CASE("typed values: a type an op does not read is an error naming the cast to add") {
    CHECK(error_of(test::attention_graph("bf16", R"({"causal": 1})"))
              .find("node 'attn': attribute 'causal' is 1: it must be true or false") != std::string::npos);
    CHECK(error_of(test::attention_graph("bf16", R"({"layout": "nchw"})"))
              .find("attribute 'layout' is \"nchw\": it must be one of \"bhsd\", \"bshd\"") != std::string::npos);
    CHECK(error_of(test::attention_graph("bf16", R"({"scale": -1})")).find("it must be positive") != std::string::npos);
    CHECK(error_of(test::attention_graph("int8", "{}")).find("attribute 'to' is \"int8\": it must be one of") !=
          std::string::npos);
    CHECK(error_of(test::attention_graph("f32", "{}")).find("a cast from f32 to itself does nothing") !=
          std::string::npos);
    CHECK(error_of(test::attention_graph("bf16", "{}", 8, 3)).find("kv_heads") != std::string::npos);
    CHECK(error_of(test::attention_graph("bf16", "{}", 8, 2, 100, 300, 80)).find("head_dim") != std::string::npos);
    const std::string f32_attention = error_of(R"({
      "inputs": [{"name": "q", "shape": [1, 2, 3, 64]}], "outputs": ["a"],
      "nodes": [{"name": "a", "op": "attention", "inputs": ["q", "q", "q"]}]})");
    CHECK(f32_attention.find("node 'a' (attention, inputs [1, 2, 3, 64] [1, 2, 3, 64] [1, 2, 3, 64]): attention "
                             "reads f16 or bf16, q is f32: cast it first") != std::string::npos);
    const std::string mixed = error_of(R"({
      "inputs": [{"name": "q", "shape": [1, 2, 3, 64], "dtype": "bf16"}, {"name": "k", "shape": [1, 2, 3, 64], "dtype": "f16"}],
      "outputs": ["a"],
      "nodes": [{"name": "a", "op": "attention", "inputs": ["q", "k", "k"]}]})");
    CHECK(mixed.find("input 'k' is f16, the op reads bf16: put a cast node before it") != std::string::npos);
    const std::string conv = error_of(R"({
      "inputs": [{"name": "x", "shape": [1, 3, 8, 8], "dtype": "bf16"}], "outputs": ["c"],
      "nodes": [{"name": "c", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 4}}]})");
    CHECK(conv.find(R"(input 'x' is bf16, the op reads f32: put a cast node before it ({"op": "cast", "attrs": )"
                    R"({"to": "f32"}}))") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": [1], "dtype": "f64"}], "outputs": ["x"], "nodes": []})")
              .find("input 'x': \"dtype\" is \"f64\": it must be one of \"f32\", \"f16\", \"bf16\"") !=
          std::string::npos);
}

TEST_CASE("a tuned attention winner put in a node's place: its workspace slot follows its key shares") {
    // One query against 5,000 keys: dispatch splits the keys, which takes a workspace slot.
    ModelPlan plan = ModelPlan::from_json(test::attention_graph("bf16", "{}", 8, 8, 1, 5000, 128), 1, h200);
    const std::size_t n = 3;
    const auto& op = dynamic_cast<const AttentionForwardOp&>(*plan.nodes()[n].op);
    REQUIRE(op.tiles().kv_splits > 1);
    REQUIRE(plan.nodes()[n].params.size() == 2);
    CHECK(plan.nodes()[n].params[1].key == "attn.partials");
    AttentionTiles whole = op.tiles();
    whole.kv_splits = 1;
    const float scale = op.scale();
    plan.replace_op(n, op.with_tiles(whole));  // `op` is gone now
    const auto& replaced = dynamic_cast<const AttentionForwardOp&>(*plan.nodes()[n].op);
    CHECK(replaced.tiles() == whole);
    CHECK(replaced.scale() == scale);
    CHECK(plan.nodes()[n].params.size() == 1);
    CHECK(plan.nodes()[n].params[0].shape == Shape{1, 8, 1});
    CHECK(plan.launches() == 5);
    // Another head dim takes other shapes: refused.
    CHECK_THROWS_WITH_AS(plan.replace_op(n, std::make_unique<AttentionForwardOp>(Scalar::bf16, 64, false, whole)),
                         doctest::Contains("node 'attn'"), UsageError);
}

TEST_CASE("weights are checked against a plan without a device: every missing key and mismatch in one error") {
    const ModelPlan plan = ModelPlan::from_json(small_graph, 2, h200);
    // Every slot of the plan, from one buffer big enough for the largest (values never zero).
    std::vector<float> ones(4096, 0.25f);
    std::map<std::string, SafeTensor> tensors;
    for (const auto& node : plan.nodes())
        for (const auto& p : node.params)
            tensors[p.key] = {"F32", p.shape, std::as_bytes(std::span(ones).first(element_count(p.shape)))};
    std::size_t slots = 0;
    for (const auto& node : plan.nodes()) slots += node.params.size();
    WeightsReport report = check_weights(plan, tensors);
    CHECK(report.loaded == slots);
    CHECK(report.folded == 0);
    CHECK(report.extra.empty());

    // The stem's BatchNorm as a file from PyTorch holds it: folded, as load_weights folds it.
    auto folding = tensors;
    folding.erase("stem.bn_scale");
    folding.erase("stem.bn_shift");
    for (const char* source : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"})
        folding[fmt::format("stem.{}", source)] = {"F32", {16}, std::as_bytes(std::span(ones).first(16))};
    report = check_weights(plan, folding);
    CHECK(report.folded == 1);
    CHECK(report.loaded == slots);
    // What no fold takes is found by the check, with the node and its tensors named.
    std::vector<float> negative(16, 0.25f);
    negative[3] = -1.0f;
    auto unfoldable = folding;
    unfoldable["stem.bn.running_var"] = {"F32", {16}, std::as_bytes(std::span(negative))};
    unfoldable.erase("a.weight");
    CHECK_THROWS_WITH_AS(
        (void)check_weights(plan, unfoldable),
        doctest::Contains("missing: a.weight; not foldable: node 'stem' (stem.bn.weight, stem.bn.bias, "
                          "stem.bn.running_mean, stem.bn.running_var): BatchNorm channel 3: var + "
                          "eps = -0.999 must be positive"),
        UsageError);

    auto bad = tensors;
    bad.erase("a.weight");
    bad["b.bn_scale"].dtype = "F16";
    bad["head.weight"].shape = {8, 2, 1, 1};
    const std::string error = [&] {
        try {
            (void)check_weights(plan, bad);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    }();
    CHECK(error.find("missing: a.weight") != std::string::npos);
    CHECK(error.find("b.bn_scale: the file has F16 [16], the model needs F32 [16]") != std::string::npos);
    CHECK(error.find("head.weight: the file has F32 [8, 2, 1, 1], the model needs F32 [8, 32, 1, 1]") !=
          std::string::npos);
    auto extra = tensors;
    extra["nobody.weight"] = tensors["a.bn_scale"];
    CHECK(check_weights(plan, extra).extra == std::vector<std::string>{"nobody.weight"});
}

namespace {

struct Placed {
    std::string in;  ///< the value holding it ("" where it has its own buffer)
    std::size_t channel = 0;
};

Placed placed(const ModelPlan& plan, std::string_view name) {
    for (std::size_t v = 0; v < plan.values().size(); ++v)
        if (plan.values()[v].name == name) {
            const auto& at = plan.storage()[v];
            return at.value == v ? Placed{} : Placed{plan.values()[at.value].name, at.channel};
        }
    FAIL("no value ", name);
    return {};
}

/// "input: reason" for each copy of concat `name`.
std::vector<std::string> copies(const ModelPlan& plan, std::string_view name) {
    std::vector<std::string> out;
    for (const auto& node : plan.nodes())
        if (node.name == name)
            for (const auto& c : node.copies)
                out.push_back(fmt::format("{}: {}", plan.values()[node.inputs[c.input]].name, c.reason));
    return out;
}

}  // namespace

TEST_CASE("zero-copy concat: producers write into the concat's output where they and every reader can") {
    SUBCASE("batch 1: every channel slice is tight, so any producer writes it") {
        const auto plan = ModelPlan::from_json(test::concat_graph, 1, h200);
        CHECK(placed(plan, "inner").in == "cat");
        CHECK(placed(plan, "a").in == "cat");  // through the nested concat
        CHECK(placed(plan, "a").channel == 0);
        CHECK(placed(plan, "b").channel == 7);  // the depthwise conv: tight at batch 1
        CHECK(placed(plan, "r").channel == 14);
        CHECK(placed(plan, "p").channel == 21);
        CHECK(placed(plan, "c").channel == 39);
        CHECK(placed(plan, "cat").in.empty());  // its own buffer: nothing holds it
        CHECK(placed(plan, "x").in.empty());
        CHECK(copies(plan, "inner").empty());
        CHECK(copies(plan, "cat") == std::vector<std::string>{"x: a graph input: it lives in the caller's buffer",
                                                              "p: it is this concat's input more than once"});
        // a, b, r, p, c and head launch; the concats copy x and the second p.
        CHECK(plan.launches() == 6 + 2);
    }
    SUBCASE("batch 3: slices lie at the concat's image stride, which a depthwise conv takes neither way") {
        const auto plan = ModelPlan::from_json(test::concat_graph, 3, h200);
        CHECK(placed(plan, "inner").in == "cat");
        CHECK(placed(plan, "a").in.empty());
        CHECK(placed(plan, "b").in.empty());
        CHECK(placed(plan, "r").in == "cat");  // the add writes it, the max pool and conv c read it, at any stride
        CHECK(placed(plan, "p").in == "cat");
        CHECK(placed(plan, "c").in == "cat");
        CHECK(copies(plan, "inner") ==
              std::vector<std::string>{"a: node 'b' (conv2d_bn_silu) reads it and takes tight images only",
                                       "b: node 'b' (conv2d_bn_silu) writes tight images only"});
        CHECK(copies(plan, "cat").size() == 2);
        CHECK(plan.launches() == 6 + 4);
    }
    SUBCASE("a graph output stays tight at batch > 1; off, every input is copied") {
        const char* graph = R"({"inputs": [{"name": "x", "shape": ["B", 2, 4, 4]}], "outputs": ["p", "cat"],
            "nodes": [{"name": "p", "op": "maxpool2d", "inputs": ["x"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
                      {"name": "q", "op": "maxpool2d", "inputs": ["x"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
                      {"name": "cat", "op": "concat", "inputs": ["p", "q"]}]})";
        const auto two = ModelPlan::from_json(graph, 2, h200);
        CHECK(copies(two, "cat") ==
              std::vector<std::string>{"p: a graph output, which the caller reads tight: at batch > 1 a slice is not"});
        CHECK(placed(two, "q").in == "cat");
        CHECK(placed(ModelPlan::from_json(graph, 1, h200), "p").in == "cat");
        const auto off = ModelPlan::from_json(graph, 1, h200, {.place_concat_inputs = false});
        CHECK(copies(off, "cat").size() == 2);
        CHECK(placed(off, "p").in.empty());
        CHECK(off.launches() == 4);
    }
    SUBCASE("YOLOv8n: every concat copy gone, at batch 1 and 16") {
        std::ifstream file(KJIT_SOURCE_DIR "/examples/yolov8n/yolov8n.json");
        const std::string yolo{std::istreambuf_iterator<char>(file), {}};
        for (int batch : {1, 16}) {
            CAPTURE(batch);
            const auto placed = ModelPlan::from_json(yolo, batch, h200);
            const auto copied = ModelPlan::from_json(
                yolo, batch, h200, {.place_concat_inputs = false, .fuse_residual_adds = false, .chain_ops = false});
            CHECK(copied.launches() == 80);
            CHECK(placed.launches() == 80 - 28 - 6 - 2);  // and its six adds fused, SPPF's pools chained
            for (const auto& node : placed.nodes()) CHECK(node.copies.empty());
        }
    }
}

namespace {

/// "{node} adds {value}" for each node whose epilogue adds a residual, and "{node} fused" for
/// each add made so.
std::vector<std::string> fusions(const ModelPlan& plan) {
    std::vector<std::string> out;
    for (const auto& node : plan.nodes()) {
        if (node.residual) out.push_back(fmt::format("{} adds {}", node.name, plan.values()[*node.residual].name));
        if (node.fused()) out.push_back(node.name + " fused");
    }
    return out;
}

}  // namespace

TEST_CASE("fused residual adds: a conv's epilogue adds the residual where it alone reads its output") {
    const auto one = ModelPlan::from_json(test::residual_graph, 1, h200);
    CHECK(fusions(one) == std::vector<std::string>{"m1 adds s", "r1 fused", "m2 adds r1", "r2 fused"});
    CHECK(one.launches() == 7);  // s, m1, m2, d, r3, u, r4
    // Batch 3: r2's output is copied into the concat, r1 lives there: their images lie apart
    // differently, so m2's epilogue cannot add r1 in place of r2's add.
    const auto three = ModelPlan::from_json(test::residual_graph, 3, h200);
    CHECK(fusions(three) == std::vector<std::string>{"m1 adds s", "r1 fused"});
    CHECK(three.launches() == 9);  // s, m1, m2, r2, d, r3, the copy of r2, u, r4
    const auto off = ModelPlan::from_json(test::residual_graph, 1, h200, {.fuse_residual_adds = false});
    CHECK(fusions(off).empty());
    CHECK(off.launches() == 9);
    // YOLOv8n: the six bottleneck adds of its C2f blocks.
    std::ifstream file(KJIT_SOURCE_DIR "/examples/yolov8n/yolov8n.json");
    const std::string yolo{std::istreambuf_iterator<char>(file), {}};
    for (int batch : {1, 16}) {
        CAPTURE(batch);
        const auto plan = ModelPlan::from_json(yolo, batch, h200);
        CHECK(std::ranges::count_if(plan.nodes(), [](const auto& n) { return n.fused(); }) == 6 + 2);
        CHECK(plan.launches() == 80 - 28 - 6 - 2);  // and SPPF's three pools in one launch
        CHECK(ModelPlan::from_json(yolo, batch, h200, {.chain_ops = false}).launches() == 80 - 28 - 6);
    }
}

namespace {

/// "{node} writes {values}" for each node whose launch runs a chain.
std::vector<std::string> chains(const ModelPlan& plan) {
    std::vector<std::string> out;
    for (const auto& node : plan.nodes()) {
        if (node.chained.empty()) continue;
        std::vector<std::string> names;
        for (std::size_t v : node.chained) names.push_back(plan.values()[v].name);
        out.push_back(fmt::format("{} writes {}", node.name, fmt::join(names, " ")));
        CHECK(node.launched_op().n_chained_outputs() == node.chained.size());
    }
    return out;
}

}  // namespace

TEST_CASE("chained max pools: SPPF's run in one launch, up to the kernel's four, same-size pools only") {
    for (int batch : {1, 3}) {
        CAPTURE(batch);
        const auto plan = ModelPlan::from_json(test::sppf_graph, batch, h200);
        CHECK(chains(plan) == std::vector<std::string>{"p1 writes p2 p3", "q1 writes q2 q3 q4"});
        for (const auto& node : plan.nodes()) {
            CAPTURE(node.name);
            const bool chained = node.name == "p2" || node.name == "p3" || (node.name >= "q2" && node.name <= "q4");
            CHECK(node.fused() == chained);
            if (chained) CHECK(plan.nodes()[*node.made_by].name == (node.name[0] == 'p' ? "p1" : "q1"));
        }
        const auto apart = ModelPlan::from_json(test::sppf_graph, batch, h200, {.chain_ops = false});
        CHECK(chains(apart).empty());
        CHECK(plan.launches() + 5 == apart.launches());
        // The kernels a forward launches, each once: the chains' (one kernel for both), and the
        // plain pool's for q5 and q6 only.
        const auto kernels = [](const ModelPlan& p) {
            std::multiset<std::string> names;
            std::set<std::string> ids;
            for (const Kernel* k : p.kernels()) names.insert(k->name()), ids.insert(k->id());
            CHECK(ids.size() == names.size());
            return names;
        };
        CHECK(kernels(plan).count("maxpool2d_chain") == 1);
        CHECK(kernels(plan).count("maxpool2d") == 1);
        CHECK(kernels(plan).count("add") == 1);
        CHECK(kernels(apart).count("maxpool2d_chain") == 0);
        CHECK(kernels(apart).count("maxpool2d") == 1);
    }
    // A 65 x 65 plane is over what a block of the chained kernel holds: the pools run one by one.
    const auto big = ModelPlan::from_json(R"({"inputs": [{"name": "x", "shape": ["B", 2, 65, 65]}], "outputs": ["b"],
        "nodes": [{"name": "a", "op": "maxpool2d", "inputs": ["x"], "attrs": {"kernel": 5, "stride": 1, "pad": 2}},
                  {"name": "b", "op": "maxpool2d", "inputs": ["a"], "attrs": {"kernel": 5, "stride": 1, "pad": 2}}]})",
                                          1, h200);
    CHECK(chains(big).empty());
    CHECK(big.launches() == 2);
}
