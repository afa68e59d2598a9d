// The shipped kernels and their valid configurations: the list warm-up and tests iterate.
#include <kjit/conv.hpp>
#include <kjit/registry.hpp>

namespace kjit {
namespace {

/// y ← α·x + β·y (kernels_src/axpby.cu) for each element type and items per thread.
std::vector<Kernel> axpby_configurations() {
    std::vector<Kernel> kernels;
    for (Scalar t : {Scalar::f32, Scalar::i32})
        for (std::int64_t items : {1, 4}) {
            constexpr std::int64_t block = 256;
            kernels.emplace_back(KernelSpec{
                "axpby",
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
        kernels.push_back(Conv2dBnSiluGemmForward(t.block_m, t.block_n, t.block_k, t.group_m));
    return kernels;
}

std::vector<Kernel> implicit_gemm_configurations() {
    std::vector<Kernel> kernels;
    for (const auto& t : GemmTiles::configurations()) kernels.push_back(Conv2dBnSiluForward(t, three_by_three));
    return kernels;
}

std::vector<Kernel> direct_configurations() {
    std::vector<Kernel> kernels;
    for (const auto& t : Conv2dBnSiluDirectForward::configurations())
        kernels.push_back(Conv2dBnSiluDirectForward(t.block_oc, t.block_ow, three_by_three, {1, 64, 56, 56, 64}));
    return kernels;
}

const KernelFamily families[] = {
    {"axpby", "y = alpha*x + beta*y over n elements (f32, i32)", axpby_configurations},
    {"conv2d_bn_silu_gemm_forward", "1x1 Conv2d + BatchNorm + SiLU as a TF32 tensor-core GEMM", gemm_configurations},
    {"conv2d_bn_silu_forward",
     "Conv2d (any size, stride, padding, groups) + BatchNorm + SiLU as an implicit TF32 GEMM",
     implicit_gemm_configurations},
    {"conv2d_bn_silu_direct_forward", "Conv2d + BatchNorm + SiLU computed directly in fp32 (depthwise, narrow groups)",
     direct_configurations},
};

}  // namespace

std::span<const KernelFamily> shipped_kernels() { return families; }

}  // namespace kjit
