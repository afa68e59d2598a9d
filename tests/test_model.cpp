// The graph executor without a GPU: graph parsing, topological order, shape inference,
// parameter keys and sizes, malformed graphs, safetensors parsing (docs/MODEL.md).
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>

#include <fmt/format.h>
#include <kjit/model.hpp>

#include "support.hpp"

using namespace kjit;

namespace {

const DeviceTraits h200{132, 232448, true};

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
std::vector<std::byte> safetensors_bytes(const std::string& header, std::size_t data_bytes, std::uint64_t claimed = 0) {
    std::vector<std::byte> out(8);
    const std::uint64_t n = claimed ? claimed : header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(n >> (8 * i) & 0xff);
    for (char c : header) out.push_back(static_cast<std::byte>(c));
    out.resize(out.size() + data_bytes, std::byte{0x3f});
    return out;
}

std::string parse_error(const std::vector<std::byte>& file) {
    try {
        (void)parse_safetensors(file);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

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
    CHECK(plan.nodes()[0].op->kernel_for_launch(0).name() == "conv2d_bn_silu_forward");       // 3x3 s2
    CHECK(plan.nodes()[1].op->kernel_for_launch(0).name() == "conv2d_bn_silu_gemm_forward");  // 1x1
    CHECK(plan.nodes()[6].op->n_launches() == 2);
    CHECK(plan.nodes()[0].bn_eps == doctest::Approx(0.001));
    CHECK(plan.nodes()[1].bn_eps == doctest::Approx(1e-5));
    CHECK_FALSE(plan.nodes()[3].bn_eps.has_value());
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
    CHECK(keys == std::vector<std::string>{
                      "stem.weight [16,3,3,3]", "stem.bn_scale [16]", "stem.bn_shift [16]",
                      "a.weight [16,16,1,1]",   "a.bn_scale [16]",    "a.bn_shift [16]",
                      "b.weight [16,16,3,3]",   "b.bn_scale [16]",    "b.bn_shift [16]",
                      "head.weight [8,32,1,1]",  "head.bn_scale [8]",  "head.bn_shift [8]"});
    CHECK(floats == 16 * 27 + 16 * 16 + 16 * 16 * 9 + 8 * 32 + 3 * 2 * 16 + 2 * 8);
}

TEST_CASE("malformed graphs are errors naming the node") {
    CHECK(error_of("not json").find("not valid JSON") != std::string::npos);
    CHECK(error_of(R"({"inputs": [{"name": "x", "shape": ["B", 3, 8, 8]}], "outputs": ["n"],
                       "nodes": [{"name": "n", "op": "softmax", "inputs": ["x"]}]})")
              .find("node 'n': unknown op 'softmax' (known: add, concat, conv2d_bn_silu") != std::string::npos);
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

TEST_CASE("custom ops join the graph through register_op") {
    register_op("twice_add", [](const NodeAttrs&, std::span<const ShapeView> in, const DeviceTraits&) {
        auto op = std::make_unique<AddOp>();
        Shape out = op->compute_concrete_output_shape(in, {});
        return MadeOp{std::move(op), std::move(out)};
    });
    const auto plan = ModelPlan::from_json(R"({"inputs": [{"name": "x", "shape": ["B", 4, 2, 2]}], "outputs": ["n"],
        "nodes": [{"name": "n", "op": "twice_add", "inputs": ["x", "x"]}]})", 3, h200);
    CHECK(plan.nodes()[0].op_name == "twice_add");
    CHECK(plan.values()[plan.outputs()[0]].shape == Shape{3, 4, 2, 2});
}

TEST_CASE("the elementwise ops' kernels compile for sm_80 and sm_90") {
    const AddOp add;
    const ConcatChannelsOp concat(3);
    const MaxPool2dOp pool(5, 1, 2);
    const UpsampleNearest2dOp up(2);
    for (const Kernel* k : {static_cast<const Kernel*>(&add), static_cast<const Kernel*>(&concat),
                            static_cast<const Kernel*>(&pool), static_cast<const Kernel*>(&up)})
        for (const char* arch : {"sm_80", "sm_90"}) {
            CAPTURE(k->id());
            const Compiled c = compile(*k, test::options_for(arch));
            CHECK(c.ptx.find(".entry " + k->entry_point_name()) != std::string::npos);
            CHECK(c.resources.spill_store_bytes == 0);
        }
    CHECK_THROWS_WITH_AS(MaxPool2dOp(3, 1, 2), doctest::Contains("0 <= pad <= kernel / 2"), UsageError);
    CHECK_THROWS_WITH_AS(UpsampleNearest2dOp(0), doctest::Contains("must be 1 to 16"), UsageError);
    CHECK_THROWS_WITH_AS(ConcatChannelsOp(0), doctest::Contains("at least one input"), UsageError);
}

TEST_CASE("safetensors: a written file parses back, tensor by tensor") {
    test::TempDir dir;
    const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{-1.5f};
    const NamedTensor tensors[] = {{"layer.weight", {2, 3}, a}, {"layer.bias", {1}, b}};
    write_safetensors(dir.path() / "w.safetensors", tensors);
    std::ifstream in(dir.path() / "w.safetensors", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto parsed = parse_safetensors(std::as_bytes(std::span(bytes)));
    REQUIRE(parsed.size() == 2);
    const SafeTensor& w = parsed.at("layer.weight");
    CHECK(w.dtype == "F32");
    CHECK(w.shape == Shape{2, 3});
    REQUIRE(w.data.size() == 24);
    std::vector<float> back(6);
    std::memcpy(back.data(), w.data.data(), 24);
    CHECK(back == a);
    CHECK((bytes.size() - w.data.size() - 4) % 8 == 0);  // data starts 8-byte aligned
    CHECK_THROWS_WITH_AS(write_safetensors(dir.path() / "x", std::array{NamedTensor{"t", {2, 2}, a}}),
                         doctest::Contains("holds 4 values, 6 given"), UsageError);
}

TEST_CASE("safetensors: malformed files are errors saying what is wrong") {
    const std::string ok = R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
    CHECK(parse_error(safetensors_bytes(ok, 8)) == "(no error)");
    CHECK(parse_error({std::byte{1}, std::byte{2}}).find("fewer than the 8-byte header length") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(ok, 8, 1ULL << 40)).find("the header claims") != std::string::npos);
    CHECK(parse_error(safetensors_bytes("{not json", 0)).find("header is not JSON") != std::string::npos);
    CHECK(parse_error(safetensors_bytes("[1, 2]", 0)).find("not a JSON object") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(ok, 4)).find("outside the 4 bytes of data") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8))
              .find("8 bytes of data for 3 × F32") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8))
              .find("unknown dtype 'Q4'") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8))
              .find("not a non-negative integer") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8))
              .find("outside") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [2]}})", 8))
              .find("needs dtype, shape and data_offsets") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                        12))
              .find("share the bytes") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],
                                             "data_offsets": [0, 8]}})", 8))
              .find("overflows") != std::string::npos);
}
