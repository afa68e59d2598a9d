// The shipped kernels and their valid configurations: the list warm-up and tests iterate.
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

const KernelFamily families[] = {
    {"axpby", "y = alpha*x + beta*y over n elements (f32, i32)", axpby_configurations},
};

}  // namespace

std::span<const KernelFamily> shipped_kernels() { return families; }

}  // namespace kjit
