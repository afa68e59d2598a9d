// What kjit run, tune and check share to put a conv layer on the GPU: its tensors with fresh
// random values, the reference in the run's layout, and timing by CUDA-graph replay.
#include <unistd.h>

#include <random>

#include "cli.hpp"

namespace kjit::cli {
namespace {

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

std::size_t size(int v) { return static_cast<std::size_t>(v); }

}  // namespace

ConvValues::ConvValues(const Layer& l) {
    std::mt19937_64 rng{std::random_device{}()};
    const auto& s = l.shape;
    const int fan_in = s.c_in / l.attrs.groups * l.attrs.kernel_h * l.attrs.kernel_w;
    x = random_values(size(s.batch) * size(s.c_in) * size(s.height) * size(s.width), 1.0f, rng);
    w = random_values(size(s.c_out) * size(fan_in), 1.7f / std::sqrt(float(fan_in)), rng);
    scale = random_values(size(s.c_out), 1.0f, rng);
    shift = random_values(size(s.c_out), 1.0f, rng);
}

ConvTensors::ConvTensors(const Device& device, const Layer& l, bool channels_last_)
    : ConvTensors(device, l, channels_last_, ConvValues(l)) {}

ConvTensors::ConvTensors(const Device& device, const Layer& l, bool channels_last_, ConvValues values)
    : ConvValues(std::move(values)),
      dx(upload(device, channels_last_ ? to_channels_last<float>(x, size(l.shape.batch), size(l.shape.c_in),
                                                                 size(l.shape.height) * size(l.shape.width))
                                       : x)),
      dw(upload(device, channels_last_ ? to_channels_last<float>(w, size(l.shape.c_out), size(l.shape.c_in),
                                                                 size(l.attrs.kernel_h) * size(l.attrs.kernel_w))
                                       : w)),
      dscale(upload(device, scale)),
      dshift(upload(device, shift)),
      dy(device,
         [&] {
             const auto [oh, ow] = conv2d_output_size(l.attrs, l.shape);
             return size(l.shape.batch) * size(l.shape.c_out) * size(oh) * size(ow) * sizeof(float);
         }()),
      channels_last(channels_last_),
      params{dw.as<float>(), dscale.as<float>(), dshift.as<float>()},
      input{dx.as<float>(), {}} {
    const auto& s = l.shape;
    const auto [oh, ow] = conv2d_output_size(l.attrs, s);
    x_shape = channels_last ? Shape{size(s.batch), size(s.height), size(s.width), size(s.c_in)}
                            : Shape{size(s.batch), size(s.c_in), size(s.height), size(s.width)};
    y_shape = channels_last ? Shape{size(s.batch), size(oh), size(ow), size(s.c_out)}
                            : Shape{size(s.batch), size(s.c_out), size(oh), size(ow)};
    input.shape = x_shape;
}

OpCall ConvTensors::call(const RuntimeOp& op) const {
    return {std::span(&input, 1), params, dy.as<float>(), y_shape,
            static_cast<int>(op.forward_output_row_elems(y_shape))};
}

std::vector<double> ConvTensors::reference(const Layer& l) const {
    auto ref = conv2d_bn_silu_reference(x, w, scale, shift, l.attrs, l.shape);
    if (!channels_last) return ref;
    return to_channels_last<double>(ref, y_shape[0], y_shape[3], y_shape[1] * y_shape[2]);
}

double conv_tolerance(const Conv2dOp& op) { return conv2d_rounds_to_tf32(op) ? 2e-3 : 1e-5; }

std::string output_faults(const OutputCheck& c, ShapeView shape) {
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
        std::vector<std::size_t> at(shape.size());  // the index as coordinates, last dimension fastest
        for (std::size_t d = shape.size(), i = c.first_wrong->index; d-- > 0; i /= shape[d]) at[d] = i % shape[d];
        const float v = c.first_wrong->value;
        faults.push_back(fmt::format("first wrong: y[{}] = {}, expected {:.6g}", fmt::join(at, ","),
                                     std::isnan(v) ? "NaN" : fmt::format("{:.6g}", v), c.first_wrong->expected));
    }
    return fmt::format("{}", fmt::join(faults, "; "));
}

double time_forward(const RuntimeOp& op, Runtime& rt, const Stream& stream, const OpCall& call, int iters) {
    auto once = [&] { op.forward(rt, stream, call); };
    once();  // compile or load
    const Graph graph = Graph::capture(stream, once);
    graph.launch(stream);
    std::vector<Event> marks;
    for (int i = 0; i <= iters; ++i) marks.emplace_back(stream.device());
    marks[0].record(stream);
    std::vector<double> us;
    for (int i = 1; i <= iters; ++i) {
        graph.launch(stream);
        marks[i].record(stream);
    }
    stream.synchronize();
    for (int i = 1; i <= iters; ++i) us.push_back(1000.0 * Event::elapsed_ms(marks[i - 1], marks[i]));
    return median(std::move(us));
}

void check_fits_host(const Layer& l) {
    const auto& s = l.shape;
    const auto [oh, ow] = conv2d_output_size(l.attrs, s);
    const double x = 1.0 * s.batch * s.c_in * s.height * s.width,
                 w = 1.0 * s.c_out * (s.c_in / l.attrs.groups) * l.attrs.kernel_h * l.attrs.kernel_w,
                 y = 1.0 * s.batch * s.c_out * oh * ow;
    // x and W twice (as generated, and in the run's layout), y as read back with its guard, and
    // its reference.
    const double bytes = 8.0 * (x + w) + 4.0 * y + 8.0 * y;
    const double memory = 1.0 * sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE);
    if (bytes > memory)
        throw UsageError(
            fmt::format("this layer's tensors and its float64 reference take {:.1f} GB of host memory; "
                        "this machine has {:.1f} GB: choose a smaller layer or batch",
                        bytes / 1e9, memory / 1e9));
}

}  // namespace kjit::cli
