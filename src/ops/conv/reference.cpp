// The float64 reference of Conv2d + BN + SiLU: what every kernel is checked against.
#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>
#include <kjit/conv.hpp>

#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

namespace {

/// Output plane (b, oc) of `y`: each pixel's sum over (ci, kh, kw) in that order — a tap at a
/// time across the plane, so x is read along its rows — then BN and SiLU.
void reference_plane(std::span<double> plane, const float* x_group, const float* w_oc, double scale, double shift,
                     const Conv2dAttrs& a, const Conv2dShape& s, int cin_pg, int oh, int ow) {
    std::fill(plane.begin(), plane.end(), 0.0);
    for (int ci = 0; ci < cin_pg; ++ci)
        for (int kh = 0; kh < a.kernel_h; ++kh)
            for (int kw = 0; kw < a.kernel_w; ++kw) {
                const double wv = w_oc[(ci * a.kernel_h + kh) * a.kernel_w + kw];
                // The output columns whose input column j·stride − pad + kw lies inside the row.
                const int j0 = std::max(0, (a.pad_w - kw + a.stride_w - 1) / a.stride_w);
                const int last = s.width - 1 + a.pad_w - kw;
                const int j1 = last < 0 ? 0 : std::min(ow, last / a.stride_w + 1);
                for (int i = 0; i < oh; ++i) {
                    const int ih = i * a.stride_h - a.pad_h + kh;
                    if (ih < 0 || ih >= s.height) continue;
                    const float* row = x_group + (1LL * ci * s.height + ih) * s.width;
                    double* out = plane.data() + 1LL * i * ow;
                    for (int j = j0; j < j1; ++j)
                        out[j] += static_cast<double>(row[j * a.stride_w - a.pad_w + kw]) * wv;
                }
            }
    for (double& v : plane) {
        v = scale * v + shift;
        v = v / (1.0 + std::exp(-v));
    }
}

}  // namespace

std::vector<double> conv2d_bn_silu_reference(std::span<const float> x, std::span<const float> w,
                                             std::span<const float> scale, std::span<const float> shift,
                                             const Conv2dAttrs& a, const Conv2dShape& s) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    const int cin_pg = s.c_in / a.groups, cout_pg = s.c_out / a.groups;
    require(x.size() == 1ULL * s.batch * s.c_in * s.height * s.width, "reference: x has the wrong size");
    require(w.size() == 1ULL * s.c_out * cin_pg * a.kernel_h * a.kernel_w, "reference: w has the wrong size");
    require(scale.size() == static_cast<std::size_t>(s.c_out) && shift.size() == scale.size(),
            "reference: bn_scale/bn_shift have the wrong size");
    const std::size_t plane = 1ULL * oh * ow, planes = 1ULL * s.batch * s.c_out;
    std::vector<double> y(planes * plane);
    auto compute = [&](std::size_t r) {
        const int b = static_cast<int>(r / s.c_out), oc = static_cast<int>(r % s.c_out), g = oc / cout_pg;
        reference_plane(std::span(y).subspan(r * plane, plane),
                        x.data() + (1ULL * b * s.c_in + 1ULL * g * cin_pg) * s.height * s.width,
                        w.data() + 1ULL * oc * cin_pg * a.kernel_h * a.kernel_w, scale[oc], shift[oc], a, s, cin_pg, oh,
                        ow);
    };
    // Planes are independent: spread them over the cores (a layer of the GPU suite is up to 10^9
    // multiply-adds), each plane's sums in the same order whatever the thread count.
    const double work = static_cast<double>(y.size()) * cin_pg * a.kernel_h * a.kernel_w;
    const std::size_t most = std::min<std::size_t>(planes, std::thread::hardware_concurrency());
    const std::size_t threads = std::clamp<std::size_t>(static_cast<std::size_t>(work / 4e6), 1,
                                                        std::max<std::size_t>(most, 1));
    std::vector<std::jthread> pool;
    for (std::size_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (std::size_t r = t; r < planes; r += threads) compute(r);
        });
    pool.clear();  // joins
    return y;
}

}  // namespace kjit
