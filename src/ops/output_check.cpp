// An op's output against a float64 reference, read from a NaN-poisoned buffer
// (kjit/output_check.hpp).
#include <kjit/output_check.hpp>

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/attention.hpp>  // download_as_f32
#include <kjit/driver.hpp>
#include <kjit/error.hpp>

namespace kjit {

OutputCheck check_output(std::span<const float> y, std::span<const double> reference, const OutputLayout& layout,
                         double tolerance) {
    if (y.size() != layout.elements() || reference.size() != layout.rows * layout.row || layout.row > layout.row_stride)
        throw UsageError("check_output: the output, its layout and the reference disagree in size");
    OutputCheck out;
    out.tolerance = tolerance;
    double squared_error = 0, squared_reference = 0;
    for (const double r : reference) squared_reference += r * r;
    // An output is wrong past tolerance × RMS(ref): were every one within it, ‖y − ref‖ would be
    // within tolerance × ‖ref‖, so an error over the tolerance always names one.
    const double rms = reference.empty() ? 0 : std::sqrt(squared_reference / double(reference.size()));
    for (std::size_t r = 0; r < layout.rows; ++r) {
        const auto row = y.subspan(r * layout.row_stride, layout.row_stride);
        for (std::size_t i = 0; i < layout.row; ++i) {
            const std::size_t index = r * layout.row + i;
            const double d = double(row[i]) - reference[index];
            out.unwritten += std::isnan(row[i]);
            out.nonfinite += std::isinf(row[i]);
            squared_error += d * d;
            if (!out.first_wrong && !(std::abs(d) <= tolerance * rms))  // NaN compares false
                out.first_wrong = WrongOutput{index, row[i], reference[index]};
        }
        for (std::size_t i = layout.row; i < layout.row_stride; ++i) out.padding_written += !std::isnan(row[i]);
    }
    for (const float v : y.subspan(layout.rows * layout.row_stride)) out.guard_written += !std::isnan(v);
    out.error = !std::isfinite(squared_error) ? INFINITY
                : squared_reference > 0       ? std::sqrt(squared_error / squared_reference)
                : squared_error > 0           ? INFINITY
                                              : 0.0;
    return out;
}

std::string describe_faults(const OutputCheck& c, ShapeView shape) {
    std::vector<std::string> faults;
    const auto count = [&](std::size_t n, const char* what) {
        if (n) faults.push_back(fmt::format("{} {}", n, what));
    };
    count(c.unwritten, "outputs never written (still NaN)");
    count(c.nonfinite, "outputs infinite");
    count(c.padding_written, "writes into the padding between output rows");
    count(c.guard_written, "writes past the output");
    if (c.error > c.tolerance)
        faults.push_back(fmt::format("error {:.2e} over the tolerance {:.0e}", c.error, c.tolerance));
    if (c.first_wrong && !faults.empty()) {
        // The index as coordinates, last dimension fastest; past the first output, a chained one's.
        const std::size_t n = element_count(shape), chained = c.first_wrong->index / n;
        std::vector<std::size_t> at(shape.size());
        for (std::size_t d = shape.size(), i = c.first_wrong->index % n; d-- > 0; i /= shape[d]) at[d] = i % shape[d];
        const float v = c.first_wrong->value;
        faults.push_back(fmt::format("first wrong: {}y[{}] = {}, expected {:.6g}",
                                     chained ? fmt::format("chained output {}: ", chained) : "", fmt::join(at, ","),
                                     std::isnan(v) ? "NaN" : fmt::format("{:.6g}", v), c.first_wrong->expected));
    }
    return fmt::format("{}", fmt::join(faults, "; "));
}

std::vector<Tensor> chained_outputs_after(const RuntimeOp& op, void* output, ShapeView output_shape) {
    std::vector<Tensor> chained;
    for (std::size_t k = 1; k <= op.n_chained_outputs(); ++k)
        chained.push_back({static_cast<float*>(output) + k * element_count(output_shape), output_shape});
    return chained;
}

OutputCheck checked_forward(const RuntimeOp& op, Runtime& runtime, const Stream& stream, std::span<const Tensor> inputs,
                            std::span<void* const> params, ShapeView output_shape, std::span<const double> reference,
                            double tolerance, std::size_t row_padding, const CompileOptions* options,
                            Scalar output_type) {
    const std::size_t row = op.forward_output_row_elems(output_shape), size = element_count(output_shape);
    const std::size_t outputs = 1 + op.n_chained_outputs();  // back to back, the chained ones tight
    if (outputs > 1 && row_padding)
        throw UsageError("checked_forward: an op with chained outputs is checked with tight rows (row_padding 0)");
    const OutputLayout layout{outputs * size / row, row, row + row_padding};
    DeviceBuffer y(stream.device(), layout.elements() * byte_size(output_type));
    y.fill(0xff);  // every value a NaN, 32-bit or 16-bit
    const std::vector<Tensor> chained = chained_outputs_after(op, y.as<void>(), output_shape);
    const OpCall call{.inputs = inputs,
                      .params = params,
                      .output = y.as<void>(),
                      .output_shape = output_shape,
                      .output_row_stride = static_cast<int>(layout.row_stride),
                      .chained_outputs = chained};
    if (options) op.forward(runtime, stream, call, *options);
    else op.forward(runtime, stream, call);
    stream.synchronize();
    std::vector<float> host(layout.elements());
    download_as_f32(y, output_type, host);
    return check_output(host, reference, layout, tolerance);
}

}  // namespace kjit
