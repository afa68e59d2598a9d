// The float64 reference of Conv2d + BN + SiLU: what every kernel is checked against.
#include <cmath>

#include <fmt/format.h>
#include <kjit/conv.hpp>

#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

std::vector<double> conv2d_bn_silu_reference(std::span<const float> x, std::span<const float> w,
                                             std::span<const float> scale, std::span<const float> shift,
                                             const Conv2dAttrs& a, const Conv2dShape& s) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    const int cin_pg = s.c_in / a.groups, cout_pg = s.c_out / a.groups;
    require(x.size() == 1ULL * s.batch * s.c_in * s.height * s.width, "reference: x has the wrong size");
    require(w.size() == 1ULL * s.c_out * cin_pg * a.kernel_h * a.kernel_w, "reference: w has the wrong size");
    require(scale.size() == static_cast<std::size_t>(s.c_out) && shift.size() == scale.size(),
            "reference: bn_scale/bn_shift have the wrong size");
    std::vector<double> y(1ULL * s.batch * s.c_out * oh * ow);
    for (int b = 0; b < s.batch; ++b)
        for (int oc = 0; oc < s.c_out; ++oc) {
            const int g = oc / cout_pg;
            for (int i = 0; i < oh; ++i)
                for (int j = 0; j < ow; ++j) {
                    double acc = 0;
                    for (int ci = 0; ci < cin_pg; ++ci)
                        for (int kh = 0; kh < a.kernel_h; ++kh) {
                            const int ih = i * a.stride_h - a.pad_h + kh;
                            if (ih < 0 || ih >= s.height) continue;
                            for (int kw = 0; kw < a.kernel_w; ++kw) {
                                const int iw = j * a.stride_w - a.pad_w + kw;
                                if (iw < 0 || iw >= s.width) continue;
                                const double xv =
                                    x[((1ULL * b * s.c_in + g * cin_pg + ci) * s.height + ih) * s.width + iw];
                                const double wv = w[((1ULL * oc * cin_pg + ci) * a.kernel_h + kh) * a.kernel_w + kw];
                                acc += xv * wv;
                            }
                        }
                    const double v = static_cast<double>(scale[oc]) * acc + shift[oc];
                    y[((1ULL * b * s.c_out + oc) * oh + i) * ow + j] = v / (1.0 + std::exp(-v));
                }
        }
    return y;
}

}  // namespace kjit
