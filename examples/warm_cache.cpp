// Compiles every shipped kernel configuration into the kernel cache and prints what happened.
//   warm_cache [ARCH]     ARCH defaults to the local GPU's, or sm_90 where there is none.
// Run it twice: the second run is all cache hits.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <kjit/kjit.hpp>

int main(int argc, char** argv) try {
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        std::fprintf(stderr, "usage: %s [ARCH]   (e.g. sm_90; default: the local GPU's arch, else sm_90)\n", argv[0]);
        return 2;
    }
    kjit::CompileOptions options;
    std::string where = "given";
    if (argc == 2) {
        options.arch = kjit::Arch::parse(argv[1]);
    } else if (kjit::device_count() > 0) {
        const auto device = kjit::Device::get(0);
        options.arch = device.arch();
        where = device.name();
    } else {
        options.arch = kjit::Arch(9, 0);
        where = "no GPU here: default";
    }

    std::vector<kjit::Kernel> kernels;
    for (const auto& family : kjit::shipped_kernels())
        for (auto& k : family.configurations())  // an arch-specific kernel (sm_90a) only for its arch
            if (k.runs_on(options.arch)) kernels.push_back(std::move(k));

    auto& runtime = kjit::Runtime::global();
    fmt::print("kjit: cache {}\nkjit: compiling {} kernels for {} ({}) with NVRTC {}\n\n",
               runtime.cache().path().string(), kernels.size(), options.arch.name(), where, kjit::nvrtc_version());

    // Compile in parallel, one NVRTC run per core: they are independent.
    std::vector<std::optional<kjit::CompileResult>> results(kernels.size());
    std::vector<std::string> errors(kernels.size());
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> workers(std::max(1u, std::thread::hardware_concurrency()));
    for (auto& worker : workers)
        worker = std::thread([&] {
            for (std::size_t i; (i = next++) < kernels.size();) try {
                    auto own = options;  // sm_90 → sm_90a for an arch-specific kernel
                    own.arch = kernels[i].target(options.arch);
                    results[i] = runtime.compile(kernels[i], own);
                } catch (const kjit::Error& e) {
                    errors[i] = e.what();
                }
        });
    for (auto& worker : workers) worker.join();

    std::size_t width = 9;
    for (const auto& k : kernels) width = std::max(width, k.id().size());
    fmt::print("{:<{}}  {:<7}  {:>10}  {:>9}\n", "kernel id", width, "arch", "compile", "registers");
    int failed = 0;
    for (std::size_t i = 0; i < kernels.size(); ++i) {
        if (!results[i]) {
            ++failed;
            fmt::print(stderr, "{}: {}\n", kernels[i].id(), errors[i]);
            continue;
        }
        const auto& r = *results[i];
        const auto when = r.origin == kjit::Origin::compiled ? fmt::format("{:.1f} ms", r.entry->compiled.compile_ms)
                                                             : std::string("hit");
        fmt::print("{:<{}}  {:<7}  {:>10}  {:>9}\n", kernels[i].id(), width, r.entry->arch, when,
                   r.entry->compiled.resources.registers);
    }
    const auto stats = runtime.stats();
    fmt::print("\n{} compiled, {} from the cache, {} failed{}\n", stats.compiles, stats.cache_hits, failed,
               runtime.cache().persistent() ? "" : " (cache not writable: nothing was saved)");
    return failed ? 1 : 0;
} catch (const kjit::Error& e) {
    std::fprintf(stderr, "warm_cache: %s\n", e.what());
    return 2;
}
