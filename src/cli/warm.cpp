// kjit warm: every shipped kernel × every valid configuration × each arch into the cache.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct WarmOptions {
    Common common;
    std::vector<std::string> archs;
    std::vector<std::string> kernels;
    unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
};

int warm(const WarmOptions& o) {
    std::vector<Arch> archs;
    for (const auto& a : o.archs) archs.push_back(Arch::parse(a));
    if (archs.empty()) archs.push_back(local_arch_or_explain("compile"));

    std::vector<Kernel> kernels;
    for (const auto& family : shipped_kernels()) {
        if (!o.kernels.empty() && std::find(o.kernels.begin(), o.kernels.end(), family.name) == o.kernels.end())
            continue;
        for (auto& k : family.configurations()) kernels.push_back(std::move(k));
    }
    for (const auto& name : o.kernels)
        if (std::none_of(shipped_kernels().begin(), shipped_kernels().end(),
                         [&](const KernelFamily& f) { return f.name == name; }))
            (void)find_shipped_kernel(name, {});  // throws: unknown kernel, listing the shipped ones
    struct Job {
        const Kernel* kernel;
        Arch arch;
    };
    std::vector<Job> jobs;
    std::size_t other_arch = 0;  // arch-specific kernels (sm_90a) are built only for their arch's devices
    for (const auto& arch : archs)
        for (const auto& k : kernels)
            if (k.runs_on(arch)) jobs.push_back({&k, k.target(arch)});
            else ++other_arch;

    Runtime& rt = runtime(o.common);
    const bool tty = isatty(STDOUT_FILENO) && !o.common.json;
    std::atomic<std::size_t> next{0}, done{0}, compiled{0}, cached{0};
    std::mutex out;
    std::vector<std::string> failed;
    const auto started = std::chrono::steady_clock::now();
    auto report = [&](const Job& job, const std::string& what) {
        std::lock_guard lock(out);
        const std::size_t n = ++done;
        if (o.common.json) return;
        if (tty) {
            constexpr int width = 40;
            const int filled = static_cast<int>(width * n / jobs.size());
            fmt::print("\r[{:=<{}}{:<{}}] {}/{} {:<60.60}", "", filled, "", width - filled, n, jobs.size(),
                       job.kernel->id());
            std::fflush(stdout);
        } else {
            // Flushed a line at a time: a pipe (`kjit warm | tee log`) sees each as it finishes,
            // and a killed warm leaves every line it got to.
            fmt::print("{:<50} {:<7} {}\n", job.kernel->id(), job.arch.name(), what);
            std::fflush(stdout);
        }
    };
    // Kernels another live process is compiling now (its claim stands) wait until every other
    // one is done, then this warm waits for their entries (or takes over a claim whose owner
    // died or expired).
    std::vector<const Job*> deferred;
    auto run = [&](std::span<const Job* const> queue, bool wait) {
        next = 0;
        std::vector<std::thread> workers(std::max(1u, std::min<unsigned>(o.jobs, queue.size())));
        for (auto& worker : workers)
            worker = std::thread([&] {
                for (std::size_t i; (i = next++) < queue.size();) {
                    const Job& job = *queue[i];
                    try {
                        const CompileOptions options{.arch = job.arch};
                        const auto r = wait ? std::optional(rt.compile(*job.kernel, options))
                                            : rt.try_compile(*job.kernel, options);
                        if (!r) {
                            std::lock_guard lock(out);
                            deferred.push_back(&job);
                            continue;
                        }
                        if (r->origin == Origin::compiled) ++compiled;
                        else ++cached;
                        report(job, fmt::format("{:>10}  {:>3} registers",
                                                r->origin == Origin::compiled
                                                    ? fmt::format("{:.0f} ms", r->entry->compiled.compile_ms)
                                                    : std::string("hit"),
                                                r->entry->compiled.resources.registers));
                    } catch (const Error& e) {
                        {
                            std::lock_guard lock(out);
                            failed.push_back(fmt::format("{} ({}): {}", job.kernel->id(), job.arch.name(), e.what()));
                        }
                        report(job, "FAILED");
                    }
                }
            });
        for (auto& w : workers) w.join();
        return workers.size();
    };
    std::vector<const Job*> all;
    for (const Job& job : jobs) all.push_back(&job);
    const std::size_t threads = run(all, false);
    if (!deferred.empty()) {
        if (tty) fmt::print("\n");
        fmt::print(stderr,
                   "kjit: {} kernel{} being compiled by another process sharing {}: waiting for {} (a claim is "
                   "taken over when its process dies, or after 10 minutes)\n",
                   deferred.size(), deferred.size() == 1 ? " is" : "s are", rt.cache().path().string(),
                   deferred.size() == 1 ? "it" : "them");
        const std::vector<const Job*> waiting = std::exchange(deferred, {});
        run(waiting, true);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (tty) fmt::print("\n");
    // A warm ships what is in the file: where the cache fell back to memory, count what the file
    // holds of what this warm produced.
    Cache& cache = rt.cache();
    const std::size_t produced = compiled + cached;
    std::size_t stored = produced;
    if (!cache.persistent()) {
        std::vector<CacheKey> keys;
        for (const Job& job : jobs) keys.push_back(job.kernel->key(CompileOptions{.arch = job.arch}));
        stored = cache.count_stored(keys);
    }
    const std::vector<std::string> incidents = cache.incidents();
    if (o.common.json) {
        nlohmann::json j{{"compiled", compiled.load()},
                         {"cached", cached.load()},
                         {"stored", stored},
                         {"failed", failed},
                         {"other_arch", other_arch},
                         {"seconds", seconds},
                         {"jobs", threads},
                         {"cache", cache.path().string()}};
        fmt::print("{}\n", j.dump(2));
    } else {
        for (const auto& f : failed) fmt::print(stderr, "kjit: failed: {}\n", f);
        fmt::print("{} compiled, {} already cached, {} failed in {:.1f} s ({} jobs){}\n", compiled.load(),
                   cached.load(), failed.size(), seconds, threads,
                   stored == produced ? " into " + cache.path().string()
                                      : fmt::format("; {} of them stored in {}", stored, cache.path().string()));
        if (other_arch)
            fmt::print(
                "{} arch-specific configurations skipped: they are built only for their own arch (sm_90a for "
                "9.0 devices)\n",
                other_arch);
    }
    if (stored < produced) {
        fmt::print(stderr,
                   "kjit: only {} of the {} kernels this warm produced are stored in {} ({}); the rest were kept in "
                   "memory and are lost at exit. Fix the cache (its path, permissions, space) and warm again\n",
                   stored, produced, cache.path().string(),
                   incidents.empty() ? std::string("see the warning above") : incidents.back());
        return stored == 0 ? usage : failure;  // 2: the cache is unusable; 1: partly stored
    }
    return failed.empty() ? ok : failure;
}

}  // namespace

void add_warm(CLI::App& app, int& exit_code) {
    auto* sub = app.add_subcommand("warm",
                                   "Compile every shipped kernel and valid configuration into the cache "
                                   "(needs no GPU)");
    static WarmOptions o;
    add_common_options(*sub, o.common, true);
    sub->add_option("--arch", o.archs, "Target arch, e.g. sm_90 (repeatable; default: the local GPU's)");
    sub->add_option("--kernel", o.kernels, "Only this kernel family (repeatable)");
    sub->add_option("-j,--jobs", o.jobs, "Parallel compiles (default: the core count)")->check(positive_int);
    sub->callback([&exit_code] { exit_code = warm(o); });
}

}  // namespace kjit::cli
