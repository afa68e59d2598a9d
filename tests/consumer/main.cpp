// Compiles a shipped kernel through an installed kjit: the package, headers and the embedded
// kernel sources all work without kjit's source tree.
#include <cstdio>

#include <kjit/kjit.hpp>

int main() {
    for (const auto& family : kjit::shipped_kernels()) {
        const auto kernel = family.configurations().front();
        // An arch-specific kernel (sm_90a) compiles for its own target on a 9.0 device.
        const auto target = kernel.target(kjit::Arch::parse("sm_90"));
        const auto compiled = kjit::compile(kernel, kjit::CompileOptions{.arch = target});
        std::printf("%s: %zu bytes of cubin, %d registers\n", kernel.id().c_str(), compiled.cubin.size(),
                    compiled.resources.registers);
        if (compiled.cubin.empty()) return 1;
    }
    return 0;
}
