// The attention forward in float64 (kjit/attention.hpp), what the tests and `kjit run` check
// the kernel against, and the comparison with it; and the host's f32 ↔ f16 / bf16 conversions.
#include <kjit/attention.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <kjit/driver.hpp>
#include <kjit/error.hpp>

#include "jit/parallel.hpp"
#include "kjit/ceil_div.cuh"

namespace kjit {

AttentionReference attention_reference(const AttentionShape& s, std::span<const float> q, std::span<const float> k,
                                       std::span<const float> v, float scale, std::span<const std::size_t> rows) {
    s.validate();
    const std::size_t d = s.head_dim, q_rows = std::size_t(s.batch) * s.heads * s.seq,
                      kv_rows = std::size_t(s.batch) * s.kv_heads * s.kv_seq;
    if (q.size() != q_rows * d || k.size() != kv_rows * d || v.size() != kv_rows * d)
        throw UsageError("attention_reference: q, k, v sizes do not match the shape [B, H, S, D]");
    const std::size_t n = rows.empty() ? q_rows : rows.size();
    const double c = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(d));
    AttentionReference r{std::vector<double>(n * d, 0.0), std::vector<double>(n)};
    std::vector<double> p(static_cast<std::size_t>(s.kv_seq));
    for (std::size_t out = 0; out < n; ++out) {
        const std::size_t row = rows.empty() ? out : rows[out];
        if (row >= q_rows) throw UsageError("attention_reference: a row past the problem's query rows");
        const std::size_t i = row % s.seq, bh = row / s.seq, b = bh / s.heads, h = bh % s.heads;
        const std::size_t kv = (b * s.kv_heads + h / (s.heads / s.kv_heads)) * s.kv_seq * d;
        const float* qi = q.data() + row * d;
        const int seen = s.causal ? std::min(static_cast<int>(i) + 1, s.kv_seq) : s.kv_seq;
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < seen; ++j) {
            double dot = 0;
            for (std::size_t e = 0; e < d; ++e) dot += double(qi[e]) * k[kv + j * d + e];
            p[j] = dot * c;
            m = std::max(m, p[j]);
        }
        double l = 0;
        for (int j = 0; j < seen; ++j) l += (p[j] = std::exp(p[j] - m));
        double* o = r.o.data() + out * d;
        for (int j = 0; j < seen; ++j)
            for (std::size_t e = 0; e < d; ++e) o[e] += p[j] / l * v[kv + j * d + e];
        r.lse[out] = seen ? m + std::log(l) : -std::numeric_limits<double>::infinity();
    }
    return r;
}

double attention_tolerance(Scalar dtype) { return dtype == Scalar::f16 ? 2e-3 : 8e-3; }

AttentionCheck check_attention(const AttentionShape& s, std::span<const float> o, std::span<const float> lse,
                               const AttentionReference& ref, std::span<const std::size_t> rows) {
    const std::size_t d = s.head_dim, q_rows = std::size_t(s.batch) * s.heads * s.seq;
    const std::size_t n = rows.empty() ? q_rows : rows.size();
    if (o.size() != q_rows * d || lse.size() != q_rows || ref.o.size() != n * d || ref.lse.size() != n)
        throw UsageError("check_attention: o, lse and the reference do not match the shape and rows");
    AttentionCheck c{.tolerance = attention_tolerance(s.dtype), .rows = n};
    c.unwritten = static_cast<std::size_t>(std::ranges::count_if(o, [](float x) { return !std::isfinite(x); }) +
                                           std::ranges::count_if(lse, [](float x) { return std::isnan(x); }));
    double diff = 0, norm = 0;
    for (std::size_t r = 0; r < n; ++r) {
        const std::size_t row = rows.empty() ? r : rows[r];
        for (std::size_t e = 0; e < d; ++e) {
            const double want = ref.o[r * d + e], delta = o[row * d + e] - want;
            diff += delta * delta;
            norm += want * want;
        }
        if (std::isfinite(ref.lse[r])) c.lse_error = std::max(c.lse_error, std::abs(lse[row] - ref.lse[r]));
        else if (!(std::isinf(lse[row]) && lse[row] < 0)) c.lse_error = std::numeric_limits<double>::infinity();
    }
    c.error = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    return c;
}

std::string AttentionCheck::faults() const {
    std::vector<std::string> parts;
    if (unwritten) parts.push_back(fmt::format("{} outputs never written (still NaN)", unwritten));
    if (!(error <= tolerance)) parts.push_back(fmt::format("error {:.2e} over the tolerance {:.0e}", error, tolerance));
    if (!(lse_error <= lse_tolerance))
        parts.push_back(fmt::format("log-sum-exp off by {:.2e} (tolerance {:.0e}; a row with no key must be -inf)",
                                    lse_error, lse_tolerance));
    return fmt::format("{}", fmt::join(parts, "; "));
}

std::uint16_t to_16bit(float x, Scalar dtype) {
    const auto bits = std::bit_cast<std::uint32_t>(x);
    if (dtype == Scalar::bf16) {
        if (std::isnan(x)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
        return static_cast<std::uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    }
    if (dtype != Scalar::f16) throw UsageError("to_16bit: the dtype must be f16 or bf16");
    const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000);
    const float a = std::fabs(x);
    if (std::isnan(x)) return sign | 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
    if (a < 6.103515625e-05f) {               // subnormal: multiples of 2^-24, rounded to nearest even
        return sign | static_cast<std::uint16_t>(std::nearbyint(a * 16777216.0f));
    }
    const std::uint32_t m = bits & 0x7fffffff;
    std::uint32_t h = ((m >> 13) - (112u << 10));  // rebias the exponent: 127 → 15
    const std::uint32_t rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
    return sign | static_cast<std::uint16_t>(h);
}

float from_16bit(std::uint16_t h, Scalar dtype) {
    if (dtype == Scalar::bf16) return std::bit_cast<float>(std::uint32_t{h} << 16);
    if (dtype != Scalar::f16) throw UsageError("from_16bit: the dtype must be f16 or bf16");
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
    if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
    return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

void download_as_f32(const DeviceSpan& from, Scalar type, std::span<float> host) {
    if (type == Scalar::f32) return from.download(host);
    if (type != Scalar::f16 && type != Scalar::bf16)
        throw UsageError(fmt::format("download_as_f32 reads f32, f16 or bf16 values, not {}", short_name(type)));
    // Into the span's first half, then widened in place, last first: float j overwrites 16-bit
    // values 2j and 2j + 1, none of them still to be read.
    const std::span<std::byte> bytes = std::as_writable_bytes(host);
    from.download(bytes.first(host.size() * 2));
    for (std::size_t j = host.size(); j-- > 0;) {
        std::uint16_t bits = 0;
        std::memcpy(&bits, bytes.data() + 2 * j, 2);
        host[j] = from_16bit(bits, type);
    }
}

namespace {
/// Calls f(bhsd index, index in `layout`) for every element of a [B, H, S, D] tensor of `n`, on
/// all cores (benchmark problems hold 10⁹ elements).
template <class F>
void for_each_element(std::size_t n, int heads, int seq, int head_dim, AttentionLayout layout, F&& f) {
    const AttentionStrides to = AttentionStrides::of(layout, heads, seq, head_dim);
    const std::size_t rows = n / head_dim;
    constexpr std::size_t chunk = 4096;  // rows a task converts
    detail::parallel_for(ceil_div(rows, chunk), [&](std::size_t c) {
        for (std::size_t row = c * chunk; row < std::min(rows, (c + 1) * chunk); ++row) {
            const std::size_t i = row % seq, bh = row / seq, b = bh / heads, h = bh % heads;
            const std::size_t base = b * to.batch + h * to.head + i * to.row;
            for (int e = 0; e < head_dim; ++e) f(row * head_dim + e, base + e);
        }
    });
}
}  // namespace

std::vector<std::uint16_t> to_attention_layout(std::span<const float> bhsd, int heads, int seq, int head_dim,
                                               AttentionLayout layout, Scalar dtype) {
    std::vector<std::uint16_t> out(bhsd.size());
    for_each_element(bhsd.size(), heads, seq, head_dim, layout,
                     [&](std::size_t from, std::size_t to) { out[to] = to_16bit(bhsd[from], dtype); });
    return out;
}

std::vector<float> from_attention_layout(std::span<const std::uint16_t> stored, int heads, int seq, int head_dim,
                                         AttentionLayout layout, Scalar dtype) {
    std::vector<float> out(stored.size());
    for_each_element(stored.size(), heads, seq, head_dim, layout,
                     [&](std::size_t to, std::size_t from) { out[to] = from_16bit(stored[from], dtype); });
    return out;
}

}  // namespace kjit
