// Entry-point generation: what a KernelSpec becomes before NVRTC sees it.
#pragma once
#include <string>

#include <kjit/kernel.hpp>

namespace kjit::detail {

/// A constant as a template argument (for_cuda: "float", "64LL") or as the id writes it ("f32").
std::string constant_text(const Constant& c, bool for_cuda);

/// The first arch whose entry points wait for the grid launched before them (griddepcontrol,
/// sm_90): the runtime launches kernels built for it as programmatic dependents.
inline constexpr int grid_dependency_arch = 90;

/// What every entry point runs first. On sm_90+: wait until the grid before has finished and its
/// writes are visible (a no-op unless launched as a dependent; left to the body when it
/// `waits_in_body`), then let the next grid's blocks launch: they take free SM slots and wait
/// there, so a chain of kernels pays no launch gap.
const std::string& grid_dependency_prologue(bool waits_in_body);

/// `extern "C" __global__ void <name>_entry_point(<params>) { <prologue> <name><constants...>(<params>); }`,
/// with __launch_bounds__ when the spec sets max_threads_per_block.
std::string entry_point_text(const KernelSpec& spec);

/// Name, pointer dtypes and constant values joined by "__": "axpby__f32__256__4".
std::string readable_id(const KernelSpec& spec);

}  // namespace kjit::detail
