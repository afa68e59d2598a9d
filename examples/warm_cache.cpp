// Compiles every shipped kernel configuration into the kernel cache and prints what happened.
//   warm_cache [ARCH]     ARCH defaults to the local GPU's, or sm_90 where there is none.
// Run it twice: the second run is all cache hits.
#include <algorithm>
#include <cstdio>
#include <future>
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
        for (auto& k : family.configurations()) kernels.push_back(std::move(k));

    auto& runtime = kjit::Runtime::global();
    fmt::print("kjit: cache {}\nkjit: compiling {} kernels for {} ({}) with NVRTC {}\n\n", runtime.cache().path().string(),
               kernels.size(), options.arch.name(), where, kjit::nvrtc_version());

    // Compile in parallel: NVRTC runs are independent.
    std::vector<std::future<kjit::CompileResult>> results;
    for (const auto& k : kernels)
        results.push_back(std::async(std::launch::async, [&, k] { return runtime.compile(k, options); }));

    std::size_t width = 9;
    for (const auto& k : kernels) width = std::max(width, k.id().size());
    fmt::print("{:<{}}  {:<7}  {:>10}  {:>9}\n", "kernel id", width, "arch", "compile", "registers");
    int failed = 0;
    for (std::size_t i = 0; i < kernels.size(); ++i) {
        try {
            const auto r = results[i].get();
            const auto when = r.origin == kjit::Origin::compiled ? fmt::format("{:.1f} ms", r.entry->compiled.compile_ms)
                                                                  : std::string("hit");
            fmt::print("{:<{}}  {:<7}  {:>10}  {:>9}\n", kernels[i].id(), width, r.entry->arch, when,
                       r.entry->compiled.resources.registers);
        } catch (const kjit::Error& e) {
            ++failed;
            fmt::print(stderr, "{}: {}\n", kernels[i].id(), e.what());
        }
    }
    const auto stats = runtime.stats();
    fmt::print("\n{} compiled, {} from the cache, {} failed{}\n", stats.compiles, stats.cache_hits, failed,
               runtime.cache().persistent() ? "" : " (cache not writable: nothing was saved)");
    return failed ? 1 : 0;
} catch (const kjit::Error& e) {
    std::fprintf(stderr, "warm_cache: %s\n", e.what());
    return 2;
}
