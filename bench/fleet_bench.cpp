// One new process's start on a cache: how long until the conv GEMM kernel, then every kernel the
// YOLOv8n graph launches (batch 1 and 16), is ready — loaded as a module where there is a GPU
// (context creation excluded), else compiled-entry in hand (what the cache tiers serve) — and,
// on a GPU, until the conv GEMM kernel's first launch has run (its node's buffers allocated, the
// launch synchronised). Run by bench/run-fleet-bench with an empty local cache and a warm remote,
// and with a warm local cache.
//   kjit_fleet_bench GRAPH.json     (KJIT_CACHE_DIR, KJIT_REMOTE… from the environment)
#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <kjit/kjit.hpp>
#include <nlohmann/json.hpp>

using namespace kjit;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// Runs the first node of `plan` that launches `kernel`, once, on zeroed buffers (only its time
/// counts), and waits for it.
void launch_first_node(const ModelPlan& plan, const Kernel& kernel, Runtime& rt, const Device& device) {
    const auto node = std::ranges::find_if(
        plan.nodes(), [&](const ModelPlan::Node& n) { return n.op->kernel_for_launch(0).id() == kernel.id(); });
    if (node == plan.nodes().end()) throw std::runtime_error("no node of the batch-1 plan launches " + kernel.id());
    std::vector<DeviceBuffer> buffers;
    buffers.reserve(node->inputs.size() + node->params.size() + 1);  // no reallocation: the pointers stay
    const auto zeroed = [&](std::size_t elems) {
        DeviceBuffer& b = buffers.emplace_back(device, std::max<std::size_t>(1, elems) * sizeof(float));
        b.fill(0);
        return b.as<void>();
    };
    std::vector<Tensor> inputs;
    for (const std::size_t v : node->inputs)
        inputs.push_back({zeroed(element_count(plan.values()[v].shape)), plan.values()[v].shape});
    std::vector<void*> params;
    for (const auto& p : node->params) params.push_back(zeroed(element_count(p.shape)));
    const Shape& out = plan.values()[node->output].shape;
    const std::size_t stride = node->op->forward_output_row_stride(out);
    void* y = zeroed(element_count(out) / node->op->forward_output_row_elems(out) * stride);
    const Stream stream(device);
    node->op->forward(rt, stream, {inputs, params, y, out, static_cast<int>(stride)});
    stream.synchronize();
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fmt::print(stderr, "usage: {} GRAPH.json\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[1]);
    std::ostringstream graph;
    graph << in.rdbuf();
    std::optional<Device> device;
    if (device_count() > 0) device.emplace(Device::get(0));  // the context, before the clock starts
    const DeviceTraits traits = device ? DeviceTraits::of(*device) : DeviceTraits(132, 232448, Arch::parse("sm_90"));

    const auto started = Clock::now();
    Runtime& rt = Runtime::global();
    std::map<Origin, int> origins;
    const auto ready = [&](const Kernel& k) {
        if (device) {
            const auto before = rt.stats();
            (void)rt.load(k, *device);
            const auto after = rt.stats();
            // load() does not say where the entry came from: the counters do.
            ++origins[after.compiles > before.compiles         ? Origin::compiled
                      : after.remote_hits > before.remote_hits ? Origin::remote
                                                               : Origin::cache];
        } else {
            ++origins[rt.compile(k, CompileOptions{.arch = k.target(traits.arch)}).origin];
        }
    };
    std::vector<Kernel> kernels;
    std::set<std::string> seen;
    std::vector<ModelPlan> plans;
    for (const int batch : {1, 16}) {
        const ModelPlan& plan = plans.emplace_back(ModelPlan::from_json(graph.str(), batch, traits));
        for (const Kernel* k : plan.kernels())
            if (seen.insert(k->id()).second) kernels.push_back(*k);
    }
    const double plan_ms = ms_since(started);
    // The first conv GEMM kernel the graph runs, alone first.
    const auto gemm = std::ranges::find_if(kernels,
                                           [](const Kernel& k) { return k.id().starts_with("conv2d_bn_silu"); });
    const auto t_first = Clock::now();
    ready(*gemm);
    const double first_ms = ms_since(t_first);
    std::optional<double> first_launch_ms;
    if (device) {
        launch_first_node(plans.front(), *gemm, rt, *device);
        first_launch_ms = ms_since(t_first);
    }
    const auto t_all = Clock::now();
    for (const Kernel& k : kernels)
        if (&k != &*gemm) ready(k);
    const double all_ms = ms_since(t_all) + first_ms;
    const RemoteCounters remote = rt.remote() ? rt.remote()->counters() : RemoteCounters{};
    const nlohmann::json out{{"ready", device ? "module loaded" : "compiled entry (no GPU)"},
                             {"first_kernel", gemm->id()},
                             {"first_ms", first_ms},
                             {"first_launch_ms", first_launch_ms ? nlohmann::json(*first_launch_ms) : nullptr},
                             {"kernels", kernels.size()},
                             {"all_ms", all_ms},
                             {"plan_ms", plan_ms},
                             {"from",
                              {{"cache", origins[Origin::cache]},
                               {"remote", origins[Origin::remote]},
                               {"compiled", origins[Origin::compiled]}}},
                             {"remote_bytes_down", remote.bytes_down},
                             {"remote", rt.remote() ? rt.remote()->describe() : ""}};
    fmt::print("{}\n", out.dump());
    return 0;
}
