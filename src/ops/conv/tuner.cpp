// Tuning conv layers (kjit/conv_tuner.hpp): a layer's tensors, the candidates timed and checked,
// the winner stored, and the dispatch that tunes on first use.
#include <kjit/conv_tuner.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <kjit/error.hpp>
#include <kjit/op_timing.hpp>

#include "jit/log.hpp"
#include "ops/conv/gemm_forward.hpp"

namespace kjit {
namespace {

std::size_t size(int v) { return static_cast<std::size_t>(v); }

std::vector<float> random_values(std::size_t n, float scale, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> unit(-1, 1);
    std::vector<float> v(n);
    for (auto& e : v) e = unit(rng) * scale;
    return v;
}

DeviceBuffer upload(const Device& device, const std::vector<float>& v) {
    DeviceBuffer b(device, v.size() * sizeof(float));
    b.upload(std::span<const float>(v));
    return b;
}

std::size_t output_elements(const Conv2dAttrs& a, const Conv2dShape& s) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    return size(s.batch) * size(s.c_out) * size(oh) * size(ow);
}

}  // namespace

ConvValues::ConvValues(const Conv2dAttrs& a, const Conv2dShape& s) {
    std::mt19937_64 rng{std::random_device{}()};
    const int fan_in = s.c_in / a.groups * a.kernel_h * a.kernel_w;
    x = random_values(size(s.batch) * size(s.c_in) * size(s.height) * size(s.width), 1.0f, rng);
    w = random_values(size(s.c_out) * size(fan_in), 1.7f / std::sqrt(float(fan_in)), rng);
    scale = random_values(size(s.c_out), 1.0f, rng);
    shift = random_values(size(s.c_out), 1.0f, rng);
}

ConvTensors::ConvTensors(const Device& device, const Conv2dAttrs& a, const Conv2dShape& s, bool channels_last)
    : ConvTensors(device, a, s, channels_last, ConvValues(a, s)) {}

ConvTensors::ConvTensors(const Device& device, const Conv2dAttrs& a, const Conv2dShape& s, bool channels_last,
                         ConvValues values)
    : ConvValues(std::move(values)),
      attrs_(a),
      shape_(s),
      channels_last_(channels_last),
      dx_(upload(device, channels_last
                             ? to_channels_last<float>(x, size(s.batch), size(s.c_in), size(s.height) * size(s.width))
                             : x)),
      dw_(upload(device, channels_last ? to_channels_last<float>(w, size(s.c_out), size(s.c_in),
                                                                 size(a.kernel_h) * size(a.kernel_w))
                                       : w)),
      dscale_(upload(device, scale)),
      dshift_(upload(device, shift)),
      dy_(device, output_elements(a, s) * sizeof(float)),
      input_{dx_.as<float>(), {}},
      params_{dw_.as<float>(), dscale_.as<float>(), dshift_.as<float>()} {
    const auto [oh, ow] = conv2d_output_size(a, s);
    x_shape_ = channels_last ? Shape{size(s.batch), size(s.height), size(s.width), size(s.c_in)}
                             : Shape{size(s.batch), size(s.c_in), size(s.height), size(s.width)};
    y_shape_ = channels_last ? Shape{size(s.batch), size(oh), size(ow), size(s.c_out)}
                             : Shape{size(s.batch), size(s.c_out), size(oh), size(ow)};
    input_.shape = x_shape_;
}

OpCall ConvTensors::call(const RuntimeOp& op) const {
    return {std::span(&input_, 1), params_, dy_.as<float>(), y_shape_,
            static_cast<int>(op.forward_output_row_elems(y_shape_))};
}

std::vector<double> ConvTensors::reference() const {
    auto ref = conv2d_bn_silu_reference(x, w, scale, shift, attrs_, shape_);
    if (!channels_last_) return ref;
    return to_channels_last<double>(ref, y_shape_[0], y_shape_[3], y_shape_[1] * y_shape_[2]);
}

double conv_tolerance(const Conv2dOp& op) { return conv2d_rounds_to_tf32(op) ? 2e-3 : 1e-5; }

TuneTarget TuneTarget::of(const Device& device, Conv2dLayout layout) {
    return {DeviceTraits::of(device), device.name(), driver_version(), layout};
}

CandidateBench gpu_candidate_bench(Runtime& runtime, const Stream& stream, const Conv2dAttrs& a, const Conv2dShape& s,
                                   Conv2dLayout layout, int iters) {
    auto tensors = std::make_shared<ConvTensors>(stream.device(), a, s, layout == Conv2dLayout::nhwc);
    // The reference is computed once, for the first check.
    auto reference = std::make_shared<std::vector<double>>();
    return {[&runtime, &stream](std::span<const Kernel* const> kernels) {
                runtime.compile_all(kernels, stream.device().arch());
            },
            [&runtime, &stream, tensors, iters](const Conv2dOp& op) {
                return time_forward(op, runtime, stream, tensors->call(op), iters);
            },
            [&runtime, &stream, tensors, reference](const Conv2dOp& op) {
                if (reference->empty()) *reference = tensors->reference();
                const OpCall call = tensors->call(op);
                return checked_forward(op, runtime, stream, call.inputs, call.params, call.output_shape, *reference,
                                       conv_tolerance(op));
            }};
}

TunedLayer tune_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const TuneTarget& target, Cache& cache,
                               const CandidateBench& bench) {
    const auto configs = target.layout == Conv2dLayout::nhwc ? conv2d_bn_silu_nhwc_configs(a, s, target.device)
                                                             : conv2d_bn_silu_candidates(a, s, target.device);
    std::vector<std::unique_ptr<Conv2dOp>> ops;
    std::vector<const Kernel*> kernels;
    for (const auto& config : configs) {
        ops.push_back(make_conv2d_bn_silu(a, s, config, target.device));
        for (std::size_t launch = 0; launch < ops.back()->n_launches(); ++launch)
            kernels.push_back(&ops.back()->kernel_for_launch(launch));
    }
    // The candidates missing from the cache compile on all cores first, not one by one as each
    // is timed (52 of them took ~50 s serially on the H200's host).
    bench.compile(kernels);
    TunedLayer out;
    std::vector<std::pair<double, std::size_t>> order;
    for (std::size_t i = 0; i < ops.size(); ++i) try {
            order.emplace_back(bench.time(*ops[i]), i);
        } catch (const Error& e) {
            out.refused.push_back(fmt::format("{}: {}", configs[i], e.what()));
        }
    std::ranges::sort(order);
    for (const auto& [us, i] : order) out.timed.emplace_back(us, configs[i]);
    // The fastest that matches the reference wins; a faster wrong one is reported, not stored.
    for (const auto& [us, i] : order) {
        out.check = bench.check(*ops[i]);
        if (!out.check.passed()) {
            out.wrong.push_back(configs[i]);
            continue;
        }
        out.winner = TunedConfig{conv2d_tuned_family(target.layout),
                                 conv2d_problem_key(a, s),
                                 target.device_name,
                                 target.device.arch.name(),
                                 target.driver,
                                 ops[i]->kernel().source_hash(),
                                 configs[i],
                                 us};
        store_tuned(cache, *out.winner);
        break;
    }
    return out;
}

namespace detail {

PickedConv pick_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const TuneTarget& target, Cache& cache,
                               bool autotune, bool capturing, const std::function<CandidateBench()>& bench) {
    if (auto op = stored_conv2d_bn_silu(a, s, target, cache)) return {std::move(op), PickSource::tuned, {}};
    const auto heuristic = [&](std::string why) {
        auto op = target.layout == Conv2dLayout::nhwc ? dispatch_conv2d_bn_silu_nhwc(a, s, target.device)
                                                      : dispatch_conv2d_bn_silu(a, s, target.device);
        return PickedConv{std::move(op), PickSource::heuristic, std::move(why)};
    };
    if (!autotune) return heuristic({});
    const std::string key = conv2d_problem_key(a, s);
    if (capturing) {
        // Tuning launches, times and synchronises: none of it can happen inside a capture.
        auto picked = heuristic("the stream is capturing a CUDA graph, and tuning cannot run inside one");
        detail::warn(
            fmt::format("autotune: {} has no tuned winner and {}: the heuristic's pick ({}) is captured; "
                        "run the layer once outside capture, or kjit tune it, to tune it",
                        key, picked.why, conv2d_bn_silu_config(*picked.op)));
        return picked;
    }
    detail::log(LogLevel::info, fmt::format("autotune: tuning {} on {} (first use)", key, target.device_name));
    const TunedLayer tuned = tune_conv2d_bn_silu(a, s, target, cache, bench());
    if (!tuned.winner) {
        auto picked = heuristic("no candidate matched the float64 reference");
        detail::warn(
            fmt::format("autotune: no candidate for {} matched the float64 reference (error {:.2e}): the "
                        "heuristic's pick runs",
                        key, tuned.check.error));
        return picked;
    }
    return {make_conv2d_bn_silu(a, s, tuned.winner->config, target.device), PickSource::tuned_now, {}};
}

}  // namespace detail

std::unique_ptr<Conv2dOp> stored_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const TuneTarget& target,
                                                Cache& cache) {
    return detail::tuned_conv2d_op(target.layout, a, s, target.device, target.device_name, target.driver, cache);
}

std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const Device& device,
                                                  Cache& cache) {
    return detail::pick_conv2d_bn_silu(a, s, TuneTarget::of(device), cache, false, false, {}).op;
}

std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu_nhwc(const Conv2dAttrs& a, const Conv2dShape& s, const Device& device,
                                                       Cache& cache) {
    return detail::pick_conv2d_bn_silu(a, s, TuneTarget::of(device, Conv2dLayout::nhwc), cache, false, false, {}).op;
}

PickedConv pick_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, Runtime& runtime, const Stream& stream,
                               Conv2dLayout layout) {
    const bool autotune = runtime.autotune();
    return detail::pick_conv2d_bn_silu(a, s, TuneTarget::of(stream.device(), layout), runtime.cache(), autotune,
                                       autotune && stream.capturing(),
                                       [&] { return gpu_candidate_bench(runtime, stream, a, s, layout); });
}

}  // namespace kjit
