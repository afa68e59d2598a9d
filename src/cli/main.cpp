// kjit — warm, inspect, run, tune and maintain the kernel cache.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ranges>

#include "cli.hpp"

namespace kjit::cli {

void add_common_options(CLI::App& sub, Common& common, bool json) {
    CLI::Option* cache_dir = sub.add_option("--cache-dir", common.cache_dir,
                                            "Cache directory (default: $KJIT_CACHE_DIR, the repository's "
                                            "cache/, $XDG_CACHE_HOME/kjit or ~/.cache/kjit)");
    sub.add_flag("-v,--verbose", common.verbose, "Log cache hits, misses and compile times");
    if (json) sub.add_flag("--json", common.json, "Print JSON instead of a table");
    sub.parse_complete_callback([&common, cache_dir] {
        common.cache_dir_given = cache_dir->count() > 0;
        if (common.verbose) set_log_level(LogLevel::debug);
    });
}

std::filesystem::path cache_directory(const Common& common) {
    if (!common.cache_dir_given) return Cache::default_directory();
    if (common.cache_dir.empty())
        throw UsageError("--cache-dir is empty: give a directory, or leave the option out for the default");
    return common.cache_dir;
}

Runtime& runtime(const Common& common) {
    static Runtime r(cache_directory(common));
    return r;
}

std::string read_option_file(const std::string& file, std::string_view option) {
    // Sized first and read at once: a weights file is tens of megabytes.
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    if (!in) throw UsageError(fmt::format("{} {}: cannot read the file (does it exist?)", option, file));
    std::string bytes(static_cast<std::size_t>(std::max<std::streamoff>(0, in.tellg())), '\0');
    in.seekg(0);
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
        throw UsageError(fmt::format("{} {}: the file could not be read whole", option, file));
    return bytes;
}

double median(std::vector<double> values) {
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    return values[values.size() / 2];
}

Device gpu_or_explain(const char* command) {
    if (const auto reason = device_unavailable_reason(); !reason.empty())
        throw NoDeviceError(fmt::format("kjit {} needs a GPU: {}", command, reason));
    return Device::get(0);
}

Arch local_arch_or_explain(std::string_view what) {
    if (device_count() > 0) return Device::get(0).arch();
    throw UsageError(
        fmt::format("there is no GPU here to take the arch from ({}): pass --arch, e.g. --arch sm_90, to "
                    "say what to {} for",
                    device_unavailable_reason(), what));
}

namespace {

/// A device dispatch plans for, by arch, where there is none to ask: the part each arch is
/// best known by (SM count, opt-in shared memory a block, from NVIDIA's datasheets and tuning
/// guides).
struct KnownPart {
    int arch;
    const char* name;
    int multiprocessors, max_shared_bytes;
};
constexpr KnownPart known_parts[] = {
    {80, "A100", 108, 166912}, {86, "RTX A6000", 84, 101376},        {87, "Jetson AGX Orin", 16, 166912},
    {89, "L40S", 142, 101376}, {90, "H100 SXM / H200", 132, 232448},
};

}  // namespace

std::pair<DeviceTraits, std::string> planning_device(std::string_view arch_name, int multiprocessors,
                                                     int max_shared_bytes) {
    if (arch_name.empty() && device_count() > 0) {
        const Device device = Device::get(0);
        const DeviceTraits t = DeviceTraits::of(device);
        return {t, fmt::format("{} ({}, {} SMs, {} B of shared memory a block)", device.name(), t.arch.name(),
                               t.multiprocessors, t.max_shared_bytes)};
    }
    const Arch arch = arch_name.empty() ? local_arch_or_explain("plan") : Arch::parse(arch_name);
    const Arch own(arch.major(), arch.minor());  // sm_90a plans as a 9.0 device
    const auto* part = std::ranges::find(known_parts, own.number(), &KnownPart::arch);
    const bool known = part != std::end(known_parts);
    if (!known && (multiprocessors == 0 || max_shared_bytes == 0))
        throw UsageError(
            fmt::format("no part of {} is known to plan for: give --sms and --max-shared-bytes (known: "
                        "{})",
                        own.name(),
                        fmt::join(known_parts | std::views::transform([](const KnownPart& p) {
                                      return fmt::format("sm_{} {}", p.arch, p.name);
                                  }),
                                  ", ")));
    const DeviceTraits t(multiprocessors ? multiprocessors : part->multiprocessors,
                         max_shared_bytes ? max_shared_bytes : part->max_shared_bytes, own);
    const bool as_part = known && t.multiprocessors == part->multiprocessors &&
                         t.max_shared_bytes == part->max_shared_bytes;
    return {t, fmt::format("{} ({}{} SMs, {} B of shared memory a block; no GPU asked)", own.name(),
                           as_part ? fmt::format("{}: ", part->name) : std::string(), t.multiprocessors,
                           t.max_shared_bytes)};
}

DeviceTraits checking_device() { return planning_device(device_count() > 0 ? "" : "sm_90", 0, 0).first; }

/// The name of the first word that is not a subcommand where one is expected ("kjit bogus",
/// "kjit cache bogus"), with the choices, or "" when the words name subcommands: CLI11 would only
/// say that a subcommand is required.
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
    CLI::App* current = &app;
    std::string path = "kjit";
    // CLI11 keeps option groups among the subcommands: they are not words to type.
    const auto subcommands = [](CLI::App* app) {
        return app->get_subcommands([](CLI::App* sub) { return dynamic_cast<CLI::Option_group*>(sub) == nullptr; });
    };
    for (int i = 1; i < argc; ++i) {
        const auto subs = subcommands(current);
        const std::string word = argv[i];
        if (subs.empty() || word.starts_with('-')) return {};
        const auto found = std::ranges::find_if(subs, [&](CLI::App* sub) { return sub->check_name(word); });
        if (found == subs.end()) {
            std::vector<std::string> names;
            for (const CLI::App* sub : subs) names.push_back(sub->get_name());
            return fmt::format("unknown subcommand '{}' of {}: use one of {} ({} --help says what each does)", word,
                               path, fmt::join(names, ", "), path);
        }
        path += " " + word;
        current = *found;
    }
    return {};
}

}  // namespace kjit::cli

int main(int argc, char** argv) {
    using namespace kjit::cli;
    CLI::App app{
        "kjit: a runtime JIT kernel compiler service for CUDA: warm, inspect, run, tune and maintain the "
        "kernel cache"};
    app.set_version_flag("--version", [] {
        return fmt::format("kjit {} (NVRTC {}, cache schema {})", KJIT_VERSION, kjit::nvrtc_version(),
                           kjit::cache_schema_version);
    });
    app.require_subcommand(1);
    int exit_code = ok;
    add_warm(app, exit_code);
    add_check(app, exit_code);
    add_ptx(app, exit_code);
    add_run_and_tune(app, exit_code);
    add_cache(app, exit_code);
    add_model(app, exit_code);
    add_keygen(app, exit_code);
    if (const std::string unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
        std::fprintf(stderr, "kjit: %s\n", unknown.c_str());
        return usage;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? ok : usage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kjit: %s\n", e.what());
        // Bad arguments and a missing GPU are the user's to fix (2); anything else failed (1).
        const bool usage_error = dynamic_cast<const kjit::UsageError*>(&e) ||
                                 dynamic_cast<const kjit::NoDeviceError*>(&e);
        return usage_error ? usage : failure;
    }
    return exit_code;
}
