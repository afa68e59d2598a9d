// kjit/output_check.hpp — whether an op wrote what it should: its output, poisoned with NaN
// before the run and followed by a NaN guard, against a float64 reference — the relative error
// ‖y − ref‖/‖ref‖ over the valid outputs, the outputs never written, the writes past a row or past
// the output, and the first wrong output. What `kjit check` and the GPU tests run every
// configuration through.
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kjit/runtime_op.hpp>

namespace kjit {

struct CompileOptions;

/// An output buffer: `rows` rows of `row` valid elements, `row_stride` apart (the elements between
/// are padding the op must not write), then `guard` elements past the last row.
struct OutputLayout {
    std::size_t rows, row, row_stride, guard = 1024;
    [[nodiscard]] std::size_t elements() const noexcept { return rows * row_stride + guard; }
};

/// An output that is wrong: its index among the valid outputs (row-major, as the reference holds
/// them), what the op wrote (NaN: nothing) and what the reference says.
struct WrongOutput {
    std::size_t index;
    float value;
    double expected;
};

/// What a poisoned output buffer held after a run.
struct OutputCheck {
    double error = 0;  ///< ‖y − ref‖/‖ref‖ over the valid outputs; ∞ where one is NaN or infinite
    double tolerance = 0;
    std::size_t unwritten = 0;        ///< valid outputs still NaN
    std::size_t nonfinite = 0;        ///< valid outputs ±∞
    std::size_t padding_written = 0;  ///< elements between rows that changed
    std::size_t guard_written = 0;    ///< elements past the output that changed
    /// The first output unwritten, non-finite, or off by more than tolerance × the reference's
    /// RMS (when the error is over the tolerance, some output is); none where every one is right.
    std::optional<WrongOutput> first_wrong;

    [[nodiscard]] bool passed() const noexcept {
        return error <= tolerance && !unwritten && !nonfinite && !padding_written && !guard_written;
    }
};

/// `y` (layout.elements() floats, as downloaded) against `reference` (layout.rows × layout.row).
[[nodiscard]] OutputCheck check_output(std::span<const float> y, std::span<const double> reference,
                                       const OutputLayout& layout, double tolerance);

/// What is wrong with an output, in words: "3 outputs never written (still NaN); error inf over
/// the tolerance 1e-05; first wrong: y[0,2,1,4] = NaN, expected 0.2513" — the first wrong
/// output's index as coordinates of `output_shape`. Empty where nothing is wrong.
[[nodiscard]] std::string describe_faults(const OutputCheck& check, ShapeView output_shape);

/// `op`'s chained outputs (RuntimeOp::n_chained_outputs), each of `output_shape`, laid tight one
/// after another after its output at `output`: the layout checked_forward checks.
[[nodiscard]] std::vector<Tensor> chained_outputs_after(const RuntimeOp& op, void* output, ShapeView output_shape);

/// Runs `op` once (compiled with `options` where given) on `inputs` and `params` (device memory)
/// into a fresh output of `output_shape` — rows of op.forward_output_row_elems() elements of
/// `output_type` (f32, f16 or bf16, widened to float to be read), `row_padding` elements of
/// padding after each, a guard after the last, all NaN — and checks it against `reference`. An
/// op with chained outputs (RuntimeOp::n_chained_outputs) writes them tight after the output,
/// and `reference` holds them all in that order.
[[nodiscard]] OutputCheck checked_forward(const RuntimeOp& op, Runtime& runtime, const Stream& stream,
                                          std::span<const Tensor> inputs, std::span<void* const> params,
                                          ShapeView output_shape, std::span<const double> reference, double tolerance,
                                          std::size_t row_padding = 0, const CompileOptions* options = nullptr,
                                          Scalar output_type = Scalar::f32);

}  // namespace kjit
