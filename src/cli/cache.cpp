// kjit cache: stats, ls, verify, clear, prune, export, import, push, pull.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <limits>
#include <map>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct CacheOptions {
    Common common;
    std::string max_size;
    std::string file;
    std::string arch;
    bool tuned = false;  ///< ls: the tuned winners; clear: remove them too
};

std::uint64_t blob_bytes(const CacheEntry& e) {
    return e.compiled.ptx.size() + e.compiled.cubin.size() + e.compiled.log.size();
}

/// A byte count with an optional unit, case ignored ("500M", "2g", "64KiB", "1000"): K, M, G, T (or
/// KB … TB) powers of 1000, as `stats` prints MB; KiB, MiB, GiB, TiB powers of 1024. A size past
/// 2^64 bytes is an error, not a wrapped-around small one.
std::uint64_t parse_size(const std::string& text) {
    const auto bad = [&](std::string_view why) {
        return UsageError(
            fmt::format("--max-size {}: {}; give a byte count or a size like 500M, 2G or 64KiB (K, M, "
                        "G, T are powers of 1000, as `kjit cache stats` prints; KiB, MiB, GiB, TiB "
                        "of 1024)",
                        text, why));
    };
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (end == text.data()) throw bad("not a number");
    if (ec == std::errc::result_out_of_range) throw bad("too large");
    std::string unit(end, text.data() + text.size());
    std::ranges::transform(unit, unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::map<std::string, std::uint64_t> units{{"", 1},
                                                     {"b", 1},
                                                     {"k", 1000},
                                                     {"kb", 1000},
                                                     {"m", 1000'000},
                                                     {"mb", 1000'000},
                                                     {"g", 1000'000'000},
                                                     {"gb", 1000'000'000},
                                                     {"t", 1000'000'000'000},
                                                     {"tb", 1000'000'000'000},
                                                     {"kib", 1ULL << 10},
                                                     {"mib", 1ULL << 20},
                                                     {"gib", 1ULL << 30},
                                                     {"tib", 1ULL << 40}};
    const auto scale = units.find(unit);
    if (scale == units.end()) throw bad(fmt::format("unknown unit '{}'", std::string(end, text.data() + text.size())));
    if (value > std::numeric_limits<std::uint64_t>::max() / scale->second) throw bad("larger than 2^64 bytes");
    return value * scale->second;
}

std::string when(std::int64_t unix_seconds) {
    char buffer[32];
    const std::time_t t = unix_seconds;
    std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M", std::gmtime(&t));
    return buffer;
}

/// The cache file the options select, if one is there: a command that only reads or removes
/// creates no directory and no database where the user pointed by mistake.
std::pair<std::filesystem::path, bool> cache_file(const Common& common) {
    auto file = cache_directory(common) / Cache::file_name;
    std::error_code ec;
    const bool there = std::filesystem::exists(file, ec);
    return {std::move(file), there};
}

/// The cache of a command that only reads it (stats, ls, verify, export): one must be there.
Cache& existing_cache(const Common& common, std::string_view verb) {
    if (const auto [file, there] = cache_file(common); !there)
        throw UsageError(
            fmt::format("there is no kernel cache at {}: nothing to {} (`kjit warm` makes one there; "
                        "check --cache-dir or KJIT_CACHE_DIR)",
                        file.string(), verb));
    return runtime(common).cache();
}

nlohmann::json counters_json(const RemoteCounters& c) {
    return {{"hits", c.hits},           {"misses", c.misses},         {"errors", c.errors},
            {"timeouts", c.timeouts},   {"rejected", c.rejected},     {"skipped", c.skipped},
            {"published", c.published}, {"bytes_down", c.bytes_down}, {"bytes_up", c.bytes_up}};
}

int stats(const CacheOptions& o) {
    auto& cache = existing_cache(o.common, "count");
    const RemoteCounters remote = cache.remote_counters();
    RemoteCache* configured = runtime(o.common).remote();
    const auto entries = cache.entries();
    struct Totals {
        std::size_t entries = 0;
        std::uint64_t bytes = 0, hits = 0;
    };
    Totals all;
    std::map<std::string, Totals> by_arch, by_kernel;
    for (const auto& e : entries)
        for (Totals* t : {&all, &by_arch[e.arch], &by_kernel[e.kernel_name]}) {
            ++t->entries;
            t->bytes += blob_bytes(e);
            t->hits += static_cast<std::uint64_t>(e.hit_count);
        }
    if (o.common.json) {
        auto group = [](const std::map<std::string, Totals>& m) {
            nlohmann::json j = nlohmann::json::object();
            for (const auto& [k, t] : m) j[k] = {{"entries", t.entries}, {"bytes", t.bytes}, {"hits", t.hits}};
            return j;
        };
        const nlohmann::json j{
            {"path", cache.path().string()},
            {"entries", all.entries},
            {"bytes", all.bytes},
            {"hits", all.hits},
            {"by_arch", group(by_arch)},
            {"by_kernel", group(by_kernel)},
            {"tuned", tuned_configs(cache).size()},
            {"remote", {{"address", configured ? configured->describe() : ""}, {"counters", counters_json(remote)}}}};
        fmt::print("{}\n", j.dump(2));
        return ok;
    }
    fmt::print("{}: {} entries, {:.1f} MB, {} hits, {} tuned winners\n", cache.path().string(), all.entries,
               all.bytes / 1e6, all.hits, tuned_configs(cache).size());
    for (const auto* group : {&by_arch, &by_kernel})
        for (const auto& [name, t] : *group)
            fmt::print("  {:<36} {:>6} entries {:>9.1f} MB {:>8} hits\n", name, t.entries, t.bytes / 1e6, t.hits);
    if (configured || !(remote == RemoteCounters{}))
        fmt::print(
            "remote {}: {} hits, {} misses, {} errors, {} time-outs, {} rejected, {} skipped (breaker open), "
            "{} published, {:.1f} MB down, {:.1f} MB up (every process that used this cache)\n",
            configured ? configured->describe() : std::string("(not configured now)"), remote.hits, remote.misses,
            remote.errors, remote.timeouts, remote.rejected, remote.skipped, remote.published, remote.bytes_down / 1e6,
            remote.bytes_up / 1e6);
    return ok;
}

/// The remote tier a push or pull talks to: KJIT_REMOTE's.
RemoteCache& configured_remote(const Common& common, std::string_view verb) {
    RemoteCache* remote = runtime(common).remote();
    if (!remote)
        throw UsageError(
            fmt::format("no remote cache to {}: set KJIT_REMOTE=redis://HOST:PORT (or unix:///SOCKET), "
                        "with KJIT_REMOTE_MODE=read-write and KJIT_SIGNING_KEY to push, "
                        "KJIT_TRUSTED_KEYS to pull",
                        verb));
    return *remote;
}

/// kjit cache push / pull: what moved, and how fast.
int transfer(const CacheOptions& o, bool push) {
    Runtime& rt = runtime(o.common);
    RemoteCache& remote = configured_remote(o.common, push ? "push to" : "pull from");
    const RemoteCache::Transfer t = push ? remote.push(rt.cache()) : remote.pull(rt.cache());
    rt.settle_remote(std::chrono::milliseconds(0));
    if (o.common.json) {
        fmt::print("{}\n", nlohmann::json{{"remote", remote.describe()},
                                          {"entries", t.entries},
                                          {"present", t.present},
                                          {"rejected", t.rejected},
                                          {"winners", t.winners},
                                          {"bytes", t.bytes},
                                          {"seconds", t.seconds}}
                               .dump(2));
    } else {
        const double seconds = std::max(t.seconds, 1e-9);
        fmt::print(
            "{} {} entries and {} tuned winners {} {} ({} already {}), {:.1f} MB in {:.2f} s "
            "({:.0f} entries/s, {:.1f} MB/s)\n",
            push ? "pushed" : "pulled", t.entries, t.winners, push ? "to" : "from", remote.describe(), t.present,
            push ? "there" : "here", t.bytes / 1e6, t.seconds, t.entries / seconds, t.bytes / 1e6 / seconds);
        if (t.rejected)
            fmt::print(stderr, "kjit: {} {}\n", t.rejected,
                       push ? "entries failing their checksums here were not pushed (`kjit cache verify` names them)"
                            : "values failed verification and were not stored (see the warning above; "
                              "check KJIT_TRUSTED_KEYS and who writes to the server)");
    }
    return t.rejected ? failure : ok;
}

/// kjit cache ls --tuned: every tuned winner and what it holds for.
int ls_tuned(const CacheOptions& o) {
    const auto winners = tuned_configs(existing_cache(o.common, "list"));
    if (o.common.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& w : winners)
            j.push_back({{"kernel", w.kernel},
                         {"problem", w.shape},
                         {"device", w.device},
                         {"arch", w.arch},
                         {"driver", w.driver},
                         {"source_hash", w.source_hash},
                         {"config", w.config},
                         {"microseconds", w.microseconds},
                         {"created_at", w.created_at}});
        fmt::print("{}\n", j.dump(2));
        return ok;
    }
    fmt::print("{:<20} {:<40} {:<22} {:<6} {:<11} {:<8} {:>9}  {:<16} {}\n", "kernel", "problem", "device", "arch",
               "driver", "source", "µs", "tuned (UTC)", "configuration");
    for (const auto& w : winners)
        fmt::print("{:<20} {:<40} {:<22} {:<6} {:<11} {:<8} {:>9.1f}  {:<16} {}\n", w.kernel, w.shape, w.device, w.arch,
                   w.driver, w.source_hash.substr(0, 8), w.microseconds, when(w.created_at), w.config);
    fmt::print(
        "{} tuned winners; each holds for its device, arch, driver and kernel source (a kernel edit or a new "
        "driver passes it by)\n",
        winners.size());
    return ok;
}

int ls(const CacheOptions& o) {
    if (o.tuned) return ls_tuned(o);
    const auto entries = existing_cache(o.common, "list").entries();
    if (o.common.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& e : entries)
            j.push_back({{"key", e.key.hex()},
                         {"id", e.readable_id},
                         {"arch", e.arch},
                         {"bytes", blob_bytes(e)},
                         {"compile_ms", e.compiled.compile_ms},
                         {"last_used", e.last_used_at},
                         {"hits", e.hit_count}});
        fmt::print("{}\n", j.dump(2));
        return ok;
    }
    fmt::print("{:<52} {:<7} {:>10} {:>11} {:<16}\n", "kernel id", "arch", "bytes", "compile ms", "last used (UTC)");
    for (const auto& e : entries)
        fmt::print("{:<52} {:<7} {:>10} {:>11.1f} {:<16}\n", e.readable_id, e.arch, blob_bytes(e),
                   e.compiled.compile_ms, when(e.last_used_at));
    return ok;
}

int verify(const CacheOptions& o) {
    auto& cache = existing_cache(o.common, "verify");
    const auto faults = cache.verify();
    for (const auto& f : faults) fmt::print("fault: {}\n", f);
    const auto any = [&](std::string_view prefix) {
        return std::ranges::any_of(faults, [&](const std::string& f) { return f.starts_with(prefix); });
    };
    // Advice that works for the fault found: a damaged file was already set aside; corrupt pages
    // take `clear` (which sets the file aside); bad entries are replaced by their next compile.
    const std::string verdict =
        faults.empty()       ? "sound (integrity check ok, every checksum matches)"
        : any("damaged")     ? "damaged: the file was kept where the fault says, and this cache starts empty; "
                               "`kjit warm` rebuilds it"
        : any("unusable")    ? "cannot be used: fix what the fault says (permissions, space, the path), then "
                               "run `kjit cache verify` again"
        : any("integrity: ") ? "damaged pages: `kjit cache clear` sets the file aside and starts an empty cache; "
                               "`kjit warm` rebuilds it"
                             : "entries failing their checksums are recompiled and replaced on their next use; "
                               "`kjit warm` replaces them now";
    fmt::print("{}: {}\n", cache.path().string(), verdict);
    return faults.empty() ? ok : failure;
}

/// Runs a removal (clear, prune) and says what it did: how many entries went, or, where the
/// file was too damaged to remove from, where it was set aside.
template <class Remove>
int remove_entries(const CacheOptions& o, Remove remove) {
    // Where there is no cache there is nothing to remove, and none is made.
    if (const auto [file, there] = cache_file(o.common); !there) {
        fmt::print("there is no kernel cache at {}: nothing to remove\n", file.string());
        return ok;
    }
    auto& cache = runtime(o.common).cache();
    const std::size_t known = cache.incidents().size();
    const std::size_t removed = remove(cache);
    if (const auto incidents = cache.incidents(); incidents.size() > known) {
        fmt::print("{}: {}; every entry is gone, `kjit warm` rebuilds them\n", cache.path().string(), incidents.back());
        return ok;
    }
    // Tuned winners are a few bytes each and cost a GPU to make again: only clear --tuned takes them.
    const std::size_t winners = o.tuned ? clear_tuned(cache) : tuned_configs(cache).size();
    fmt::print("removed {} entries; {}\n", removed,
               o.tuned ? fmt::format("removed {} tuned winners", winners)
                       : fmt::format("kept {} tuned winners (`kjit cache clear --tuned` removes them)", winners));
    return ok;
}

}  // namespace

void add_cache(CLI::App& app, int& exit_code) {
    auto* cache = app.add_subcommand("cache", "Inspect and maintain the kernel cache");
    cache->require_subcommand(1);
    static CacheOptions o;
    auto sub = [&](const char* name, const char* help, bool json, auto action) {
        auto* s = cache->add_subcommand(name, help);
        add_common_options(*s, o.common, json);
        s->callback([&exit_code, action] { exit_code = action(o); });
        return s;
    };
    sub("stats", "Entries, bytes and hits, per arch and kernel", true, stats);
    sub("ls", "Every entry: readable id, arch, size, compile time, last use", true, ls)
        ->add_flag("--tuned", o.tuned,
                   "The tuned winners instead: problem, device, arch, driver, kernel source, µs, configuration");
    sub("verify", "SQLite integrity check and every checksum; exit 1 on any fault", false, verify);
    sub("clear", "Remove every compiled entry (a damaged file is set aside); tuned winners stay", false,
        [](const CacheOptions& opts) { return remove_entries(opts, [](Cache& cache) { return cache.clear(); }); })
        ->add_flag("--tuned", o.tuned, "Remove the tuned winners too");
    sub("prune", "Remove least recently used entries down to a size; tuned winners stay", false,
        [](const CacheOptions& opts) {
            const std::uint64_t max_bytes = parse_size(opts.max_size);
            return remove_entries(opts, [max_bytes](Cache& cache) { return cache.prune(max_bytes); });
        })
        ->add_option("--max-size", o.max_size, "Size to prune down to, e.g. 500M")
        ->required();
    auto* ex = sub("export", "Write the entries (of one arch) into a new cache file to ship", false,
                   [](const CacheOptions& opts) {
                       // A named arch must be one NVRTC targets (an unknown one would export nothing).
                       const std::string arch = opts.arch.empty() ? "" : Arch::parse(opts.arch).name();
                       const ExportReport r = existing_cache(opts.common, "export").export_to(opts.file, arch);
                       fmt::print("exported {} entries and {} tuned winners to {}\n", r.exported, r.winners, opts.file);
                       if (r.rejected)
                           fmt::print(stderr,
                                      "kjit: left out {} entries that fail their checksums (`kjit cache verify` names "
                                      "them; `kjit warm` replaces them): export again after it\n",
                                      r.rejected);
                       return static_cast<int>(r.rejected ? failure : ok);
                   });
    ex->add_option("file", o.file, "New database file")->required();
    ex->add_option("--arch", o.arch,
                   "Only what devices of this arch load, e.g. sm_90 (with its sm_90a entries), or sm_90a alone");
    sub("import", "Add the entries of a shipped cache file (checksums verified, valid entries kept)", false,
        [](const CacheOptions& opts) {
            const ImportReport r = runtime(opts.common).cache().import_from(opts.file);
            fmt::print(
                "imported {}, kept {} already here, rejected {} that failed their checksums; {} tuned winners added\n",
                r.imported, r.kept, r.rejected, r.winners);
            return static_cast<int>(r.rejected ? failure : ok);
        })
        ->add_option("file", o.file, "Cache file written by kjit cache export")
        ->required()
        ->check(CLI::ExistingFile);
    sub("push", "Publish every entry and tuned winner the remote cache (KJIT_REMOTE) lacks, signed", true,
        [](const CacheOptions& opts) { return transfer(opts, true); });
    sub("pull", "Store every verified entry and tuned winner of the remote cache (KJIT_REMOTE) this one lacks", true,
        [](const CacheOptions& opts) { return transfer(opts, false); });
}

}  // namespace kjit::cli
