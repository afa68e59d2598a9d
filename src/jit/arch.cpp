// Targets and the canonical NVRTC option list.
#include <algorithm>
#include <charconv>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <kjit/compile.hpp>
#include <kjit/error.hpp>

#include "jit/nvrtc_check.hpp"

namespace kjit {

std::vector<int> supported_arch_numbers() {
    static const std::vector<int> archs = [] {
        int n = 0;
        detail::check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
        std::vector<int> list(static_cast<std::size_t>(n));
        detail::check_nvrtc(nvrtcGetSupportedArchs(list.data()), "nvrtcGetSupportedArchs");
        return list;
    }();
    return archs;
}

namespace {
/// Whether this NVRTC takes `--gpu-architecture=name`: arch-specific (sm_90a) and family (sm_100f)
/// targets exist only for some archs, which NVRTC lists nowhere. Asked once per name, by
/// compiling an empty program.
bool nvrtc_accepts(const std::string& name) {
    static std::mutex mutex;
    static std::map<std::string, bool> known;
    std::lock_guard lock(mutex);
    if (const auto it = known.find(name); it != known.end()) return it->second;
    nvrtcProgram program = nullptr;
    detail::check_nvrtc(nvrtcCreateProgram(&program, "", "arch_probe.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
    const std::string option = "--gpu-architecture=" + name;
    const char* options[] = {option.c_str()};
    const bool accepted = nvrtcCompileProgram(program, 1, options) == NVRTC_SUCCESS;
    nvrtcDestroyProgram(&program);
    return known[name] = accepted;
}

/// Every target name this NVRTC accepts: sm_XY for each supported number, and the suffixed ones.
std::vector<std::string> accepted_targets() {
    std::vector<std::string> names;
    for (int n : supported_arch_numbers()) {
        names.push_back(fmt::format("sm_{}", n));
        for (char suffix : {'a', 'f'})
            if (const auto name = fmt::format("sm_{}{}", n, suffix); nvrtc_accepts(name)) names.push_back(name);
    }
    return names;
}
}  // namespace

std::string Arch::name() const {
    return suffix_ ? fmt::format("sm_{}{}", number(), suffix_) : fmt::format("sm_{}", number());
}

Arch Arch::parse(std::string_view text) {
    auto fail = [&](std::string_view why) -> Arch {
        throw UsageError(fmt::format("unsupported arch '{}': {}. This NVRTC compiles for {}", text, why,
                                     fmt::join(accepted_targets(), ", ")));
    };
    std::string_view rest = text;
    for (std::string_view prefix : {"sm_", "compute_"})
        if (rest.starts_with(prefix)) rest.remove_prefix(prefix.size());
    char suffix = '\0';
    if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
        suffix = rest.back();
        rest.remove_suffix(1);
    }
    int major = 0, minor = 0;
    if (const auto dot = rest.find('.'); dot != std::string_view::npos) {  // "9.0"
        auto [p1, e1] = std::from_chars(rest.data(), rest.data() + dot, major);
        auto [p2, e2] = std::from_chars(rest.data() + dot + 1, rest.data() + rest.size(), minor);
        if (e1 != std::errc{} || e2 != std::errc{} || p1 != rest.data() + dot || p2 != rest.data() + rest.size() ||
            minor > 9)
            return fail("not an arch name");
    } else {
        int number = 0;
        auto [p, e] = std::from_chars(rest.data(), rest.data() + rest.size(), number);
        if (rest.empty() || e != std::errc{} || p != rest.data() + rest.size()) return fail("not an arch name");
        major = number / 10;
        minor = number % 10;
    }
    const auto supported = supported_arch_numbers();
    if (std::find(supported.begin(), supported.end(), major * 10 + minor) == supported.end())
        return fail("this NVRTC cannot compile for it");
    const Arch arch(major, minor, suffix);
    if (suffix && !nvrtc_accepts(arch.name()))
        return fail(suffix == 'a' ? "no arch-specific target of that arch" : "no family target of that arch");
    return arch;
}

std::vector<std::string> CompileOptions::canonical() const {
    std::vector<std::string> list{
        standard == CxxStandard::cxx20 ? "--std=c++20" : "--std=c++17",
        "-default-device",
        "--gpu-architecture=" + arch.name(),
        "--ptxas-options=-v",
    };
    if (line_info) list.emplace_back("-lineinfo");
    for (const auto& d : defines)
        list.push_back(d.value.empty() ? "-D" + d.name : fmt::format("-D{}={}", d.name, d.value));
    return list;
}

}  // namespace kjit
