// kjit/conv_tuner.hpp — tuning conv layers: a layer's tensors on the GPU with fresh random values,
// every candidate configuration timed on them, the fastest that matches the float64 reference
// stored as the layer's winner (kjit/tuning.hpp), and a dispatch that tunes a layer the first
// time it meets one where the runtime's policy asks (Runtime::autotune, KJIT_AUTOTUNE=1).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kjit/conv.hpp>
#include <kjit/output_check.hpp>
#include <kjit/runtime.hpp>
#include <kjit/tuning.hpp>

namespace kjit {

/// A conv layer's host values, fresh random: x in [-1, 1], W scaled by 1/√fan-in, BN scale and
/// shift in [-1, 1].
struct ConvValues {
    std::vector<float> x, w, scale, shift;
    ConvValues(const Conv2dAttrs& attrs, const Conv2dShape& shape);
};

/// A conv layer's tensors on a device, from its values: x and W in the run's layout (NCHW, or
/// channels-last with W [C_OUT][KH][KW][C_IN]), BN scale and shift, and y.
class ConvTensors : public ConvValues {
public:
    ConvTensors(const Device& device, const Conv2dAttrs& attrs, const Conv2dShape& shape, bool channels_last);
    /// The same with the given values (one draw shared by both layouts).
    ConvTensors(const Device& device, const Conv2dAttrs& attrs, const Conv2dShape& shape, bool channels_last,
                ConvValues values);
    ConvTensors(const ConvTensors&) = delete;  // the call points into it
    ConvTensors& operator=(const ConvTensors&) = delete;

    /// `op`'s call on these tensors, into y (tight rows).
    [[nodiscard]] OpCall call(const RuntimeOp& op) const;
    /// The float64 reference, in the run's layout.
    [[nodiscard]] std::vector<double> reference() const;
    [[nodiscard]] bool channels_last() const noexcept { return channels_last_; }
    [[nodiscard]] const Shape& y_shape() const noexcept { return y_shape_; }

private:
    Conv2dAttrs attrs_;
    Conv2dShape shape_;
    bool channels_last_;
    DeviceBuffer dx_, dw_, dscale_, dshift_, dy_;
    Shape x_shape_, y_shape_;
    Tensor input_;
    std::array<void*, 3> params_;
};

/// What a conv op's error against the float64 reference may be: 2e-3 where it multiplies in
/// TF32 on tensor cores, 1e-5 in fp32.
[[nodiscard]] double conv_tolerance(const Conv2dOp& op);

/// What a winner is stored for besides the layer: the device's traits and name, the driver, and
/// the tensors' layout.
struct TuneTarget {
    DeviceTraits device;
    std::string device_name;
    std::string driver;
    Conv2dLayout layout = Conv2dLayout::nchw;

    [[nodiscard]] static TuneTarget of(const Device& device, Conv2dLayout layout = Conv2dLayout::nchw);
};

/// How the tuner compiles, times and checks candidates: on a GPU gpu_candidate_bench; in tests,
/// anything (a fake clock).
struct CandidateBench {
    std::function<void(std::span<const Kernel* const> kernels)> compile;  ///< all of them, before any is timed
    std::function<double(const Conv2dOp& op)> time;                       ///< µs of one forward
    std::function<OutputCheck(const Conv2dOp& op)> check;                 ///< against the float64 reference
};

/// The GPU's bench for one layer: its tensors (fresh random values) on `stream`'s device, the
/// candidates compiled on all cores by `runtime`, each timed over `iters` CUDA-graph replays
/// (kjit/op_timing.hpp) and checked into a NaN-poisoned output (kjit/output_check.hpp).
[[nodiscard]] CandidateBench gpu_candidate_bench(Runtime& runtime, const Stream& stream, const Conv2dAttrs& attrs,
                                                 const Conv2dShape& shape, Conv2dLayout layout, int iters = 20);

/// What tuning one layer found.
struct TunedLayer {
    std::vector<std::pair<double, std::string>> timed;  ///< µs and configuration, fastest first
    std::vector<std::string> refused;                   ///< "configuration: why" of those that did not run
    std::vector<std::string> wrong;                     ///< faster ones that did not match the reference
    std::optional<TunedConfig> winner;                  ///< stored; none where no candidate was right
    OutputCheck check;                                  ///< the winner's (else the last checked one's)
};

/// Times every candidate of the layer on `target` (conv2d_bn_silu_candidates, or the
/// channels-last ones), checks the fastest against the reference — the next fastest where it is
/// wrong, and so on — and stores the first right one in `cache` as the layer's winner for
/// `target` (its kernel's source hash with it).
[[nodiscard]] TunedLayer tune_conv2d_bn_silu(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                             const TuneTarget& target, Cache& cache, const CandidateBench& bench);

/// How dispatch came by a layer's op.
enum class PickSource { tuned, tuned_now, heuristic };
struct PickedConv {
    std::unique_ptr<Conv2dOp> op;
    PickSource source;
    std::string why;  ///< for heuristic picks under the autotune policy: why it did not tune
};

/// The winner stored for a layer on `target` (its device, arch and driver, timed on the kernel's
/// current source), or null: what pick_conv2d_bn_silu takes first, without dispatching or tuning.
[[nodiscard]] std::unique_ptr<Conv2dOp> stored_conv2d_bn_silu(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                                              const TuneTarget& target, Cache& cache);

/// The op for a layer on `stream`'s device: the winner stored for it, else — where the runtime's
/// policy says to autotune and `stream` is not capturing a CUDA graph (tuning must run and
/// synchronise) — the winner of tuning it now on `stream`, stored for every later call and
/// process; else the heuristic's pick. The first call of an untuned layer under the policy costs
/// compiling the candidates missing from the cache (on all cores) and timing them (~20 graph
/// replays each).
[[nodiscard]] PickedConv pick_conv2d_bn_silu(const Conv2dAttrs& attrs, const Conv2dShape& shape, Runtime& runtime,
                                             const Stream& stream, Conv2dLayout layout = Conv2dLayout::nchw);

namespace detail {
/// pick_conv2d_bn_silu's decision, apart from the device: `capturing` and `bench` stand for the
/// stream (the bench is made only when tuning runs).
[[nodiscard]] PickedConv pick_conv2d_bn_silu(const Conv2dAttrs& attrs, const Conv2dShape& shape,
                                             const TuneTarget& target, Cache& cache, bool autotune, bool capturing,
                                             const std::function<CandidateBench()>& bench);
}  // namespace detail

}  // namespace kjit
