// kjit/registry.hpp — the kernels that ship with kjit and their valid configurations.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kjit/kernel.hpp>

namespace kjit {

/// A shipped kernel and every configuration of its constants that is valid. Warming a cache
/// and the across-configuration tests iterate over exactly this list.
struct KernelFamily {
    std::string_view name;
    std::string_view summary;
    std::function<std::vector<Kernel>()> configurations;
};

[[nodiscard]] std::span<const KernelFamily> shipped_kernels();

/// The shipped kernel `name` whose constants are exactly `constants` (NAME → value as text:
/// "128", "true", "f32"), among its valid configurations. Throws UsageError naming the unknown
/// kernel, the unknown, missing or repeated constant, or the valid values.
[[nodiscard]] Kernel find_shipped_kernel(std::string_view name,
                                         std::span<const std::pair<std::string, std::string>> constants);

}  // namespace kjit
