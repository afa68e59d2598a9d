// The shipped kernels and their valid configurations: the list warm-up and tests iterate.
#include <algorithm>
#include <charconv>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <kjit/registry.hpp>

#include <kjit/attention.hpp>
#include <kjit/conv.hpp>
#include <kjit/elementwise.hpp>
#include <kjit/error.hpp>

namespace kjit {
namespace {

/// y ← α·x + β·y (kernels_src/axpby.cu) for each element type and items per thread.
std::vector<Kernel> axpby_configurations() {
    std::vector<Kernel> kernels;
    for (Scalar t : {Scalar::f32, Scalar::i32})
        for (std::int64_t items : {1, 4}) {
            constexpr std::int64_t block = 256;
            kernels.emplace_back(
                KernelSpec{"axpby",
                           {{"T", t}, {"BLOCK", block}, {"ITEMS", items}},
                           {{"x", {t, true}}, {"y", {t, true}}, {"alpha", {t}}, {"beta", {t}}, {"n", {Scalar::i64}}},
                           static_cast<unsigned>(block)});
        }
    return kernels;
}

// Layer shapes and attributes are run-time arguments: any layer gives the same kernel for given
// tiles, so the lists below build each configuration for a representative 3x3 layer.
constexpr Conv2dAttrs three_by_three{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};

std::vector<Kernel> gemm_configurations() {
    std::vector<Kernel> kernels;
    for (const auto& t : GemmTiles::configurations())
        kernels.push_back(Conv2dBnSiluGemmForward(t.block_m, t.block_n, t.block_k, t.group_m).kernel());
    return kernels;
}

const DeviceTraits hopper(132, 232448, Arch(9, 0));  // every 9.0 device builds the same kernels

std::vector<Kernel> tma_gemm_configurations() {
    std::vector<Kernel> kernels;
    for (const auto& t : Sm90Tiles::configurations()) kernels.push_back(Conv2dBnSiluGemmTmaForward(t, hopper).kernel());
    return kernels;
}

/// A Hopper conv op taking attributes (the implicit GEMMs), for every Hopper tile configuration.
template <class Op>
std::vector<Kernel> hopper_conv_configurations() {
    std::vector<Kernel> kernels;
    for (const auto& t : Sm90Tiles::configurations()) kernels.push_back(Op(t, three_by_three, hopper).kernel());
    return kernels;
}

std::vector<Kernel> implicit_gemm_configurations() {
    std::vector<Kernel> kernels;
    for (const auto& t : GemmTiles::configurations())
        kernels.push_back(Conv2dBnSiluForward(t, three_by_three).kernel());
    return kernels;
}

std::vector<Kernel> direct_configurations() {
    std::vector<Kernel> kernels;
    for (const auto& t : Conv2dBnSiluDirectForward::configurations())
        kernels.push_back(
            Conv2dBnSiluDirectForward(t.block_oc, t.block_ow, three_by_three, {1, 64, 56, 56, 64}).kernel());
    return kernels;
}

/// Kernel size, stride, padding and group width are the depthwise kernel's constants: every tile
/// configuration for the filters networks use most (MobileNet's 3×3, strides 1 and 2; ConvNeXt's
/// 7×7), and for ResNeXt-50's narrow groups (3×3, strides 1 and 2, 4, 8 and 16 channels a group)
/// the tiles whose windows fit in 48 KB. Others compile on first use.
std::vector<Kernel> depthwise_configurations() {
    const Conv2dAttrs three_by_three_s2{
        .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    std::vector<Kernel> kernels;
    for (const Conv2dAttrs& a :
         {three_by_three, three_by_three_s2, Conv2dAttrs{.kernel_h = 7, .kernel_w = 7, .pad_h = 3, .pad_w = 3}})
        for (const auto& t : DepthwiseTiles::configurations())
            kernels.push_back(Conv2dBnSiluDepthwiseForward(t, a).kernel());
    for (const Conv2dAttrs& a : {three_by_three, three_by_three_s2})
        for (const int width : {4, 8, 16})
            for (const auto& t : DepthwiseTiles::configurations())
                if (t.shared_bytes(a, width) <= 48 * 1024)
                    kernels.push_back(Conv2dBnSiluDepthwiseForward(t, a, {.in = width, .out = width}).kernel());
    return kernels;
}

/// The attention kernels of one mainloop for each dtype, head dim, causality and tile shape:
/// sizes are run-time arguments.
template <bool SM90>
std::vector<Kernel> attention_configurations() {
    std::vector<Kernel> kernels;
    for (const Scalar dtype : {Scalar::f16, Scalar::bf16})
        for (const int head_dim : {64, 96, 128})
            for (const bool causal : {false, true})
                for (const auto& t : AttentionTiles::configurations())
                    if (t.sm90 == SM90 && t.unsupported_reason(head_dim).empty())
                        kernels.push_back(AttentionForwardOp(dtype, head_dim, causal, t).kernel());
    return kernels;
}

/// Split-KV's combine for each dtype and head dim.
std::vector<Kernel> attention_combine_configurations() {
    std::vector<Kernel> kernels;
    for (const Scalar dtype : {Scalar::f16, Scalar::bf16})
        for (const int head_dim : {64, 96, 128}) kernels.push_back(attention_combine_kernel(dtype, head_dim));
    return kernels;
}

/// A cast between each pair of f32, f16 and bf16.
std::vector<Kernel> cast_configurations() {
    std::vector<Kernel> kernels;
    for (const Scalar from : {Scalar::f32, Scalar::f16, Scalar::bf16})
        for (const Scalar to : {Scalar::f32, Scalar::f16, Scalar::bf16})
            if (from != to) kernels.push_back(CastOp(from, to).kernel());
    return kernels;
}

/// One configuration each: the elementwise ops take every size at run time.
template <class Op, auto... Args>
std::vector<Kernel> single_configuration() {
    return {Op(Args...).kernel()};
}

const KernelFamily families[] = {
    {"axpby", "y = alpha*x + beta*y over n elements (f32, i32)", axpby_configurations},
    {"conv2d_bn_silu_gemm_forward", "1x1 Conv2d + BatchNorm + SiLU as a TF32 tensor-core GEMM", gemm_configurations},
    {"conv2d_bn_silu_gemm_tma_forward", "the same on Hopper: TMA + wgmma, warp-specialised, persistent (sm_90a only)",
     tma_gemm_configurations},
    {"conv2d_bn_silu_forward", "Conv2d (any size, stride, padding, groups) + BatchNorm + SiLU as an implicit TF32 GEMM",
     implicit_gemm_configurations},
    {"conv2d_bn_silu_tma_forward", "the same on Hopper: TMA patch boxes + wgmma, warp-specialised (sm_90a only)",
     hopper_conv_configurations<Conv2dBnSiluTmaForward>},
    {"conv2d_bn_silu_gather_tma_forward",
     "the same for images TMA cannot box (7x7, 14x14): x gathered by cp.async, W by TMA, + wgmma (sm_90a only)",
     hopper_conv_configurations<Conv2dBnSiluGatherTmaForward>},
    {"conv2d_bn_silu_nhwc_tma_forward",
     "the same on channels-last tensors: im2col TMA boxes, both wgmma operands from shared memory (sm_90a only)",
     hopper_conv_configurations<Conv2dBnSiluNhwcTmaForward>},
    {"conv2d_bn_silu_depthwise_forward",
     "depthwise and narrow-group Conv2d + BatchNorm + SiLU in fp32 at memory speed (3x3 s1/s2 and 7x7 listed, "
     "and ResNeXt's 3x3 groups of 4, 8 and 16; any filter and group of up to 32 on use)",
     depthwise_configurations},
    {"conv2d_bn_silu_direct_forward",
     "Conv2d + BatchNorm + SiLU computed directly in fp32 (grouped layers the other kernels leave)",
     direct_configurations},
    {"flash_attention2_forward",
     "fused attention forward (FlashAttention-2: online softmax, causal or not, grouped-query), f16 and bf16, head "
     "dim 64, 96 and 128 (mma.sync, sm_80+)",
     attention_configurations<false>},
    {"flash_attention2_forward_sm90",
     "the same on Hopper: TMA, warp-specialised, both matmuls on wgmma, head dim 64 and 128 (sm_90a only)",
     attention_configurations<true>},
    {"flash_attention2_combine", "split-KV attention's second step: each row's key shares added up by their LSE",
     attention_combine_configurations},
    {"add", "y = a + b (residual connections)", single_configuration<AddOp>},
    {"concat_channels", "one input of a concatenation along channels", single_configuration<ConcatChannelsOp, 1>},
    {"maxpool2d", "max pooling, any window, stride and padding", single_configuration<MaxPool2dOp, 5, 1, 2>},
    {"maxpool2d_chain", "size-keeping max pools applied to their own output, every result written (YOLO's SPPF)",
     single_configuration<MaxPool2dChainOp, 5, 3>},
    {"upsample_nearest2d", "nearest-neighbour upsampling by 2", single_configuration<UpsampleNearest2dOp, 2>},
    {"cast", "y = x in another element type: f32, f16 or bf16, rounded to nearest even", cast_configurations},
};

/// Whether `given` (a -D value) names constant c's value.
bool same_value(const Constant& c, std::string_view given) {
    if (given == value_text(c)) return true;
    if (const auto* flag = std::get_if<bool>(&c.value)) return given == (*flag ? "1" : "0");
    if (const auto* number = std::get_if<std::int64_t>(&c.value)) {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(given.data(), given.data() + given.size(), v);
        return ec == std::errc{} && end == given.data() + given.size() && v == *number;
    }
    return false;
}

}  // namespace

std::span<const KernelFamily> shipped_kernels() { return families; }

Kernel find_shipped_kernel(std::string_view name, std::span<const std::pair<std::string, std::string>> constants) {
    const auto family = std::find_if(std::begin(families), std::end(families),
                                     [&](const KernelFamily& f) { return f.name == name; });
    if (family == std::end(families)) {
        std::vector<std::string_view> names;
        for (const auto& f : families) names.push_back(f.name);
        throw UsageError(fmt::format("unknown kernel '{}': kjit ships {}", name, fmt::join(names, ", ")));
    }
    const auto configurations = family->configurations();
    const auto& declared = configurations.front().constants();
    std::set<std::string> given;
    for (const auto& entry : constants) {
        const std::string& constant = entry.first;
        if (std::none_of(declared.begin(), declared.end(), [&](const Constant& c) { return c.name == constant; })) {
            std::vector<std::string> names;
            for (const auto& c : declared) names.push_back(c.name);
            throw UsageError(fmt::format("kernel {} has no constant '{}': its constants are {}", name, constant,
                                         fmt::join(names, ", ")));
        }
        if (!given.insert(constant).second)
            throw UsageError(fmt::format("constant {} is given twice: give each constant once", constant));
    }
    // How many of a configuration's constants the given ones match (by value: 064 is 64, and a
    // flag is true/false or 1/0).
    const auto matches = [&](const Kernel& k) {
        return std::count_if(k.constants().begin(), k.constants().end(), [&](const Constant& c) {
            return std::any_of(constants.begin(), constants.end(),
                               [&](const auto& g) { return g.first == c.name && same_value(c, g.second); });
        });
    };
    const auto text = [](const Kernel& k, std::string_view prefix) {
        std::vector<std::string> parts;
        for (const auto& c : k.constants()) parts.push_back(fmt::format("{}{}={}", prefix, c.name, value_text(c)));
        return fmt::format("{}", fmt::join(parts, " "));
    };
    std::vector<std::string> missing;
    for (const auto& c : declared)
        if (!given.contains(c.name)) missing.push_back(c.name);
    if (!missing.empty())
        throw UsageError(fmt::format("{} {} of kernel {} {} missing: give each with -D NAME=VALUE, e.g. {}",
                                     missing.size() == 1 ? "constant" : "constants", fmt::join(missing, ", "), name,
                                     missing.size() == 1 ? "is" : "are", text(configurations.front(), "-D ")));
    // Each configuration scored once: the one all of whose constants match, else the nearest
    // (most constants alike) first.
    std::vector<std::pair<long, const Kernel*>> nearest;
    for (const auto& k : configurations) {
        const long alike = matches(k);
        if (alike == static_cast<long>(k.constants().size())) return k;
        nearest.emplace_back(alike, &k);
    }
    std::ranges::stable_sort(nearest, std::greater<>{}, &std::pair<long, const Kernel*>::first);
    constexpr std::size_t shown = 12;
    std::vector<std::string> valid;
    for (std::size_t i = 0; i < std::min(shown, nearest.size()); ++i) valid.push_back(text(*nearest[i].second, ""));
    throw UsageError(fmt::format(
        "those constants are not a valid configuration of {}; the {} nearest of its {} valid ones:\n  {}{}", name,
        valid.size(), configurations.size(), fmt::join(valid, "\n  "),
        nearest.size() > shown ? "\n(kjit warm --kernel NAME builds every one; kjit cache ls lists them)" : ""));
}

}  // namespace kjit
