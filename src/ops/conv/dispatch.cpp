// Dispatch: which conv kernel and tiles a layer gets on a device — a tuned winner when the cache
// holds one, else a cost model of the tensor-core GEMM, or the direct kernel's rule.
#include <algorithm>

#include <fmt/format.h>
#include <kjit/conv.hpp>
#include <kjit/driver.hpp>
#include <kjit/tuning.hpp>

#include "jit/log.hpp"
#include "kjit/ceil_div.cuh"
#include "ops/conv/gemm_forward.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

namespace {

/// Estimated time of the GEMM on `sms` multiprocessors: the busiest SM's blocks times the cost of
/// one block — the larger of its tensor-core work and its operand traffic over its share of K,
/// plus a fixed latency and, with split-K, the cluster reduction.
double gemm_cost(const GemmTiles& t, int split_k, long long p, int n, int k, int sms) {
    const long long blocks = ceil_div<long long>(p, t.block_m) * ceil_div(n, t.block_n) * split_k;
    const long long per_sm = ceil_div<long long>(blocks, sms);
    const double math = static_cast<double>(t.block_m) * t.block_n / 512.0;  // TF32 MACs per clock per SM
    const double traffic = (t.block_m + t.block_n) * 4.0 / 64.0;             // L2 bytes per clock per SM
    const double reduction = split_k > 1 ? 500.0 * split_k + t.block_m * t.block_n / 32.0 : 0.0;
    return static_cast<double>(per_sm) *
           (static_cast<double>(k) / split_k * std::max(math, traffic) + 2000.0 + reduction);
}

}  // namespace

std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s,
                                                  const DeviceTraits& device) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    const int cin_pg = s.c_in / a.groups, cout_pg = s.c_out / a.groups;
    const bool pointwise = detail::is_pointwise(a);
    // Tensor cores pay when each group's GEMM is at least one MMA tile deep and tall.
    const bool wide_groups = cin_pg * a.kernel_h * a.kernel_w >= 16 && cout_pg >= 16 && a.kernel_h * a.kernel_w <= 64 &&
                             a.stride_h == a.stride_w && a.pad_h == a.pad_w;
    if (pointwise || wide_groups) {
        const long long p = 1LL * s.batch * oh * ow;
        const int k = cin_pg * a.kernel_h * a.kernel_w;
        const GemmTiles* best = nullptr;
        int best_split = 1;
        double best_cost = 0;
        for (const auto& t : GemmTiles::configurations())
            for (int split : {1, 2, 4, 8}) {
                if (split > 1 && (!device.clusters || k < 2 * split * t.block_k)) continue;
                if (t.shared_bytes(split) > static_cast<unsigned>(device.max_shared_bytes)) continue;
                const double cost = a.groups * gemm_cost(t, split, p, cout_pg, k, device.multiprocessors);
                if (!best || cost < best_cost) best = &t, best_split = split, best_cost = cost;
            }
        require(best != nullptr, "no GEMM configuration fits this device's shared memory");
        return detail::make_gemm_conv(a, *best, device.max_shared_bytes, best_split);
    }
    // Direct: pixels per block from the row width; channels per block shrink until the grid
    // covers the device twice.
    const int block_ow = ow >= 48 ? 64 : ow >= 24 ? 32 : 16;
    int block_oc = 64;
    auto blocks = [&, oh = oh, ow = ow](int oc) {
        return 1LL * ceil_div(ow, block_ow) * oh * s.batch * ceil_div(s.c_out, oc);
    };
    while (block_oc > 16 && (blocks(block_oc) < 2LL * device.multiprocessors || block_oc / 2 >= s.c_out)) block_oc /= 2;
    if (Conv2dBnSiluDirectForward::threads({block_oc, block_ow}) < 32) block_oc = 32;
    return std::make_unique<Conv2dBnSiluDirectForward>(block_oc, block_ow, a, s, device.max_shared_bytes);
}

std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const Device& device,
                                                  Cache& cache) {
    const DeviceTraits traits = DeviceTraits::of(device);
    if (const auto winner = find_tuned(cache, "conv2d_bn_silu", conv2d_problem_key(a, s), device.name(),
                                       device.arch().name())) {
        try {
            return make_conv2d_bn_silu(a, s, winner->config, traits);
        } catch (const UsageError& e) {
            detail::warn(fmt::format("ignoring the tuned configuration '{}' for {}: {}", winner->config,
                                     conv2d_problem_key(a, s), e.what()));
        }
    }
    return dispatch_conv2d_bn_silu(a, s, traits);
}

}  // namespace kjit
