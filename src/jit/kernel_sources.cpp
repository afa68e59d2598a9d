#include "jit/kernel_sources.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <kjit/error.hpp>

#include "jit/file_bytes.hpp"

namespace kjit::detail {
namespace {

std::optional<std::filesystem::path> kernels_dir_override() {
    const char* dir = std::getenv("KJIT_KERNELS_DIR");
    if (!dir || !*dir) return std::nullopt;
    if (std::error_code ec; !std::filesystem::is_directory(dir, ec))
        throw UsageError(
            fmt::format("KJIT_KERNELS_DIR={} is not a directory: point it at a kernels_src folder, or "
                        "unset it to use the kernels built into kjit",
                        dir));
    return std::filesystem::path(dir);
}

/// The file at `relative` under kernels_src, or nullopt.
std::optional<std::string> read_kernel_file(const std::string& relative) {
    if (auto dir = kernels_dir_override()) return file_bytes(*dir / relative);
    for (const auto& file : embedded_kernel_files())
        if (file.path == relative) return std::string(file.content);
    return std::nullopt;
}

std::vector<std::string> known_kernel_names() {
    std::vector<std::string> names;
    auto add = [&](const std::filesystem::path& p) {
        if (p.extension() == ".cu" && !p.has_parent_path()) names.push_back(p.stem().string());
    };
    if (auto dir = kernels_dir_override()) {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(*dir, ec)) add(e.path().filename());
    } else {
        for (const auto& file : embedded_kernel_files()) add(std::filesystem::path(file.path));
    }
    std::sort(names.begin(), names.end());
    return names;
}

/// The targets of `#include "x"` / `#include <x>` lines, in order. Only the lines holding a '#'
/// are looked at: every kernel a plan builds is scanned, and few of its lines are directives.
std::vector<std::string> include_targets(std::string_view source) {
    std::vector<std::string> targets;
    for (std::size_t hash = source.find('#'); hash != std::string_view::npos; hash = source.find('#', hash + 1)) {
        const std::size_t start = source.rfind('\n', hash) + 1;  // 0 on the first line (npos + 1)
        if (source.substr(start, hash - start).find_first_not_of(" \t") != std::string_view::npos) continue;
        const std::string_view line = source.substr(hash, source.find('\n', hash) - hash);  // to the end at most
        std::size_t i = line.find_first_not_of(" \t", 1);
        if (i == std::string_view::npos || line.substr(i, 7) != "include") continue;
        i = line.find_first_of("\"<", i + 7);
        if (i == std::string_view::npos) continue;
        const char close = line[i] == '"' ? '"' : '>';
        const std::size_t j = line.find(close, i + 1);
        if (j != std::string_view::npos) targets.emplace_back(line.substr(i + 1, j - i - 1));
    }
    return targets;
}

}  // namespace

bool sources_embedded() { return !kernels_dir_override(); }

std::string kernel_body(const std::string& name) {
    if (auto body = read_kernel_file(name + ".cu")) return *std::move(body);
    const auto dir = kernels_dir_override();
    throw UsageError(fmt::format("unknown kernel '{}': there is no {}/{}.cu. Known kernels: {}.{}", name,
                                 dir ? dir->string() : "kernels_src (embedded)", name,
                                 fmt::join(known_kernel_names(), ", "),
                                 dir ? " Unset KJIT_KERNELS_DIR to use the kernels built into kjit." : ""));
}

namespace {

/// The kernels_src files `direct` names and every one they include in turn, sorted by name.
std::vector<SourceFile> resolve_headers(std::vector<std::string> pending) {
    std::map<std::string, std::string> found;  // sorted by name: the key must not depend on order
    while (!pending.empty()) {
        std::string name = std::move(pending.back());
        pending.pop_back();
        if (found.contains(name)) continue;
        auto content = read_kernel_file(name);
        if (!content) continue;  // not ours: NVRTC reports it if it is missing
        for (auto& next : include_targets(*content)) pending.push_back(std::move(next));
        found.emplace(std::move(name), *std::move(content));
    }
    std::vector<SourceFile> headers;
    for (auto& [name, content] : found) headers.push_back({name, std::move(content)});
    return headers;
}

}  // namespace

std::shared_ptr<const std::vector<SourceFile>> included_headers(std::string_view source) {
    std::vector<std::string> direct = include_targets(source);
    if (kernels_dir_override()) return std::make_shared<const std::vector<SourceFile>>(resolve_headers(direct));
    // The embedded files never change: each distinct include list is resolved once per process,
    // and every kernel that includes it shares the result (a plan builds hundreds of kernels).
    static std::mutex mutex;
    static std::map<std::vector<std::string>, std::shared_ptr<const std::vector<SourceFile>>> resolved;
    std::lock_guard lock(mutex);
    auto& headers = resolved[direct];
    if (!headers) headers = std::make_shared<const std::vector<SourceFile>>(resolve_headers(std::move(direct)));
    return headers;
}

}  // namespace kjit::detail
