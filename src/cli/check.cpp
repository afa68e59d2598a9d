// kjit check OP --compile-only: every configuration of an op's kernels compiled for each arch and
// inspected — compile failures, register spills, and on sm_90a wgmma that ptxas serialised or a
// setmaxnreg it ignored — the check a build box runs before shipping a cache. (Running every
// configuration on the GPU against the float64 reference is issue 18's next part.)
#include <algorithm>
#include <chrono>
#include <ranges>
#include <thread>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct CheckOptions {
    Common common;
    std::string op;
    std::vector<std::string> archs;
    bool compile_only = false;
    unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
};

/// The kernel families an op runs: conv2d_bn_silu's every kernel (each mainloop and layout), or
/// the family of that name.
std::vector<std::string> families_of(const std::string& op) {
    std::vector<std::string> families;
    for (const auto& f : shipped_kernels())
        if (f.name == op || (op == "conv2d_bn_silu" && f.name.starts_with("conv2d_bn_silu_")))
            families.emplace_back(f.name);
    if (families.empty()) {
        std::vector<std::string_view> names{"conv2d_bn_silu"};
        for (const auto& f : shipped_kernels()) names.push_back(f.name);
        throw UsageError(fmt::format("unknown op '{}': kjit check takes {}", op, fmt::join(names, ", ")));
    }
    return families;
}

/// What is wrong with one compiled configuration, or nothing.
std::vector<std::string> faults_of(const CompileOutcome& c) {
    if (!c.result) {
        // The compiler's first error says why; the message's first line only says that it failed.
        const std::string_view e = c.error;
        const std::size_t at = e.find(": error");
        const std::size_t start = at == std::string_view::npos ? 0 : e.rfind('\n', at) + 1;
        return {"does not compile: " + std::string(e.substr(start, e.find('\n', start) - start))};
    }
    std::vector<std::string> faults;
    const auto& compiled = c.result->entry->compiled;
    const auto& r = compiled.resources;
    if (r.spill_store_bytes || r.spill_load_bytes)
        faults.push_back(
            fmt::format("registers spill ({} B stored, {} B loaded)", r.spill_store_bytes, r.spill_load_bytes));
    // ptxas says why it serialised wgmma (C7513, C7515 …) or ignored setmaxnreg (C7508).
    if (compiled.log.find("wgmma.mma_async instructions are serialized") != std::string::npos)
        faults.push_back("ptxas serialised its wgmma");
    if (compiled.log.find("C7508") != std::string::npos) faults.push_back("ptxas ignored its setmaxnreg");
    return faults;
}

int check(const CheckOptions& o) {
    const std::vector<std::string> families = families_of(o.op);
    if (!o.compile_only)
        throw UsageError(
            "kjit check runs every configuration on the GPU against the float64 reference in a later kjit; this one "
            "checks that they compile: add --compile-only (and --arch ARCH, without a GPU)");
    std::vector<Arch> archs;
    for (const auto& a : o.archs) archs.push_back(Arch::parse(a));
    if (archs.empty()) archs.push_back(local_arch_or_explain("check"));
    const CompileJobs work = compile_jobs(families, archs);
    Runtime& rt = runtime(o.common);

    struct Row {
        const CompileJob* job;
        int registers;
        std::vector<std::string> faults;
    };
    std::vector<Row> rows;
    std::size_t compiled = 0;  // the rest came from the cache: their source and options are unchanged
    const auto started = std::chrono::steady_clock::now();
    const std::size_t threads = compile_in_parallel(rt, work.jobs, o.jobs, [&](const CompileOutcome& c) {
        if (!c.result || c.result->origin == Origin::compiled) ++compiled;
        rows.push_back({c.job, c.result ? c.result->entry->compiled.resources.registers : 0, faults_of(c)});
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The failing configurations last, each group in the registry's order.
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
        if (a.faults.empty() != b.faults.empty()) return a.faults.empty();
        return a.job < b.job;
    });
    const auto failing = std::ranges::count_if(rows, [](const Row& r) { return !r.faults.empty(); });
    if (o.common.json) {
        nlohmann::json list = nlohmann::json::array();
        for (const Row& r : rows)
            list.push_back({{"kernel", r.job->kernel->id()},
                            {"arch", r.job->arch.name()},
                            {"registers", r.registers},
                            {"ok", r.faults.empty()},
                            {"faults", r.faults}});
        fmt::print("{}\n", nlohmann::json{{"op", o.op},
                                          {"configurations", list},
                                          {"failed", failing},
                                          {"compiled", compiled},
                                          {"other_arch", work.other_arch},
                                          {"seconds", seconds}}
                               .dump(2));
    } else {
        fmt::print("{:<64} {:<7} {:>9}  {}\n", "configuration", "arch", "registers", "result");
        for (const Row& r : rows)
            fmt::print("{:<64} {:<7} {:>9}  {}\n", r.job->kernel->id(), r.job->arch.name(),
                       r.registers ? std::to_string(r.registers) : "-",
                       r.faults.empty() ? "ok" : fmt::format("FAIL: {}", fmt::join(r.faults, "; ")));
        fmt::print(
            "{}: {} configurations for {} ({} compiled, {} unchanged from the cache) in {:.1f} s ({} jobs): {} "
            "ok, {} failed{}\n",
            o.op, rows.size(), fmt::join(archs | std::views::transform([](Arch a) { return a.name(); }), ", "),
            compiled, rows.size() - compiled, seconds, threads, rows.size() - failing, failing,
            work.other_arch ? fmt::format("; {} built for other archs only, not checked", work.other_arch)
                            : std::string());
    }
    return failing ? failure : ok;
}

}  // namespace

void add_check(CLI::App& app, int& exit_code) {
    auto* sub = app.add_subcommand("check",
                                   "Check every configuration of an op's kernels: with --compile-only, that each "
                                   "compiles for each arch without spills or serialised wgmma (needs no GPU)");
    static CheckOptions o;
    add_common_options(*sub, o.common, true);
    sub->add_option("op", o.op, "conv2d_bn_silu (every conv kernel) or a shipped kernel family")->required();
    sub->add_flag("--compile-only", o.compile_only, "Compile and inspect every configuration; run none");
    sub->add_option("--arch", o.archs, "Target arch, e.g. sm_90a (repeatable; default: the local GPU's)");
    sub->add_option("-j,--jobs", o.jobs, "Parallel compiles (default: the core count)")->check(positive_int);
    sub->callback([&exit_code] { exit_code = check(o); });
}

}  // namespace kjit::cli
