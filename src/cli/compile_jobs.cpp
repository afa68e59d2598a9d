// Every configuration of the shipped kernel families, compiled for each arch on all cores: what
// `kjit warm` stores and `kjit check --compile-only` inspects.
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>

#include "cli.hpp"

namespace kjit::cli {

CompileJobs compile_jobs(std::span<const std::string> families, std::span<const Arch> archs) {
    for (const auto& name : families)
        if (std::none_of(shipped_kernels().begin(), shipped_kernels().end(),
                         [&](const KernelFamily& f) { return f.name == name; }))
            (void)find_shipped_kernel(name, {});  // throws: unknown kernel, listing the shipped ones
    CompileJobs out;
    for (const auto& family : shipped_kernels()) {
        if (!families.empty() && std::find(families.begin(), families.end(), family.name) == families.end()) continue;
        for (auto& k : family.configurations()) out.kernels.push_back(std::move(k));
    }
    // Arch-specific kernels (sm_90a) are built only for their arch's devices.
    for (const auto& arch : archs)
        for (const auto& k : out.kernels)
            if (k.runs_on(arch)) out.jobs.push_back({&k, k.target(arch)});
            else ++out.other_arch;
    return out;
}

std::size_t compile_in_parallel(Runtime& rt, std::span<const CompileJob> jobs, unsigned threads,
                                const std::function<void(const CompileOutcome&)>& done) {
    std::mutex mutex;
    // Kernels another live process is compiling now (its claim stands) wait until every other
    // one is done, then their entries are waited for (or a claim whose owner died or expired is
    // taken over).
    std::vector<const CompileJob*> deferred;
    std::atomic<std::size_t> next{0};
    auto run = [&](std::span<const CompileJob* const> queue, bool wait) {
        next = 0;
        std::vector<std::thread> workers(std::max(1u, std::min<unsigned>(threads, queue.size())));
        for (auto& worker : workers)
            worker = std::thread([&] {
                for (std::size_t i; (i = next++) < queue.size();) {
                    const CompileJob& job = *queue[i];
                    CompileOutcome outcome{&job, std::nullopt, {}};
                    try {
                        const CompileOptions options{.arch = job.arch};
                        outcome.result = wait ? std::optional(rt.compile(*job.kernel, options))
                                              : rt.try_compile(*job.kernel, options);
                        if (!outcome.result) {
                            std::lock_guard lock(mutex);
                            deferred.push_back(&job);
                            continue;
                        }
                    } catch (const Error& e) {
                        outcome.error = e.what();
                    }
                    std::lock_guard lock(mutex);
                    done(outcome);
                }
            });
        for (auto& w : workers) w.join();
        return workers.size();
    };
    std::vector<const CompileJob*> all;
    for (const CompileJob& job : jobs) all.push_back(&job);
    const std::size_t used = run(all, false);
    if (!deferred.empty()) {
        fmt::print(stderr,
                   "\nkjit: {} kernel{} being compiled by another process sharing {}: waiting for {} (a claim is "
                   "taken over when its process dies, or after 10 minutes)\n",
                   deferred.size(), deferred.size() == 1 ? " is" : "s are", rt.cache().path().string(),
                   deferred.size() == 1 ? "it" : "them");
        const std::vector<const CompileJob*> waiting = std::exchange(deferred, {});
        run(waiting, true);
    }
    return used;
}

}  // namespace kjit::cli
