// The tuner's logic on a fake bench (no GPU): every candidate timed, the fastest right one stored
// with its kernel's source and the driver, wrong and failing ones passed over; and the policy that
// tunes a layer on first use — never inside a graph capture — and takes the stored winner after.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>

#include <kjit/conv_tuner.hpp>
#include <kjit/error.hpp>

#include "support.hpp"

using namespace kjit;

namespace {

const DeviceTraits h200{132, 232448, Arch(9, 0)};
const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
const Conv2dShape layer{8, 64, 28, 28, 64};
const TuneTarget target{h200, "NVIDIA H200", "580.159.04", Conv2dLayout::nchw};

/// A bench whose clock and reference are made up: µs per configuration (others 50 + their
/// place), the configurations it calls wrong, those whose launch fails; it counts its calls.
struct FakeBench {
    std::map<std::string, double> us;
    std::vector<std::string> wrong, failing;
    std::size_t compiled = 0, timed = 0, checked = 0;

    CandidateBench bench() {
        return {[this](std::span<const Kernel* const> kernels) { compiled += kernels.size(); },
                [this](const Conv2dOp& op) {
                    const std::string config = conv2d_bn_silu_config(op);
                    if (std::ranges::count(failing, config)) throw CudaError("cuLaunchKernelEx", 719, "made up");
                    return us.contains(config) ? us.at(config) : 50.0 + double(timed++);
                },
                [this](const Conv2dOp& op) {
                    ++checked;
                    OutputCheck c;
                    c.tolerance = 2e-3;
                    c.error = std::ranges::count(wrong, conv2d_bn_silu_config(op)) ? 0.5 : 1e-4;
                    return c;
                }};
    }
};

}  // namespace

TEST_CASE("tuning a layer: every candidate timed, the fastest right one stored with its kernel source and driver") {
    test::TempDir dir;
    Cache cache(dir.path());
    const auto configs = conv2d_bn_silu_candidates(k3, layer, h200);
    REQUIRE(configs.size() > 6);
    FakeBench fake;
    fake.us = {{configs[4], 3.0}, {configs[2], 2.0}, {configs[5], 1.0}};
    fake.wrong = {configs[5]};    // the fastest is wrong: passed over
    fake.failing = {configs[0]};  // one does not run at all
    const TunedLayer tuned = tune_conv2d_bn_silu(k3, layer, target, cache, fake.bench());
    CHECK(fake.compiled == configs.size());  // every candidate's kernel, compiled before any is timed
    CHECK(tuned.timed.size() == configs.size() - 1);
    CHECK(tuned.timed[0] == std::pair{1.0, configs[5]});
    CHECK(tuned.timed[1] == std::pair{2.0, configs[2]});
    REQUIRE(tuned.refused.size() == 1);
    CHECK(tuned.refused[0] == configs[0] + ": cuLaunchKernelEx failed: made up");
    CHECK(tuned.wrong == std::vector<std::string>{configs[5]});
    CHECK(fake.checked == 2);
    REQUIRE(tuned.winner);
    CHECK(tuned.winner->config == configs[2]);
    CHECK(tuned.winner->microseconds == 2.0);
    // Stored for the target, tied to the kernel that configuration runs.
    const auto stored = find_tuned(cache, "conv2d_bn_silu", conv2d_problem_key(k3, layer), "NVIDIA H200", "sm_90",
                                   "580.159.04");
    REQUIRE(stored.size() == 1);
    CHECK(stored[0].config == configs[2]);
    CHECK(stored[0].source_hash == make_conv2d_bn_silu(k3, layer, configs[2], h200)->kernel().source_hash());

    SUBCASE("no candidate right: nothing stored") {
        test::TempDir other;
        Cache empty(other.path());
        FakeBench all_wrong;
        all_wrong.wrong = configs;
        const TunedLayer none = tune_conv2d_bn_silu(k3, layer, target, empty, all_wrong.bench());
        CHECK_FALSE(none.winner);
        CHECK(none.wrong.size() == configs.size());
        CHECK(tuned_configs(empty).empty());
    }
}

TEST_CASE("autotune on first use: tuned once outside capture, the stored winner after, the heuristic inside capture") {
    test::TempDir dir;
    Cache cache(dir.path());
    const auto configs = conv2d_bn_silu_candidates(k3, layer, h200);
    const std::string heuristic = conv2d_bn_silu_config(*dispatch_conv2d_bn_silu(k3, layer, h200));
    const std::string best = configs.back() == heuristic ? configs.front() : configs.back();
    FakeBench fake;
    fake.us = {{best, 1.0}};
    std::size_t benches = 0;
    const auto bench = [&] {
        ++benches;
        return fake.bench();
    };
    const auto pick = [&](bool autotune, bool capturing) {
        return detail::pick_conv2d_bn_silu(k3, layer, target, cache, autotune, capturing, bench);
    };

    // The policy off: the heuristic's pick, nothing timed.
    PickedConv p = pick(false, false);
    CHECK(p.source == PickSource::heuristic);
    CHECK(conv2d_bn_silu_config(*p.op) == heuristic);
    // On, but the stream is capturing a graph: the heuristic's pick, said; nothing timed.
    {
        const test::LogCapture log;
        p = pick(true, true);
        CHECK(p.source == PickSource::heuristic);
        CHECK(p.why.find("capturing a CUDA graph") != std::string::npos);
        REQUIRE(log.warnings().size() == 1);
        CHECK(log.warnings()[0].find("the heuristic's pick (" + heuristic + ") is captured") != std::string::npos);
    }
    CHECK(benches == 0);
    // On, outside capture: tuned now, on the caller's bench, and stored.
    p = pick(true, false);
    CHECK(p.source == PickSource::tuned_now);
    CHECK(conv2d_bn_silu_config(*p.op) == best);
    CHECK(benches == 1);
    CHECK(fake.compiled == configs.size());
    // Every later call — this process or another over the same cache — takes the stored winner,
    // even inside capture, and times nothing.
    for (const bool capturing : {false, true}) {
        p = pick(true, capturing);
        CHECK(p.source == PickSource::tuned);
        CHECK(conv2d_bn_silu_config(*p.op) == best);
    }
    p = pick(false, false);
    CHECK(p.source == PickSource::tuned);
    CHECK(benches == 1);
}
