// Conv configurations as text: the key of a layer's tuned winner, the op a configuration names,
// an op's configuration, and the candidates `kjit tune` times.
#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <ranges>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/conv.hpp>

#include "kjit/ceil_div.cuh"
#include "ops/conv/gemm_forward.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

namespace {
/// Why the Hopper kernel that gathers x (or the one whose TMA boxes it) cannot take the layer;
/// empty where it can.
std::string hopper_unsupported_reason(const Conv2dAttrs& a, const Conv2dShape& s, const DeviceTraits& device,
                                      bool gathers) {
    return gathers ? conv2d_gather_unsupported_reason(a, s, device) : conv2d_tma_unsupported_reason(a, s, device);
}
}  // namespace

std::string conv2d_problem_key(const Conv2dAttrs& a, const Conv2dShape& s) {
    return fmt::format("b{}_c{}x{}x{}_o{}_k{}x{}_s{}x{}_p{}x{}_g{}", s.batch, s.c_in, s.height, s.width, s.c_out,
                       a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.pad_h, a.pad_w, a.groups);
}

std::unique_ptr<Conv2dOp> make_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s, const std::string& config,
                                              const DeviceTraits& device) {
    std::map<std::string, int> values;
    std::istringstream words(config);
    for (std::string word; words >> word;) {
        const auto eq = word.find('=');
        int v = 0;
        const char* end = word.data() + word.size();
        if (eq == std::string::npos || std::from_chars(word.data() + eq + 1, end, v).ptr != end)
            throw UsageError(fmt::format("configuration item '{}': write KEY=INTEGER, e.g. BLOCK_M=64", word));
        if (!values.emplace(word.substr(0, eq), v).second)
            throw UsageError(fmt::format("configuration key {} is given twice", word.substr(0, eq)));
    }
    // Each kernel's keys, [optional ones] bracketed: what a configuration of it is written as. A
    // configuration names its kernel by the first form's marker key it holds (the GEMM's: none).
    enum class Family { nhwc, tma, depthwise, direct, gemm };
    struct Form {
        Family family;
        const char* marker;
        const char* name;
        const char* keys;
    };
    static constexpr Form forms[] = {
        {Family::nhwc, "NHWC", "the channels-last kernel", "NHWC=1 BLOCK_M BLOCK_N STAGES [GROUP_M] [SPLIT_K]"},
        {Family::tma, "TMA", "the TMA + wgmma kernels", "TMA=1 [GATHER] BLOCK_M BLOCK_N STAGES [GROUP_M] [SPLIT_K]"},
        {Family::depthwise, "PLANES", "the depthwise kernel", "BLOCK_H BLOCK_W PLANES THREADS [STEP_ROWS] [STAGED]"},
        {Family::direct, "BLOCK_OC", "the direct kernel", "BLOCK_OC BLOCK_OW"},
        {Family::gemm, nullptr, "the sm80 GEMM kernel", "BLOCK_M BLOCK_N BLOCK_K [GROUP_M] [SPLIT_K]"}};
    // Whether a form names `key`: its words, brackets and "=1" left off.
    const auto names = [](const Form& f, std::string_view key) {
        for (const auto word : std::string_view(f.keys) | std::views::split(' ')) {
            std::string_view w(word.begin(), word.end());
            if (w.starts_with('[')) w = w.substr(1, w.size() - 2);
            if (w.substr(0, w.find('=')) == key) return true;
        }
        return false;
    };
    for (const auto& [key, v] : values)
        if (std::ranges::none_of(forms, [&](const Form& f) { return names(f, key); }))
            throw UsageError(fmt::format(
                "configuration key {} is not one of the conv kernels': they are written {}", key,
                fmt::join(
                    forms | std::views::transform([](const Form& f) { return fmt::format("{} ({})", f.keys, f.name); }),
                    "; ")));
    const Form& form = *std::ranges::find_if(forms,
                                             [&](const Form& f) { return !f.marker || values.contains(f.marker); });
    auto take = [&](const char* key, std::optional<int> fallback = std::nullopt) {
        const auto it = values.find(key);
        if (it == values.end()) {
            require(fallback.has_value(), "configuration '{}' lacks {}: this kernel's are written {}", config, key,
                    form.keys);
            return *fallback;
        }
        const int v = it->second;
        values.erase(it);
        return v;
    };
    std::unique_ptr<Conv2dOp> op;
    if (form.family == Family::nhwc) {
        require(take("NHWC") == 1, "NHWC takes the value 1 (the channels-last kernel); leave it out for NCHW tensors");
        if (const auto why = conv2d_nhwc_tma_unsupported_reason(a, s, device); !why.empty())
            throw UsageError(fmt::format("configuration '{}': {}", config, why));
        const Sm90Tiles t{take("BLOCK_M"), take("BLOCK_N"), take("STAGES"), take("GROUP_M", 8), take("SPLIT_K", 1)};
        op = std::make_unique<Conv2dBnSiluNhwcTmaForward>(t, a, device);
    } else if (form.family == Family::tma) {
        require(take("TMA") == 1, "TMA takes the value 1 (the TMA + wgmma kernel); leave it out for the sm80 kernel");
        const int gather = take("GATHER", 0);
        require(gather == 0 || gather == 1,
                "GATHER takes the value 1 (x gathered, not boxed by TMA) or 0; {} is neither", gather);
        const auto why = hopper_unsupported_reason(a, s, device, gather == 1);
        if (!why.empty()) throw UsageError(fmt::format("configuration '{}': {}", config, why));
        const Sm90Tiles t{take("BLOCK_M"), take("BLOCK_N"), take("STAGES"), take("GROUP_M", 8), take("SPLIT_K", 1)};
        op = detail::make_tma_conv(a, t, device, gather == 1);
    } else if (form.family == Family::depthwise) {
        const int staged = take("STAGED", 1);
        require(staged == 0 || staged == 1,
                "STAGED takes 1 (input windows staged in shared memory) or 0 (each thread reads x itself); {} is "
                "neither",
                staged);
        const DepthwiseTiles t{take("BLOCK_H"), take("BLOCK_W"),      take("PLANES"),
                               take("THREADS"), take("STEP_ROWS", 2), staged == 1};
        op = std::make_unique<Conv2dBnSiluDepthwiseForward>(t, a, depthwise_group(a, s), device.max_shared_bytes);
    } else if (form.family == Family::direct) {
        const int oc = take("BLOCK_OC"), ow = take("BLOCK_OW");
        op = std::make_unique<Conv2dBnSiluDirectForward>(oc, ow, a, s, device.max_shared_bytes);
    } else {
        const GemmTiles t{take("BLOCK_M"), take("BLOCK_N"), take("BLOCK_K"), take("GROUP_M", 8)};
        const int split = take("SPLIT_K", 1);
        require(split == 1 || device.clusters(), "SPLIT_K > 1 needs thread-block clusters (sm_90 or newer)");
        op = detail::make_gemm_conv(a, t, device.max_shared_bytes, split);
    }
    if (!values.empty())
        throw UsageError(fmt::format("configuration key {} is not one this kernel takes", values.begin()->first));
    return op;
}

namespace {
std::string gemm_config(const GemmTiles& t, int split) {
    return fmt::format("BLOCK_M={} BLOCK_N={} BLOCK_K={} GROUP_M={} SPLIT_K={}", t.block_m, t.block_n, t.block_k,
                       t.group_m, split);
}
/// A Hopper op's tiles after its kernel's keys ("TMA=1", "TMA=1 GATHER=1", "NHWC=1").
std::string sm90_config(const char* kernel, const Sm90Tiles& t) {
    return fmt::format("{} BLOCK_M={} BLOCK_N={} STAGES={} GROUP_M={}{}", kernel, t.block_m, t.block_n, t.stages,
                       t.group_m, t.split_k > 1 ? fmt::format(" SPLIT_K={}", t.split_k) : "");
}
std::string tma_config(const Sm90Tiles& t, bool gathers) {
    return sm90_config(gathers ? "TMA=1 GATHER=1" : "TMA=1", t);
}
std::string direct_config(const DirectTiles& t) {
    return fmt::format("BLOCK_OC={} BLOCK_OW={}", t.block_oc, t.block_ow);
}
std::string depthwise_config(const DepthwiseTiles& t) {
    return fmt::format("BLOCK_H={} BLOCK_W={} PLANES={} THREADS={} STEP_ROWS={}{}", t.block_h, t.block_w, t.planes,
                       t.threads, t.step_rows, t.staged ? "" : " STAGED=0");
}
}  // namespace

std::string conv2d_bn_silu_config(const Conv2dOp& op) {
    if (const auto* g = dynamic_cast<const GemmConvOp*>(&op)) return gemm_config(g->tiles(), g->split_k());
    if (const auto* t = dynamic_cast<const TmaConvOp*>(&op)) return tma_config(t->tiles(), t->gathers());
    if (const auto* n = dynamic_cast<const Conv2dBnSiluNhwcTmaForward*>(&op)) return sm90_config("NHWC=1", n->tiles());
    if (const auto* d = dynamic_cast<const Conv2dBnSiluDepthwiseForward*>(&op)) return depthwise_config(d->tiles());
    return direct_config(dynamic_cast<const Conv2dBnSiluDirectForward&>(op).tiles());
}

std::vector<std::string> conv2d_bn_silu_candidates(const Conv2dAttrs& a, const Conv2dShape& s,
                                                   const DeviceTraits& device) {
    const auto chosen = dispatch_conv2d_bn_silu(a, s, device);
    std::vector<std::string> list;
    const int group_in = depthwise_group(a, s).in;
    const auto depthwise_tiles = [&] {
        for (const auto& t : DepthwiseTiles::configurations())
            if (t.shared_bytes(a, group_in) <= static_cast<unsigned>(device.max_shared_bytes))
                list.push_back(depthwise_config(t));
    };
    // Grouped layers: the depthwise kernel summing each group's planes (up to 32 a group) —
    // alone for depthwise layers where a tile fits — for groups of fewer than 16 outputs the
    // direct kernel's tiles, and below, the implicit GEMM's per-group tiles: which is fastest
    // depends on the shape; `kjit tune` and the bench time all. A layer of one input channel is
    // depthwise too (dispatch may pick the kernel), beside the GEMMs.
    if ((a.groups > 1 || is_depthwise(a, s)) && group_in <= DepthwiseGroup::max_in) depthwise_tiles();
    if (is_depthwise(a, s) && a.groups > 1 && !list.empty()) return list;
    const bool narrow_groups = a.groups > 1 && s.c_out / a.groups < 16;
    if (narrow_groups || dynamic_cast<const Conv2dBnSiluDirectForward*>(chosen.get()))
        for (const auto& t : Conv2dBnSiluDirectForward::configurations()) list.push_back(direct_config(t));
    for (const bool gathers : {false, true}) {
        if (!hopper_unsupported_reason(a, s, device, gathers).empty()) continue;
        for (const auto& t : Sm90Tiles::configurations())
            if (t.shared_bytes() + detail::tma_policy_bytes(a, gathers) <=
                    static_cast<unsigned>(device.max_shared_bytes) &&
                detail::tiles_within_groups(t.block_n, s.c_out, a.groups))
                list.push_back(tma_config(t, gathers));
        // Each tile shape's deepest pipeline beside the tap table (what dispatch weighs: deeper
        // than the list's where the table leaves room for 5-7 stages), and split-K on it where
        // the tiles leave SMs idle.
        for (const auto& t : detail::sm90_split_candidates(a, s, device, gathers))
            if (const std::string text = tma_config(t, gathers); std::ranges::count(list, text) == 0)
                list.push_back(text);
    }
    const auto [oh, ow] = conv2d_output_size(a, s);
    const long long p = 1LL * s.batch * oh * ow;
    const int k = s.c_in / a.groups * a.kernel_h * a.kernel_w;
    for (const auto& t : GemmTiles::configurations())
        for (int split : {1, 2, 4, 8}) {
            if (!detail::worth_splitting(t, split, p * a.groups, s.c_out / a.groups, k, device)) continue;
            if (t.shared_bytes(split) > static_cast<unsigned>(device.max_shared_bytes)) continue;
            list.push_back(gemm_config(t, split));
        }
    return list;
}

std::vector<std::string> conv2d_bn_silu_configurations(const Conv2dAttrs& a, const Conv2dShape& s,
                                                       const DeviceTraits& device) {
    // Every form's every tile, kept where the op takes it for this layer and device: what the
    // constructors refuse (tiles over the shared memory, a group too wide for the depthwise
    // kernel, a layer TMA cannot box, split-K without clusters) is not a configuration of it.
    std::vector<std::string> texts;
    // The depthwise kernel is for grouped layers and those of one input channel.
    if (a.groups > 1 || is_depthwise(a, s))
        for (const auto& t : DepthwiseTiles::configurations()) texts.push_back(depthwise_config(t));
    for (const auto& t : Conv2dBnSiluDirectForward::configurations()) texts.push_back(direct_config(t));
    const int max_split = device.clusters() ? 8 : 1;
    for (int split = 1; split <= max_split; ++split) {
        for (const auto& t : GemmTiles::configurations()) texts.push_back(gemm_config(t, split));
        for (Sm90Tiles t : Sm90Tiles::configurations()) {
            t.split_k = split;
            // A tile straddling groups would run on the sm80 fallback, not on the kernel named.
            if (detail::tiles_within_groups(t.block_n, s.c_out, a.groups))
                for (const bool gathers : {false, true}) texts.push_back(tma_config(t, gathers));
            texts.push_back(sm90_config("NHWC=1", t));
        }
    }
    // And the pipelines dispatch and `kjit tune` weigh, deepest beside the implicit GEMM's tap table.
    for (const bool gathers : {false, true})
        if (hopper_unsupported_reason(a, s, device, gathers).empty())
            for (const auto& t : detail::sm90_split_candidates(a, s, device, gathers))
                texts.push_back(tma_config(t, gathers));
    std::vector<std::string> list;
    for (auto& text : texts) try {
            if (std::ranges::count(list, text)) continue;
            (void)make_conv2d_bn_silu(a, s, text, device);
            list.push_back(std::move(text));
        } catch (const UsageError&) {}
    return list;
}

std::vector<std::string> conv2d_bn_silu_nhwc_configs(const Conv2dAttrs& a, const Conv2dShape& s,
                                                     const DeviceTraits& device) {
    std::vector<std::string> list;
    for (const auto& t : conv2d_bn_silu_nhwc_candidates(a, s, device)) list.push_back(sm90_config("NHWC=1", t));
    return list;
}

}  // namespace kjit
