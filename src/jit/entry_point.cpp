// The generated parts of a kernel: the extern "C" entry point that instantiates the body's
// template with the constants, and the readable id.
#include "jit/entry_point.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kjit::detail {

std::string constant_text(const Constant& c, bool for_cuda) {
    return std::visit(
        [&](const auto& v) -> std::string {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, bool>) return v ? "true" : "false";
            else if constexpr (std::is_same_v<V, Scalar>) return std::string(for_cuda ? cuda_type(v) : short_name(v));
            else return (for_cuda && (v > INT32_MAX || v < INT32_MIN)) ? fmt::format("{}LL", v) : fmt::format("{}", v);
        },
        c.value);
}

const std::string& grid_dependency_prologue(bool waits_in_body) {
    static const std::array<std::string, 2> text = [] {
        auto prologue = [](const char* instructions) {
            return fmt::format("#if __CUDA_ARCH__ >= {}0\n    asm volatile(\"{}\" ::: \"memory\");\n#endif\n",
                               grid_dependency_arch, instructions);
        };
        return std::array{prologue("griddepcontrol.wait;\\n\\tgriddepcontrol.launch_dependents;"),
                          prologue("griddepcontrol.launch_dependents;")};
    }();
    return text[waits_in_body];
}

namespace {

bool uses_tensor_maps(const KernelSpec& spec) {
    return std::any_of(spec.params.begin(), spec.params.end(),
                       [](const Param& p) { return p.type.scalar == Scalar::tensor_map; });
}

bool uses_16bit_floats(const KernelSpec& spec) {
    auto is16 = [](Scalar s) { return s == Scalar::f16 || s == Scalar::bf16; };
    return std::any_of(spec.params.begin(), spec.params.end(), [&](const Param& p) { return is16(p.type.scalar); }) ||
           std::any_of(spec.constants.begin(), spec.constants.end(), [&](const Constant& c) {
               const auto* s = std::get_if<Scalar>(&c.value);
               return s && is16(*s);
           });
}

}  // namespace

std::string entry_point_text(const KernelSpec& spec) {
    std::vector<std::string> params, names, targs;
    for (const auto& p : spec.params) {
        // A tensor map stays in parameter space, where TMA reads it: never copied to the stack.
        const char* qualifier = p.type.scalar == Scalar::tensor_map ? "const __grid_constant__ " : "";
        params.push_back(
            fmt::format("{}{}{} {}", qualifier, cuda_type(p.type.scalar), p.type.pointer ? "*" : "", p.name));
        names.push_back(p.name);
    }
    for (const auto& c : spec.constants) targs.push_back(constant_text(c, true));
    std::string includes;
    if (uses_16bit_floats(spec)) includes += "#include \"kjit/types.cuh\"\n";
    if (uses_tensor_maps(spec)) includes += "#include \"kjit/tensor_map.cuh\"\n";
    std::string bounds;
    if (spec.max_threads_per_block)
        bounds = spec.min_blocks_per_multiprocessor
                     ? fmt::format("__launch_bounds__({}, {}) ", spec.max_threads_per_block,
                                   spec.min_blocks_per_multiprocessor)
                     : fmt::format("__launch_bounds__({}) ", spec.max_threads_per_block);
    return fmt::format("{}extern \"C\" __global__ void {}{}_entry_point({})\n{{\n{}    {}{}({});\n}}\n",
                       includes.empty() ? "" : includes + "\n", bounds, spec.name, fmt::join(params, ", "),
                       grid_dependency_prologue(spec.waits_in_body), spec.name,
                       targs.empty() ? "" : fmt::format("<{}>", fmt::join(targs, ", ")), fmt::join(names, ", "));
}

std::string readable_id(const KernelSpec& spec) {
    std::vector<std::string> parts{spec.name};
    std::vector<Scalar> dtypes;
    for (const auto& p : spec.params)
        if (p.type.pointer && std::find(dtypes.begin(), dtypes.end(), p.type.scalar) == dtypes.end())
            dtypes.push_back(p.type.scalar);
    for (Scalar s : dtypes) parts.emplace_back(short_name(s));
    for (const auto& c : spec.constants) parts.push_back(value_text(c));
    return fmt::format("{}", fmt::join(parts, "__"));
}

}  // namespace kjit::detail
