// The tuner on the GPU: a layer tuned on real timings, its winner right against the float64
// reference and stored; autotune on first use — never inside a graph capture — and a network
// whose conv nodes take the winners at load.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>

#include <kjit/conv_tuner.hpp>
#include <kjit/model.hpp>

#include "support.hpp"

using namespace kjit;

namespace {
const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
const Conv2dShape layer{3, 24, 13, 11, 40};  // prime batch, ragged image and channels
}  // namespace

TEST_CASE("tuning a layer on the GPU: every candidate timed, the winner right against the reference and stored") {
    test::TempDir dir;
    Runtime runtime(dir.path());
    const Device device = Device::get(0);
    Stream stream(device);
    const TuneTarget target = TuneTarget::of(device);
    const TunedLayer tuned = tune_conv2d_bn_silu(
        k3, layer, target, runtime.cache(), gpu_candidate_bench(runtime, stream, k3, layer, Conv2dLayout::nchw, 3));
    CHECK(tuned.refused.empty());
    CHECK(tuned.wrong.empty());
    REQUIRE(tuned.winner);
    CHECK(tuned.check.passed());
    CHECK(tuned.timed.size() == conv2d_bn_silu_candidates(k3, layer, target.device).size());
    CHECK(tuned.timed.front().first > 0);
    CHECK(std::ranges::is_sorted(tuned.timed, {}, &std::pair<double, std::string>::first));
    CHECK(tuned.winner->driver == driver_version());
    // What a later dispatch on this device takes.
    const auto picked = detail::pick_conv2d_bn_silu(k3, layer, target, runtime.cache(), false, false, {});
    CHECK(picked.source == PickSource::tuned);
    CHECK(conv2d_bn_silu_config(*picked.op) == tuned.winner->config);
}

TEST_CASE("autotune on first use on the GPU: the heuristic inside a capture, tuned outside it, stored after") {
    test::TempDir dir;
    Runtime runtime(dir.path());
    runtime.set_autotune(true);
    const Device device = Device::get(0);
    Stream stream(device);
    // Inside a capture: the heuristic's pick, launched into the graph; nothing timed or stored.
    const ConvTensors tensors(device, k3, layer, false);
    const auto heuristic = dispatch_conv2d_bn_silu(k3, layer, DeviceTraits::of(device));
    heuristic->forward(runtime, stream, tensors.call(*heuristic));  // loaded before the capture
    stream.synchronize();
    std::optional<PickedConv> in_capture;
    const Graph graph = Graph::capture(stream, [&] {
        in_capture = pick_conv2d_bn_silu(k3, layer, runtime, stream);
        in_capture->op->forward(runtime, stream, tensors.call(*in_capture->op));
    });
    graph.launch(stream);
    stream.synchronize();
    REQUIRE(in_capture);
    CHECK(in_capture->source == PickSource::heuristic);
    CHECK(tuned_configs(runtime.cache()).empty());
    const PickedConv first = pick_conv2d_bn_silu(k3, layer, runtime, stream);
    CHECK(first.source == PickSource::tuned_now);
    const PickedConv again = pick_conv2d_bn_silu(k3, layer, runtime, stream);
    CHECK(again.source == PickSource::tuned);
    CHECK(conv2d_bn_silu_config(*again.op) == conv2d_bn_silu_config(*first.op));
    runtime.set_autotune(false);
    CHECK(pick_conv2d_bn_silu(k3, layer, runtime, stream).source == PickSource::tuned);  // stored: no policy needed
}

TEST_CASE("a network's conv nodes take the tuned winners at load") {
    const char* graph = R"({"inputs": [{"name": "x", "shape": ["B", 24, 13, 11]}], "outputs": ["c"],
      "nodes": [{"name": "c", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 40, "kernel": 3, "pad": 1}}]})";
    test::TempDir dir;
    Runtime runtime(dir.path());
    const Device device = Device::get(0);
    const TuneTarget target = TuneTarget::of(device);
    // A stored winner that is not the heuristic's pick: the direct kernel's smallest tile.
    const std::string config = "BLOCK_OC=16 BLOCK_OW=32";
    store_tuned(runtime.cache(),
                {"conv2d_bn_silu", conv2d_problem_key(k3, layer), device.name(), device.arch().name(), target.driver,
                 make_conv2d_bn_silu(k3, layer, config, target.device)->kernel().source_hash(), config, 1.0});
    const LoadedModel model = LoadedModel::load(graph, device, layer.batch, runtime);
    const auto& op = dynamic_cast<const Conv2dOp&>(*model.plan().nodes()[0].op);
    CHECK(conv2d_bn_silu_config(op) == config);
}
