// float64 references of the elementwise ops (kjit/elementwise.hpp): plain loops over NCHW
// tensors, written for reading, not speed.
#include <cmath>

#include <kjit/elementwise.hpp>

namespace kjit {

std::vector<double> add_reference(std::span<const float> a, std::span<const float> b) {
    std::vector<double> y(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) y[i] = double(a[i]) + double(b[i]);
    return y;
}

std::vector<double> concat_channels_reference(std::span<const std::vector<float>> inputs,
                                              std::span<const Shape> shapes) {
    std::vector<double> y;
    for (std::size_t b = 0; b < shapes[0][0]; ++b)
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            const std::size_t image = element_count(shapes[i]) / shapes[i][0];  // C·H·W of input i
            y.insert(y.end(), inputs[i].begin() + b * image, inputs[i].begin() + (b + 1) * image);
        }
    return y;
}

std::vector<double> maxpool2d_reference(std::span<const float> x, ShapeView s, int kernel, int stride, int pad) {
    const long h = long(s[2]), w = long(s[3]);
    const long oh = (h + 2 * pad - kernel) / stride + 1, ow = (w + 2 * pad - kernel) / stride + 1;
    std::vector<double> y;
    for (std::size_t plane = 0; plane < s[0] * s[1]; ++plane)
        for (long r = 0; r < oh; ++r)
            for (long c = 0; c < ow; ++c) {
                double best = -INFINITY;
                for (long ih = r * stride - pad; ih < r * stride - pad + kernel; ++ih)
                    for (long iw = c * stride - pad; iw < c * stride - pad + kernel; ++iw)
                        if (ih >= 0 && iw >= 0 && ih < h && iw < w)
                            best = std::max(best, double(x[(plane * h + ih) * w + iw]));
                y.push_back(best);
            }
    return y;
}

std::vector<double> maxpool2d_chain_reference(std::span<const float> x, ShapeView s, int window, int repeats) {
    std::vector<double> all;
    std::vector<float> last(x.begin(), x.end());
    for (int r = 0; r < repeats; ++r) {
        const std::vector<double> y = maxpool2d_reference(last, s, window, 1, window / 2);
        all.insert(all.end(), y.begin(), y.end());
        last.assign(y.begin(), y.end());  // maxima of floats: exact
    }
    return all;
}

std::vector<double> upsample_nearest2d_reference(std::span<const float> x, ShapeView s, int scale) {
    const std::size_t f = static_cast<std::size_t>(scale);
    std::vector<double> y;
    for (std::size_t plane = 0; plane < s[0] * s[1]; ++plane)
        for (std::size_t r = 0; r < s[2] * f; ++r)
            for (std::size_t c = 0; c < s[3] * f; ++c) y.push_back(x[(plane * s[2] + r / f) * s[3] + c / f]);
    return y;
}

}  // namespace kjit
