// NVRTC: generated source + kernels_src headers → PTX, cubin, log, resource report.
#include <dlfcn.h>
#include <link.h>
#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <kjit/compile.hpp>
#include <kjit/error.hpp>

#include "cuda/driver_api.hpp"
#include "jit/log.hpp"
#include "jit/nvrtc_check.hpp"

namespace kjit {
namespace {

struct ProgramDeleter {
    void operator()(nvrtcProgram p) const noexcept { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

std::string program_log(nvrtcProgram program) {
    std::size_t size = 0;
    detail::check_nvrtc(nvrtcGetProgramLogSize(program, &size), "nvrtcGetProgramLogSize");
    std::string log(size, '\0');
    detail::check_nvrtc(nvrtcGetProgramLog(program, log.data()), "nvrtcGetProgramLog");
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
}

/// Numbered lines of `source` around `line` (1-based), the line itself marked with '>'.
std::string excerpt(std::string_view source, int line, int context = 3) {
    std::string out;
    int number = 1;
    std::size_t pos = 0;
    while (pos <= source.size()) {
        std::size_t end = source.find('\n', pos);
        if (end == std::string_view::npos) end = source.size();
        if (number >= line - context && number <= line + context)
            out += fmt::format("{} {:>5} | {}\n", number == line ? '>' : ' ', number, source.substr(pos, end - pos));
        if (end == source.size()) break;
        pos = end + 1;
        ++number;
    }
    return out;
}

/// Where NVRTC's log puts the first error: the file it names ("<file>(LINE): error") and the line.
struct ErrorSite {
    std::string file;
    int line = 0;
};

std::optional<ErrorSite> first_error(std::string_view log) {
    constexpr std::string_view mark = "): ";
    for (std::size_t at = log.find(mark); at != std::string_view::npos; at = log.find(mark, at + 1)) {
        const std::string_view kind = log.substr(at + mark.size());
        if (!kind.starts_with("error") && !kind.starts_with("catastrophic error")) continue;
        const std::size_t open = log.rfind('(', at), line_start = log.rfind('\n', at);
        if (open == std::string_view::npos || (line_start != std::string_view::npos && open < line_start)) continue;
        int line = 0;
        const auto [end, ec] = std::from_chars(log.data() + open + 1, log.data() + at, line);
        if (ec != std::errc{} || end != log.data() + at) continue;
        const std::size_t file_start = line_start == std::string_view::npos ? 0 : line_start + 1;
        return ErrorSite{std::string(log.substr(file_start, open - file_start)), line};
    }
    return std::nullopt;
}

/// The first error's file and the numbered lines around it: the kernel's source, or the
/// kernels_src header it names (an error inside kjit/bn_silu.cuh shows that header's lines).
std::string error_excerpt(const Kernel& kernel, std::string_view program_name, std::string_view log) {
    const auto site = first_error(log);
    if (!site) return "(no line number in the log)\n";
    if (site->file == program_name) return excerpt(kernel.source(), site->line);
    for (const auto& header : kernel.headers())
        if (site->file == header.name || site->file.ends_with("/" + header.name))
            return fmt::format("in {}:\n{}", header.name, excerpt(header.content, site->line));
    return fmt::format("(the first error is in {}, not a file of this kernel's)\n", site->file);
}

void validate(const CompileOptions& options) {
    std::set<std::string> names;
    for (const auto& d : options.defines) {
        const bool ok = !d.name.empty() && (std::isalpha(static_cast<unsigned char>(d.name[0])) || d.name[0] == '_') &&
                        std::all_of(d.name.begin(), d.name.end(),
                                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
        if (!ok) throw UsageError(fmt::format("define '{}' is not a macro name: use letters, digits and '_'", d.name));
        if (!names.insert(d.name).second)
            throw UsageError(fmt::format("define '{}' is given twice: give each define once", d.name));
    }
    const auto supported = supported_arch_numbers();
    if (std::find(supported.begin(), supported.end(), options.arch.number()) == supported.end())
        throw UsageError(fmt::format("this NVRTC cannot compile for {}: it supports {}", options.arch.name(),
                                     fmt::join(supported, ", ")));
}

/// The build id (ELF NT_GNU_BUILD_ID) of the shared object holding `address`, as hex.
std::string build_id_of(const void* address) {
    struct Search {
        std::uintptr_t address;
        std::string id;
    } search{reinterpret_cast<std::uintptr_t>(address), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) -> int {
            auto& s = *static_cast<Search*>(data);
            bool contains = false;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const auto& ph = info->dlpi_phdr[i];
                const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
                if (ph.p_type == PT_LOAD && s.address >= start && s.address < start + ph.p_memsz) contains = true;
            }
            if (!contains) return 0;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const auto& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_NOTE) continue;
                const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
                const auto* end = p + ph.p_memsz;
                while (p + sizeof(ElfW(Nhdr)) <= end) {
                    const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
                    const auto* name = p + sizeof(ElfW(Nhdr));
                    const auto* desc = name + ((note->n_namesz + 3) & ~3u);
                    if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                        std::string_view(reinterpret_cast<const char*>(name), 3) == "GNU") {
                        for (unsigned k = 0; k < note->n_descsz; ++k) s.id += fmt::format("{:02x}", desc[k]);
                        return 1;
                    }
                    p = desc + ((note->n_descsz + 3) & ~3u);
                }
            }
            return 1;
        },
        &search);
    return search.id;
}

}  // namespace

const std::string& nvrtc_version() {
    static const std::string version = [] {
        int major = 0, minor = 0;
        detail::check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
        const std::string id = build_id_of(reinterpret_cast<const void*>(&nvrtcVersion));
        return fmt::format("{}.{} build {}", major, minor, id.empty() ? "unknown" : id);
    }();
    return version;
}

Compiled compile(const Kernel& kernel, const CompileOptions& options) {
    validate(options);
    if (kernel.only_for() && options.arch != *kernel.only_for())
        throw UsageError(fmt::format("{} compiles for {} only (it uses that arch's own instructions), not for {}",
                                     kernel.id(), kernel.only_for()->name(), options.arch.name()));
    detail::keep_ptxas_report();
    const auto started = std::chrono::steady_clock::now();
    const std::string program_name = kernel.name() + ".cu";
    std::vector<const char*> header_texts, header_names;
    for (const auto& h : kernel.headers()) {
        header_texts.push_back(h.content.c_str());
        header_names.push_back(h.name.c_str());
    }
    nvrtcProgram raw = nullptr;
    detail::check_nvrtc(
        nvrtcCreateProgram(&raw, kernel.source().c_str(), program_name.c_str(), static_cast<int>(header_texts.size()),
                           header_texts.data(), header_names.data()),
        "nvrtcCreateProgram");
    const Program program(raw);

    const auto canonical = options.canonical();
    std::vector<const char*> argv;
    for (const auto& o : canonical) argv.push_back(o.c_str());
    const nvrtcResult result = nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
    Compiled out;
    out.log = program_log(program.get());
    if (result == NVRTC_ERROR_COMPILATION) {
        throw CompileError(kernel.id(), canonical, out.log, error_excerpt(kernel, program_name, out.log));
    }
    detail::check_nvrtc(result, "nvrtcCompileProgram");

    std::size_t size = 0;
    detail::check_nvrtc(nvrtcGetPTXSize(program.get(), &size), "nvrtcGetPTXSize");
    out.ptx.resize(size);
    detail::check_nvrtc(nvrtcGetPTX(program.get(), out.ptx.data()), "nvrtcGetPTX");
    while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
    detail::check_nvrtc(nvrtcGetCUBINSize(program.get(), &size), "nvrtcGetCUBINSize");
    out.cubin.resize(size);
    detail::check_nvrtc(nvrtcGetCUBIN(program.get(), reinterpret_cast<char*>(out.cubin.data())), "nvrtcGetCUBIN");

    out.resources = parse_ptxas_report(out.log, kernel.entry_point_name());
    if (out.log.find("Compiling entry function '" + kernel.entry_point_name() + "'") == std::string::npos) {
        static std::once_flag warned;
        std::call_once(warned, [&] {
            detail::warn(
                fmt::format("ptxas reported no resources for {}: the CUDA driver's compute cache served this "
                            "compile (the driver was initialised before kjit with CUDA_CACHE_DISABLE unset). "
                            "Register and spill counts of such entries read 0; set CUDA_CACHE_DISABLE=1 in "
                            "the environment to get them",
                            kernel.id()));
        });
    }
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    return out;
}

CompileError::CompileError(std::string readable_id, std::vector<std::string> options, std::string log,
                           std::string source_excerpt)
    : Error(
          fmt::format("kernel '{}' failed to compile.\noptions: {}\nNVRTC log:\n{}\nsource around the first error:\n{}"
                      "Fix the kernel source (or its constants) and try again.",
                      readable_id, fmt::join(options, " "), log, source_excerpt)),
      readable_id_(std::move(readable_id)),
      options_(std::move(options)),
      log_(std::move(log)),
      excerpt_(std::move(source_excerpt)) {}

}  // namespace kjit
