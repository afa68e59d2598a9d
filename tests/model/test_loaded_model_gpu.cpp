// The graph executor and the elementwise ops on a GPU, against float64 CPU references: every op
// with NaN-poisoned outputs and a guard, a small network end to end (weights from safetensors,
// BatchNorm folded from raw tensors), CUDA graph replay, and an op with padded output rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <kjit/attention.hpp>
#include <kjit/kjit.hpp>
#include <kjit/model.hpp>

#include "model/graphs.hpp"
#include "support.hpp"

using namespace kjit;

namespace {

std::mt19937_64& rng() {
    static std::mt19937_64 r{std::random_device{}()};
    return r;
}

std::vector<float> random_values(std::size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& e : v) e = d(rng());
    return v;
}

/// Runs `op` once on device copies of `inputs` into a NaN-poisoned output with a NaN guard
/// after it; checks every element was written, the guard untouched, and the values against `ref`.
void check_op(const RuntimeOp& op, const std::vector<std::pair<Shape, std::vector<float>>>& inputs, const Shape& out,
              const std::vector<double>& ref) {
    const auto device = Device::get(0);
    Stream stream(device);
    std::vector<DeviceBuffer> buffers;
    std::vector<Tensor> tensors;
    for (const auto& [shape, values] : inputs) {
        buffers.emplace_back(device, values.size() * sizeof(float));
        buffers.back().upload(std::span<const float>(values));
        tensors.push_back({buffers.back().as<void>(), shape});
    }
    const OutputCheck c = checked_forward(op, Runtime::global(), stream, tensors, {}, out, ref, 1e-7);
    CAPTURE(c.error);
    CHECK(c.unwritten == 0);
    CHECK(c.guard_written == 0);
    CHECK(c.passed());
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

/// Fills every output of `model` with NaN (all-ones bytes: NaN in f32, f16 and bf16).
void poison_outputs(const LoadedModel& model, const Stream& stream) {
    const auto outputs = model.outputs();
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const Tensor& t = outputs[i];
        const std::size_t bytes = element_count(t.shape) *
                                  byte_size(model.plan().values()[model.plan().outputs()[i]].type);
        DeviceBuffer nan(stream.device(), bytes);
        nan.fill(0xff);
        copy_2d_async(stream, reinterpret_cast<std::uint64_t>(t.data), bytes, nan.address(), bytes, bytes, 1);
        stream.synchronize();
    }
}

}  // namespace

TEST_CASE("add, concat, max pooling and upsampling match float64 references, every element written once") {
    const Shape s{2, 5, 7, 9};
    const auto a = random_values(element_count(s)), b = random_values(element_count(s));
    check_op(AddOp(), {{s, a}, {s, b}}, s, add_reference(a, b));

    const Shape s2{2, 3, 7, 9}, s3{2, 1, 7, 9};
    const auto c = random_values(element_count(s2)), d = random_values(element_count(s3));
    check_op(ConcatChannelsOp(3), {{s, a}, {s2, c}, {s3, d}}, {2, 9, 7, 9},
             concat_channels_reference(std::vector{a, c, d}, std::vector{s, s2, s3}));

    for (auto [k, stride, pad] : {std::tuple{5, 1, 2}, std::tuple{2, 2, 0}, std::tuple{3, 2, 1}}) {
        CAPTURE(k);
        const MaxPool2dOp pool(k, stride, pad);
        const Shape o = pool.compute_concrete_output_shape(std::array{ShapeView(s)}, {});
        check_op(pool, {{s, a}}, o, maxpool2d_reference(a, s, k, stride, pad));
    }
    // Chained pools, each output checked: SPPF's 5x5 and a 3x3, up to four repeats, on planes of
    // one element, off the block's size, and of the most a block holds.
    for (const Shape& c : {Shape{3, 2, 1, 1}, s, Shape{1, 3, 64, 64}})
        for (int k : {5, 3})
            for (int repeats = 2; repeats <= MaxPool2dChainOp::max_repeats; ++repeats) {
                CAPTURE(k);
                CAPTURE(repeats);
                const auto x = random_values(element_count(c));
                check_op(MaxPool2dChainOp(k, repeats), {{c, x}}, c, maxpool2d_chain_reference(x, c, k, repeats));
            }
    for (std::size_t f : {2u, 3u})
        check_op(UpsampleNearest2dOp(static_cast<int>(f)), {{s, a}}, {2, 5, 7 * f, 9 * f},
                 upsample_nearest2d_reference(a, s, static_cast<int>(f)));
}

namespace {

const char* network = R"({
  "inputs": [{"name": "x", "shape": ["B", 3, 20, 24]}],
  "outputs": ["head", "pool"],
  "nodes": [
    {"name": "stem", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 16, "kernel": 3, "stride": 2, "pad": 1, "bn_eps": 0.001}},
    {"name": "a", "op": "conv2d_bn_silu", "inputs": ["stem"], "attrs": {"c_out": 16}},
    {"name": "b", "op": "conv2d_bn_silu", "inputs": ["a"], "attrs": {"c_out": 16, "kernel": 3, "pad": 1}},
    {"name": "dw", "op": "conv2d_bn_silu", "inputs": ["b"], "attrs": {"c_out": 16, "kernel": 3, "pad": 1, "groups": 16}},
    {"name": "res", "op": "add", "inputs": ["dw", "stem"]},
    {"name": "pool", "op": "maxpool2d", "inputs": ["res"], "attrs": {"kernel": 5, "stride": 1, "pad": 2}},
    {"name": "down", "op": "maxpool2d", "inputs": ["pool"], "attrs": {"kernel": 2, "stride": 2}},
    {"name": "up", "op": "upsample_nearest2d", "inputs": ["down"]},
    {"name": "cat", "op": "concat", "inputs": ["up", "res", "pool"]},
    {"name": "head", "op": "conv2d_bn_silu", "inputs": ["cat"], "attrs": {"c_out": 24}}
  ]
})";

/// Random weights for every conv: raw BatchNorm tensors for some nodes (folded at load), folded
/// scale/shift for the others; returns them by key and writes them to a safetensors file.
struct Weights {
    std::map<std::string, std::pair<Shape, std::vector<float>>> tensors;
    std::map<std::string, std::pair<std::vector<float>, std::vector<float>>> folded;  // node → scale, shift
};

Weights make_weights(const ModelPlan& plan) {
    Weights w;
    for (const auto& node : plan.nodes()) {
        if (node.params.empty()) continue;
        const Shape& ws = node.params[0].shape;
        const std::size_t fan_in = element_count(ws) / ws[0];
        auto weight = random_values(element_count(ws), -1.7f / std::sqrt(float(fan_in)),
                                    1.7f / std::sqrt(float(fan_in)));
        w.tensors[node.name + ".weight"] = {ws, weight};
        const std::size_t c = ws[0];
        auto gamma = random_values(c, 0.5f, 2), beta = random_values(c), mean = random_values(c, -0.2f, 0.2f),
             var = random_values(c, 0.5f, 2);
        auto bn = fold_batch_norm(gamma, beta, mean, var, dynamic_cast<const Conv2dOp&>(*node.op).attrs().bn_eps);
        w.folded[node.name] = {bn.scale, bn.shift};
        if (node.name == "stem" || node.name == "dw") {  // raw BatchNorm, folded by load_weights
            w.tensors[node.name + ".bn.weight"] = {{c}, gamma};
            w.tensors[node.name + ".bn.bias"] = {{c}, beta};
            w.tensors[node.name + ".bn.running_mean"] = {{c}, mean};
            w.tensors[node.name + ".bn.running_var"] = {{c}, var};
        } else {
            w.tensors[node.name + ".bn_scale"] = {{c}, bn.scale};
            w.tensors[node.name + ".bn_shift"] = {{c}, bn.shift};
        }
    }
    return w;
}

/// The network in float64 on the CPU, node by node.
std::map<std::string, std::vector<double>> reference(const ModelPlan& plan, const std::vector<float>& x,
                                                     const Weights& w) {
    std::map<std::string, std::vector<double>> v{{"x", {x.begin(), x.end()}}};
    auto shape = [&](std::size_t i) { return plan.values()[i].shape; };
    for (const auto& node : plan.nodes()) {
        const auto& in0 = plan.values()[node.inputs[0]];
        const Shape out = shape(node.output);
        std::vector<double> y;
        if (node.op_name == "conv2d_bn_silu") {
            const auto* conv = dynamic_cast<const Conv2dOp*>(node.op.get());
            Conv2dAttrs attrs = conv ? conv->attrs() : Conv2dAttrs{};
            const Conv2dShape cs{int(in0.shape[0]), int(in0.shape[1]), int(in0.shape[2]), int(in0.shape[3]),
                                 int(out[1])};
            const auto& [scale, shift] = w.folded.at(node.name);
            y = conv2d_bn_silu_reference(to_float(v.at(in0.name)), w.tensors.at(node.name + ".weight").second, scale,
                                         shift, attrs, cs);
        } else if (node.op_name == "add") {
            y = add_reference(to_float(v.at(in0.name)), to_float(v.at(plan.values()[node.inputs[1]].name)));
        } else if (node.op_name == "maxpool2d") {
            const auto k = node.name == "pool" ? std::tuple{5, 1, 2} : std::tuple{2, 2, 0};
            y = maxpool2d_reference(to_float(v.at(in0.name)), in0.shape, std::get<0>(k), std::get<1>(k),
                                    std::get<2>(k));
        } else if (node.op_name == "upsample_nearest2d") {
            y = upsample_nearest2d_reference(to_float(v.at(in0.name)), in0.shape, 2);
        } else {
            std::vector<std::vector<float>> parts;
            std::vector<Shape> shapes;
            for (std::size_t i : node.inputs)
                parts.push_back(to_float(v.at(plan.values()[i].name))), shapes.push_back(shape(i));
            y = concat_channels_reference(parts, shapes);
        }
        v[node.name] = std::move(y);
    }
    return v;
}

}  // namespace

TEST_CASE("a network runs end to end: weights by dotted key, BatchNorm folded at load, graph replay") {
    const auto device = Device::get(0);
    Stream stream(device);
    for (int batch : {1, 3}) {
        CAPTURE(batch);
        LoadedModel model = LoadedModel::load(network, device, batch);
        const ModelPlan& plan = model.plan();
        const Weights w = make_weights(plan);
        test::TempDir dir;
        std::vector<NamedTensor> named;
        for (const auto& [key, t] : w.tensors) named.push_back({key, t.first, t.second});
        write_safetensors(dir.path() / "w.safetensors", named);
        const WeightsReport report = model.load_weights(dir.path() / "w.safetensors");
        CHECK(report.folded == 2);
        CHECK(report.extra.empty());

        const Shape xs = plan.values()[plan.inputs()[0]].shape;
        const auto x = random_values(element_count(xs));
        DeviceBuffer dx(device, x.size() * sizeof(float));
        dx.upload(std::span<const float>(x));
        void* const inputs[] = {dx.as<void>()};
        const auto ref = reference(plan, x, w);

        auto check_outputs = [&](const std::vector<Tensor>& outputs) {
            REQUIRE(outputs.size() == 2);
            for (std::size_t i = 0; i < outputs.size(); ++i) {
                const auto& name = plan.values()[plan.outputs()[i]].name;
                CAPTURE(name);
                const std::vector<float> y = model.read_output(i, stream);
                REQUIRE(y.size() == ref.at(name).size());
                const OutputCheck c = check_output(y, ref.at(name), {1, y.size(), y.size(), 0}, 2e-3);
                CAPTURE(c.error);
                CHECK(c.unwritten == 0);
                CHECK(c.passed());
                std::vector<float> into(y.size() + 1);  // a reused host buffer: exactly the output's size
                CHECK_THROWS_WITH_AS(model.read_output(i, stream, into), doctest::Contains("the host span holds"),
                                     UsageError);
                into.pop_back();
                model.read_output(i, stream, into);
                CHECK(std::memcmp(into.data(), y.data(), y.size() * sizeof(float)) == 0);
            }
        };
        check_outputs(model.forward(inputs, stream));
        stream.synchronize();
        poison_outputs(model, stream);  // so only the replay can write them again
        model.capture(inputs, stream);
        model.replay(stream);
        stream.synchronize();
        check_outputs(model.outputs());
        const auto times = model.node_times_ms(inputs, stream, 3);
        CHECK(times.size() == plan.nodes().size());
        CHECK(std::all_of(times.begin(), times.end(), [](double t) { return t > 0; }));
    }
}

TEST_CASE("missing or mismatched weights are one error listing them all, nothing is loaded") {
    const auto device = Device::get(0);
    LoadedModel model = LoadedModel::load(network, device, 1);
    std::map<std::string, SafeTensor> tensors;
    const std::vector<float> wrong(16 * 16, 1.0f);
    tensors["a.weight"] = {"F32", {16, 8}, std::as_bytes(std::span(wrong)).first(16 * 8 * 4)};
    tensors["b.weight"] = {"F16", {16, 16, 3, 3}, std::as_bytes(std::span(wrong)).first(16 * 16 * 2)};
    try {
        (void)model.load_weights(tensors);
        FAIL("expected an error");
    } catch (const UsageError& e) {
        const std::string what = e.what();
        CHECK(what.find("missing: stem.weight, stem.bn_scale, stem.bn_shift") != std::string::npos);
        CHECK(what.find("a.weight: the file has F32 [16, 8], the model needs F32 [16, 16, 1, 1]") != std::string::npos);
        CHECK(what.find("b.weight: the file has F16") != std::string::npos);
        CHECK(what.find("nothing was loaded") != std::string::npos);
    }
    const DeviceSpan a = model.parameter("a.weight");
    CHECK(a.size_bytes() == 16 * 16 * sizeof(float));
    CHECK(a.address() % 256 == 0);  // slots of the one allocation, aligned as their own would be
    CHECK(model.parameter("b.weight").address() % 256 == 0);
    std::vector<float> back(16 * 16, -1.0f);
    a.download(std::span<float>(back));
    CHECK(std::all_of(back.begin(), back.end(), [](float v) { return v == 0.0f; }));  // still zero-initialised
    CHECK_THROWS_WITH_AS((void)model.parameter("nope.weight"), doctest::Contains("no parameter 'nope.weight'"),
                         UsageError);
}

namespace {

/// A copy op whose output rows are padded by 3 elements (as a TMA kernel's would be), with a
/// caller-supplied kernel body: the executor must hand its consumers tight rows.
class PaddedCopy final : public RuntimeOp {
public:
    std::size_t n_activation_inputs() const override { return 1; }
    std::size_t forward_output_row_stride(ShapeView s) const override { return s.back() + 3; }
    void pack_args(const OpCall& call, ArgVisitor& v) const override {
        const ShapeView s = call.output_shape;
        v.visit_ptr(call.inputs[0].data);
        v.visit_ptr(call.output);
        v.visit_i32(static_cast<std::int32_t>(element_count(s) / s.back()));
        v.visit_i32(static_cast<std::int32_t>(s.back()));
        v.visit_i32(call.output_row_stride);
    }
    Dims block() const override { return {256, 1, 1}; }
    Dims grid(ShapeView) const override { return {64, 1, 1}; }
    const Kernel& kernel_for_launch(std::size_t) const override { return kernel_; }

private:
    Kernel kernel_{KernelSpec{"padded_copy",
                              {},
                              {{"x", {Scalar::f32, true}},
                               {"y", {Scalar::f32, true}},
                               {"rows", {Scalar::i32}},
                               {"row", {Scalar::i32}},
                               {"stride", {Scalar::i32}}},
                              256},
                   "__device__ void padded_copy(const float* x, float* y, int rows, int row, int stride) {\n"
                   "    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < (long long)rows * stride;"
                   " i += gridDim.x * 256ll) {\n"
                   "        const long long r = i / stride, c = i % stride;\n"
                   "        y[i] = c < row ? x[r * row + c] : -1e30f;  // padding holds junk\n"
                   "    }\n"
                   "}\n"};
};

}  // namespace

TEST_CASE("an op with padded output rows: written padded, copied back tight before its consumer reads") {
    // The body is supplied here (a kernel that does not ship): KJIT_KERNELS_DIR is not involved.
    register_op("padded_copy", [](const NodeAttrs&, const NodeInputs& in, const DeviceTraits&) {
        return MadeOp{std::make_unique<PaddedCopy>(), Shape(in.shapes[0].begin(), in.shapes[0].end())};
    });
    const auto device = Device::get(0);
    Stream stream(device);
    const char* graph = R"({"inputs": [{"name": "x", "shape": ["B", 2, 5, 7]}], "outputs": ["sum"],
        "nodes": [{"name": "pad", "op": "padded_copy", "inputs": ["x"]},
                  {"name": "sum", "op": "add", "inputs": ["pad", "x"]}]})";
    LoadedModel model = LoadedModel::load(graph, device, 2);
    const auto x = random_values(2 * 2 * 5 * 7);
    DeviceBuffer dx(device, x.size() * 4);
    dx.upload(std::span<const float>(x));
    void* const inputs[] = {dx.as<void>()};
    const auto out = model.forward(inputs, stream);
    const std::vector<float> y = model.read_output(0, stream);
    REQUIRE(y.size() == x.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < x.size(); ++i) wrong += y[i] != 2 * x[i];
    CHECK(wrong == 0);
}

TEST_CASE("zero-copy concat, fused adds, chained pools: the unfused plan's outputs, every element written") {
    // concat_graph's 11 x 13 planes: a slice after 7 channels starts off 16-byte alignment, where a
    // TMA conv takes its fallback. residual_graph: adds fused into convs, in and out of a concat.
    // sppf_graph: chained max pools writing concat slices, read by others. Batches 1 and 3.
    const auto device = Device::get(0);
    Stream stream(device);
    for (const char* graph : {test::concat_graph, test::residual_graph, test::sppf_graph})
        for (int batch : {1, 3}) {
            CAPTURE(graph);
            CAPTURE(batch);
            LoadedModel fused = LoadedModel::load(graph, device, batch);
            LoadedModel unfused = LoadedModel::load(
                graph, device, batch, Runtime::global(),
                {.place_concat_inputs = false, .fuse_residual_adds = false, .chain_ops = false});
            CHECK(fused.plan().launches() < unfused.plan().launches());
            const Weights w = make_weights(fused.plan());
            std::map<std::string, SafeTensor> tensors;
            for (const auto& [key, t] : w.tensors) tensors[key] = {"F32", t.first, std::as_bytes(std::span(t.second))};
            (void)fused.load_weights(tensors);
            (void)unfused.load_weights(tensors);
            const Shape xs = fused.plan().values()[fused.plan().inputs()[0]].shape;
            const auto x = random_values(element_count(xs));
            DeviceBuffer dx(device, x.size() * sizeof(float));
            dx.upload(std::span<const float>(x));
            void* const inputs[] = {dx.as<void>()};
            // Every output of each model against the unfused one's: the same kernels on the same
            // values, but a misaligned slice runs a TMA conv's fallback and a fused add rounds
            // once less, hence a tolerance. Poisoned first, so each must be written.
            const auto compare = [&](LoadedModel& m) {
                for (std::size_t i = 0; i < m.plan().outputs().size(); ++i) {
                    CAPTURE(m.plan().values()[m.plan().outputs()[i]].name);
                    const std::vector<float> y = m.read_output(i, stream), want = unfused.read_output(i, stream);
                    REQUIRE(y.size() == want.size());
                    const OutputCheck c = check_output(y, std::vector<double>(want.begin(), want.end()),
                                                       {1, y.size(), y.size(), 0}, 1e-5);
                    CAPTURE(c.error);
                    CHECK(c.unwritten == 0);
                    CHECK(c.nonfinite == 0);
                    CHECK(c.passed());
                }
            };
            for (LoadedModel* m : {&fused, &unfused}) {
                poison_outputs(*m, stream);
                (void)m->forward(inputs, stream);
            }
            compare(fused);
            // Replayed as a CUDA graph.
            poison_outputs(fused, stream);
            fused.capture(inputs, stream);
            fused.replay(stream);
            stream.synchronize();
            compare(fused);
        }
}

TEST_CASE("casts between f32, f16 and bf16 round to nearest even as the host does, every element written once") {
    const auto device = Device::get(0);
    Stream stream(device);
    // Ties, subnormals, overflow, infinities and NaN, then random values of every magnitude.
    std::vector<float> values{0.0f,      -0.0f, 1.0f,     1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-9f, 65504.0f,
                              65520.0f,  1e6f,  0x1p-24f, 0x1p-25f,        3e-8f,          0x1p-130f,          INFINITY,
                              -INFINITY, NAN};
    std::uniform_real_distribution<float> exponent(-30, 30), unit(-1, 1);
    while (values.size() < 2 * 3 * 333) values.push_back(unit(rng()) * std::exp2(exponent(rng())));
    const Shape shape{2, 3, 333};  // images of 999 elements: off the 256-thread block
    const std::size_t n = values.size(), image = n / 2, guard = 64;
    const auto bits_of = [](std::span<const float> v, Scalar t) {  // v as t's device bytes
        std::vector<std::byte> out(v.size() * byte_size(t));
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (t == Scalar::f32) std::memcpy(out.data() + 4 * i, &v[i], 4);
            else {
                const std::uint16_t h = to_16bit(v[i], t);
                std::memcpy(out.data() + 2 * i, &h, 2);
            }
        }
        return out;
    };
    const auto value_at = [](std::span<const std::byte> bytes, std::size_t i, Scalar t) {
        if (t == Scalar::f32) {
            float f;
            std::memcpy(&f, bytes.data() + 4 * i, 4);
            return f;
        }
        std::uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        return from_16bit(h, t);
    };
    for (const Scalar from : {Scalar::f32, Scalar::f16, Scalar::bf16})
        for (const Scalar to : {Scalar::f32, Scalar::f16, Scalar::bf16}) {
            if (from == to) continue;
            CAPTURE(short_name(from));
            CAPTURE(short_name(to));
            const CastOp op(from, to);
            // The source's images lie twice their size apart (a channel slice of a wider tensor).
            std::vector<float> strided(2 * n, -7.0f);
            std::ranges::copy(std::span(values).first(image), strided.begin());
            std::ranges::copy(std::span(values).last(image), strided.begin() + 2 * image);
            const std::vector<std::byte> x = bits_of(strided, from);
            DeviceBuffer dx(device, x.size()), dy(device, (n + guard) * byte_size(to));
            dx.upload(std::span<const std::byte>(x));
            dy.fill(0xff);
            const Tensor in{dx.as<void>(), shape, 2 * image};
            op.forward(Runtime::global(), stream, {std::span(&in, 1), {}, dy.as<void>(), shape, int(shape.back())});
            stream.synchronize();
            std::vector<std::byte> y((n + guard) * byte_size(to));
            dy.download(std::span(y));
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < n; ++i) {
                const float source = value_at(x, i < image ? i : i + image, from);
                const float expected = value_at(bits_of(std::span(&source, 1), to), 0, to), got = value_at(y, i, to);
                const bool same = std::isnan(expected) ? std::isnan(got)
                                                       : got == expected && std::signbit(got) == std::signbit(expected);
                if (!same && wrong++ < 3) MESSAGE(i << ": " << source << " gave " << got << ", expected " << expected);
            }
            CHECK(wrong == 0);
            const auto past = std::span(y).subspan(n * byte_size(to));
            CHECK(std::ranges::all_of(past, [](std::byte b) { return b == std::byte{0xff}; }));
        }
}

TEST_CASE("attention in a graph: casts around it, grouped heads, causal, split keys, replay, against float64") {
    const auto device = Device::get(0);
    if (DeviceTraits::of(device).arch.number() < 80) {
        MESSAGE("skipped: the attention kernel needs sm_80 or newer");
        return;
    }
    Stream stream(device);
    struct Case {
        Scalar dtype;
        AttentionShape shape;  // batch, heads, kv_heads, seq, kv_seq, head_dim, causal
    };
    const Case cases[] = {
        {Scalar::bf16, {2, 8, 2, 100, 300, 64, true, Scalar::bf16}},  // grouped, causal, ragged
        {Scalar::f16, {1, 8, 8, 1, 5000, 128, false, Scalar::f16}},   // decoding: keys split on big GPUs
        {Scalar::bf16, {1, 4, 4, 77, 77, 96, false, Scalar::bf16}},   // head dim 96: the sm80 mainloop
    };
    for (const auto& [dtype, s] : cases) {
        CAPTURE(s.key());
        const std::string graph = test::attention_graph(short_name(dtype), s.causal ? R"({"causal": true})" : "{}",
                                                        s.heads, s.kv_heads, s.seq, s.kv_seq, s.head_dim);
        LoadedModel model = LoadedModel::load(graph, device, s.batch);
        const auto& attn = dynamic_cast<const AttentionForwardOp&>(*model.plan().nodes()[3].op);
        MESSAGE(s.key() << ": " << attention_config(attn.tiles()));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        const auto values = [&](int heads, int seq) {
            std::vector<float> v(std::size_t(s.batch) * heads * seq * s.head_dim);
            for (auto& x : v) x = normal(rng());
            return v;
        };
        const std::vector<float> q = values(s.heads, s.seq), k = values(s.kv_heads, s.kv_seq),
                                 v = values(s.kv_heads, s.kv_seq);
        // What the casts make of them (round to nearest even), which the reference reads.
        const auto rounded = [&](const std::vector<float>& x) {
            std::vector<float> r(x.size());
            std::ranges::transform(x, r.begin(), [&](float e) { return from_16bit(to_16bit(e, dtype), dtype); });
            return r;
        };
        const AttentionReference ref = attention_reference(s, rounded(q), rounded(k), rounded(v));
        std::vector<DeviceBuffer> buffers;
        std::vector<void*> inputs;
        for (const auto* x : {&q, &k, &v}) {
            buffers.emplace_back(device, x->size() * sizeof(float));
            buffers.back().upload(std::span<const float>(*x));
            inputs.push_back(buffers.back().as<void>());
        }
        const DeviceSpan lse_slot = model.parameter("attn.lse");
        const auto check = [&](const char* how) {
            CAPTURE(how);
            const std::vector<float> out = model.read_output(0, stream), attn_out = model.read_output(1, stream);
            std::vector<float> lse(lse_slot.size_bytes() / sizeof(float));
            lse_slot.download(std::span(lse));
            const AttentionCheck c = check_attention(s, out, lse, ref);
            CAPTURE(c.faults());
            CHECK(c.passed());
            CHECK(out == attn_out);  // the f32 cast of a 16-bit value is exact, as read_output's widening is
        };
        poison_outputs(model, stream);
        lse_slot.fill(0xff);
        (void)model.forward(inputs, stream);
        stream.synchronize();
        check("forward");
        model.capture(inputs, stream);
        poison_outputs(model, stream);
        lse_slot.fill(0xff);
        model.replay(stream);
        stream.synchronize();
        check("replay");
    }
}
