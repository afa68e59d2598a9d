// kjit ptx: what the compiler made of one kernel — PTX, generated source, SASS or resources.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "cli.hpp"

namespace kjit::cli {
namespace {

struct PtxOptions {
    Common common;
    std::string kernel;
    std::vector<std::string> defines;
    std::string arch;
    bool source = false, sass = false, resources = false;
};

/// cuobjdump or nvdisasm on the PATH or in the CUDA toolkit, or "".
std::string disassembler() {
    for (const char* tool : {"cuobjdump", "nvdisasm"}) {
        const std::string found = std::string("command -v ") + tool + " >/dev/null 2>&1";
        if (std::system(found.c_str()) == 0) return tool;
        const std::string toolkit = std::string("/usr/local/cuda/bin/") + tool;
        if (access(toolkit.c_str(), X_OK) == 0) return toolkit;
    }
    return {};
}

int ptx(const PtxOptions& o) {
    std::vector<std::pair<std::string, std::string>> constants;
    for (const auto& d : o.defines) {
        const auto eq = d.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == d.size())
            throw UsageError(fmt::format("-D {}: write NAME=VALUE, e.g. -D BLOCK_M=128", d));
        constants.emplace_back(d.substr(0, eq), d.substr(eq + 1));
    }
    const Kernel kernel = find_shipped_kernel(o.kernel, constants);
    if (o.source) {
        fmt::print("{}", kernel.source());
        return ok;
    }
    const Arch device_arch = o.arch.empty() ? local_arch_or_explain("compile") : Arch::parse(o.arch);
    if (!kernel.runs_on(device_arch))
        throw UsageError(fmt::format("{} is built for {} only, not for {}", kernel.id(), kernel.only_for()->name(),
                                     device_arch.name()));
    const Arch arch = kernel.target(device_arch);  // sm_90 → sm_90a for an arch-specific kernel, as warm does
    const auto result = runtime(o.common).compile(kernel, CompileOptions{.arch = arch});
    const Compiled& c = result.entry->compiled;
    if (o.resources) {
        const auto& r = c.resources;
        if (o.common.json) {
            const nlohmann::json j{{"kernel", kernel.id()},
                                   {"arch", arch.name()},
                                   {"registers", r.registers},
                                   {"spill_store_bytes", r.spill_store_bytes},
                                   {"spill_load_bytes", r.spill_load_bytes},
                                   {"shared_static_bytes", r.shared_static_bytes},
                                   {"stack_frame_bytes", r.stack_frame_bytes},
                                   {"constant_bytes", r.constant_bytes},
                                   {"barriers", r.barriers}};
            fmt::print("{}\n", j.dump(2));
        } else {
            fmt::print(
                "{} for {}: {} registers, {} B spill stores, {} B spill loads, {} B static shared memory, {} B "
                "stack frame, {} B cmem[0], {} barriers\n",
                kernel.id(), arch.name(), r.registers, r.spill_store_bytes, r.spill_load_bytes, r.shared_static_bytes,
                r.stack_frame_bytes, r.constant_bytes, r.barriers);
        }
        return ok;
    }
    if (o.sass) {
        const std::string tool = disassembler();
        if (tool.empty())
            throw UsageError(
                "SASS needs cuobjdump or nvdisasm, and neither is on the PATH or in /usr/local/cuda/bin: "
                "install the CUDA toolkit's binary utilities (e.g. cuda-cuobjdump-13-0)");
        char path[] = "/tmp/kjit-sass-XXXXXX";
        const int fd = mkstemp(path);
        if (fd < 0) throw Error("cannot create a temporary file for the cubin");
        close(fd);
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(c.cubin.data()), static_cast<std::streamsize>(c.cubin.size()));
        const bool cuobjdump = tool.find("cuobjdump") != std::string::npos;
        const std::string command = tool + (cuobjdump ? " -sass " : " ") + path;
        const int rc = std::system(command.c_str());
        std::remove(path);
        return rc == 0 ? ok : failure;
    }
    fmt::print("{}", c.ptx);
    return ok;
}

}  // namespace

void add_ptx(CLI::App& app, int& exit_code) {
    auto* sub = app.add_subcommand("ptx",
                                   "Print a kernel's PTX (compiling on a miss), generated source, SASS or "
                                   "resource report");
    static PtxOptions o;
    add_common_options(*sub, o.common, true);
    sub->add_option("kernel", o.kernel, "Shipped kernel, e.g. conv2d_bn_silu_gemm_forward")->required();
    sub->add_option("-D", o.defines, "Constant NAME=VALUE (one per constant)");
    sub->add_option("--arch", o.arch, "Target arch (default: the local GPU's)");
    auto* what = sub->add_option_group("what", "What to print (default: PTX)");
    what->add_flag("--source", o.source, "The generated CUDA source");
    what->add_flag("--sass", o.sass, "SASS, through cuobjdump or nvdisasm");
    what->add_flag("--resources", o.resources, "Registers, spills, shared memory, stack");
    what->require_option(0, 1);
    sub->callback([&exit_code] { exit_code = ptx(o); });
}

}  // namespace kjit::cli
