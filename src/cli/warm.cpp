// kjit warm: every shipped kernel × every valid configuration × each arch into the cache — or,
// with --graph, exactly the kernels a model runs (and its layers' tuned winners').
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <set>
#include <thread>

#include <kjit/model.hpp>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct WarmOptions {
    Common common;
    std::vector<std::string> archs;
    std::vector<std::string> kernels;
    unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
    std::string graph;
    std::vector<int> batches{1};
    std::string shard;  ///< "I/N": only the I-th of N slices of the work
};

/// The I-th (1-based) of N slices of `work`, for N build boxes warming one remote cache: every box
/// orders the list alike (by kernel id, then arch) and takes every N-th job from its own start.
void keep_shard(CompileJobs& work, std::string_view shard) {
    unsigned index = 0, count = 0;
    const auto slash = shard.find('/');
    const auto number = [](std::string_view text, unsigned& out) {
        return !text.empty() &&
               std::from_chars(text.data(), text.data() + text.size(), out).ptr == text.data() + text.size();
    };
    if (slash == std::string_view::npos || !number(shard.substr(0, slash), index) ||
        !number(shard.substr(slash + 1), count) || count == 0 || index == 0 || index > count)
        throw UsageError(
            fmt::format("--shard {}: write I/N with 1 <= I <= N, e.g. --shard 2/4 on the second of four "
                        "build boxes",
                        shard));
    std::ranges::sort(work.jobs, [](const CompileJob& a, const CompileJob& b) {
        return std::pair(a.kernel->id(), a.arch.name()) < std::pair(b.kernel->id(), b.arch.name());
    });
    std::vector<CompileJob> mine;
    for (std::size_t i = index - 1; i < work.jobs.size(); i += count) mine.push_back(work.jobs[i]);
    work.jobs = std::move(mine);
}

/// The kernels a graph runs at each batch size on each arch's usual part (planning_device): each
/// node's launches (none for a concat, a fused add or a chained node), and for its conv and
/// attention layers every configuration a stored tuned winner names for that arch whose kernel
/// source is still the one it was timed with (whichever device and driver it was timed on: a
/// build box warms for the fleet).
CompileJobs graph_compile_jobs(const WarmOptions& o, std::span<const Arch> archs, Cache& cache) {
    const std::string graph = read_option_file(o.graph, "--graph");
    const std::vector<TunedConfig> winners = tuned_configs(cache);
    CompileJobs out;
    std::vector<std::pair<Kernel, Arch>> wanted;
    std::set<std::pair<std::string, std::string>> seen;  // (kernel id, arch)
    const auto want = [&](const Kernel& k, Arch arch) {
        if (!k.runs_on(arch)) {
            ++out.other_arch;
            return;
        }
        if (seen.emplace(k.id(), arch.name()).second) wanted.emplace_back(k, arch);
    };
    const auto want_op = [&](const RuntimeOp& op, Arch arch) {
        for (std::size_t l = 0; l < op.n_launches(); ++l) want(op.kernel_for_launch(l), arch);
    };
    for (const Arch arch : archs) {
        const DeviceTraits device = planning_device(arch.name(), 0, 0).first;
        for (const int batch : o.batches) {
            const ModelPlan plan = ModelPlan::from_json(graph, batch, device);
            for (const Kernel* k : plan.kernels()) want(*k, arch);
            for (const auto& [node, l] : plan.conv_layers()) {
                const std::string key = conv2d_problem_key(l.attrs, l.shape);
                for (const TunedConfig& w : winners) {
                    if (w.kernel != conv2d_tuned_family(Conv2dLayout::nchw) || w.shape != key ||
                        w.arch != device.arch.name())
                        continue;
                    try {
                        const auto op = make_conv2d_bn_silu(l.attrs, l.shape, w.config, device);
                        if (op->kernel().source_hash() == w.source_hash) want_op(*op, arch);
                    } catch (const UsageError&) {
                        // a winner this layer no longer takes: dispatch passes it by too
                    }
                }
            }
            for (const auto& [node, shape] : plan.attention_layers()) {  // attention's winners the same way
                const auto& attention = dynamic_cast<const AttentionForwardOp&>(*plan.nodes()[node].op);
                const std::string key = attention_tuning_key(shape, attention.layout());
                for (const TunedConfig& w : winners) {
                    if (w.kernel != attention_family || w.shape != key || w.arch != device.arch.name()) continue;
                    try {
                        const auto op = attention.with_tiles(parse_attention_config(w.config));
                        if (op->kernel().source_hash() == w.source_hash) want_op(*op, arch);
                    } catch (const UsageError&) {
                        // a winner no kernel takes any more: pick_attention passes it by too
                    }
                }
            }
        }
    }
    out.kernels.reserve(wanted.size());
    for (auto& [k, arch] : wanted) out.kernels.push_back(std::move(k));
    for (std::size_t i = 0; i < wanted.size(); ++i)
        out.jobs.push_back({&out.kernels[i], out.kernels[i].target(wanted[i].second)});
    return out;
}

int warm(const WarmOptions& o) {
    std::vector<Arch> archs;
    for (const auto& a : o.archs) archs.push_back(Arch::parse(a));
    if (archs.empty()) archs.push_back(local_arch_or_explain("compile"));
    if (!o.graph.empty() && !o.kernels.empty())
        throw UsageError("--graph warms the kernels a model runs; --kernel warms a family: give one of them");
    CompileJobs work = o.graph.empty() ? compile_jobs(o.kernels, archs)
                                       : graph_compile_jobs(o, archs, runtime(o.common).cache());
    if (!o.shard.empty()) keep_shard(work, o.shard);
    const auto& jobs = work.jobs;
    const std::size_t other_arch = work.other_arch;

    Runtime& rt = runtime(o.common);
    const bool tty = isatty(STDOUT_FILENO) && !o.common.json;
    std::size_t done = 0, compiled = 0, cached = 0, fetched = 0;
    std::vector<std::string> failed;
    const auto started = std::chrono::steady_clock::now();
    auto report = [&](const CompileJob& job, const std::string& what) {
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
    const std::size_t threads = compile_in_parallel(rt, jobs, o.jobs, [&](const CompileOutcome& c) {
        if (!c.result) {
            failed.push_back(fmt::format("{} ({}): {}", c.job->kernel->id(), c.job->arch.name(), c.error));
            report(*c.job, "FAILED");
            return;
        }
        const auto& r = *c.result;
        ++(r.origin == Origin::compiled ? compiled : r.origin == Origin::remote ? fetched : cached);
        report(*c.job, fmt::format("{:>10}  {:>3} registers",
                                   r.origin == Origin::compiled ? fmt::format("{:.0f} ms", r.entry->compiled.compile_ms)
                                   : r.origin == Origin::remote ? std::string("remote hit")
                                                                : std::string("hit"),
                                   r.entry->compiled.resources.registers));
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (tty) fmt::print("\n");
    // What this warm compiled is written to a read-write remote before the warm reports.
    RemoteCache* remote = rt.remote();
    if (remote) rt.settle_remote(std::chrono::minutes(1));
    const RemoteCounters remote_counts = remote ? remote->counters() : RemoteCounters{};
    const bool publishing = remote && remote->options().mode == RemoteMode::read_write;
    // A warm ships what is in the file: where the cache fell back to memory, count what the file
    // holds of what this warm produced.
    Cache& cache = rt.cache();
    const std::size_t produced = compiled + cached + fetched;
    std::size_t stored = produced;
    if (!cache.persistent()) {
        std::vector<CacheKey> keys;
        for (const CompileJob& job : jobs) keys.push_back(job.kernel->key(CompileOptions{.arch = job.arch}));
        stored = cache.count_stored(keys);
    }
    const std::vector<std::string> incidents = cache.incidents();
    if (o.common.json) {
        nlohmann::json j{
            {"compiled", compiled},        {"cached", cached},   {"stored", stored}, {"failed", failed},
            {"other_arch", other_arch},    {"seconds", seconds}, {"jobs", threads},  {"cache", cache.path().string()},
            {"jobs_in_shard", jobs.size()}};
        if (remote)
            j["remote"] = {{"address", remote->describe()},
                           {"fetched", fetched},
                           {"published", remote_counts.published},
                           {"errors", remote_counts.errors + remote_counts.timeouts},
                           {"rejected", remote_counts.rejected}};
        fmt::print("{}\n", j.dump(2));
    } else {
        for (const auto& f : failed) fmt::print(stderr, "kjit: failed: {}\n", f);
        fmt::print("{} compiled, {}{} already cached, {} failed in {:.1f} s ({} jobs){}\n", compiled,
                   remote ? fmt::format("{} from the remote, ", fetched) : "", cached, failed.size(), seconds, threads,
                   stored == produced ? " into " + cache.path().string()
                                      : fmt::format("; {} of them stored in {}", stored, cache.path().string()));
        if (publishing) fmt::print("published {} to {}\n", remote_counts.published, remote->describe());
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
    if (publishing && remote_counts.published < compiled) {
        fmt::print(stderr,
                   "kjit: only {} of the {} kernels compiled here reached the remote cache {} ({} errors, {} "
                   "time-outs; see the warning above): warm again, or `kjit cache push` once it answers\n",
                   remote_counts.published, compiled, remote->describe(), remote_counts.errors, remote_counts.timeouts);
        return failure;
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
    sub->add_option("--graph", o.graph,
                    "Only the kernels this graph runs (docs/MODEL.md), and its layers' tuned winners'")
        ->check(CLI::ExistingFile);
    sub->add_option("--batch", o.batches, "With --graph: the batch sizes it runs at (repeatable; default 1)")
        ->check(positive_int);
    sub->add_option("-j,--jobs", o.jobs, "Parallel compiles (default: the core count)")->check(positive_int);
    sub->add_option("--shard", o.shard,
                    "I/N: only the I-th of N slices of the work, so N build boxes warm one remote cache (KJIT_REMOTE) "
                    "together");
    sub->callback([&exit_code] { exit_code = warm(o); });
}

}  // namespace kjit::cli
