// One new process's start on a cache: how long until the conv GEMM kernel, then every kernel the
// YOLOv8n graph launches (batch 1 and 16), is ready — loaded as a module where there is a GPU
// (context creation excluded), else compiled-entry in hand (what the cache tiers serve). Run by
// bench/run-fleet-bench with an empty local cache and a warm remote, and with a warm local cache.
//   kjit_fleet_bench GRAPH.json     (KJIT_CACHE_DIR, KJIT_REMOTE… from the environment)
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <kjit/kjit.hpp>
#include <nlohmann/json.hpp>

using namespace kjit;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
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
    for (const int batch : {1, 16}) {
        const ModelPlan plan = ModelPlan::from_json(graph.str(), batch, traits);
        for (const auto& node : plan.nodes())
            for (std::size_t l = 0; l < node.op->n_launches(); ++l)
                if (const Kernel& k = node.op->kernel_for_launch(l); seen.insert(k.id()).second) kernels.push_back(k);
    }
    const double plan_ms = ms_since(started);
    // The first conv GEMM kernel the graph runs, alone first.
    const auto gemm = std::ranges::find_if(kernels,
                                           [](const Kernel& k) { return k.id().starts_with("conv2d_bn_silu"); });
    const auto t_first = Clock::now();
    ready(*gemm);
    const double first_ms = ms_since(t_first);
    const auto t_all = Clock::now();
    for (const Kernel& k : kernels)
        if (&k != &*gemm) ready(k);
    const double all_ms = ms_since(t_all) + first_ms;
    const RemoteCounters remote = rt.remote() ? rt.remote()->counters() : RemoteCounters{};
    const nlohmann::json out{{"ready", device ? "module loaded" : "compiled entry (no GPU)"},
                             {"first_kernel", gemm->id()},
                             {"first_ms", first_ms},
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
