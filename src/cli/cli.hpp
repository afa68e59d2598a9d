// The kjit command line: one file per subcommand; this header holds what they share.
#pragma once
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <kjit/kjit.hpp>
#include <nlohmann/json.hpp>

namespace kjit::cli {

/// Exit codes: 0 ok, 1 a failure (a kernel failed, a fault was found), 2 a usage or environment
/// error (bad arguments, no GPU where one is needed).
enum Exit : int { ok = 0, failure = 1, usage = 2 };

/// Options every subcommand takes.
struct Common {
    std::string cache_dir;  ///< --cache-dir, else $KJIT_CACHE_DIR and the default rule
    bool verbose = false;   ///< -v: log hits, misses and compile times
    bool json = false;      ///< --json where the subcommand prints tables
};

void add_common_options(CLI::App& sub, Common& common, bool json);
/// The cache directory the options and environment select.
[[nodiscard]] std::filesystem::path cache_directory(const Common& common);
/// The runtime over that directory, made once per process.
[[nodiscard]] Runtime& runtime(const Common& common);
/// The local GPU's arch, or a UsageError telling the user to pass --arch.
[[nodiscard]] Arch local_arch_or_explain(std::string_view what);

void add_warm(CLI::App& app, int& exit_code);
void add_ptx(CLI::App& app, int& exit_code);
void add_run_and_tune(CLI::App& app, int& exit_code);
void add_cache(CLI::App& app, int& exit_code);

}  // namespace kjit::cli
