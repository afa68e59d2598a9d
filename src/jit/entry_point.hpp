// Entry-point generation: what a KernelSpec becomes before NVRTC sees it.
#pragma once
#include <string>

#include <kjit/kernel.hpp>

namespace kjit::detail {

/// A constant as a template argument (for_cuda: "float", "64LL") or as the id writes it ("f32").
std::string constant_text(const Constant& c, bool for_cuda);

/// `extern "C" __global__ void <name>_entry_point(<params>) { <name><constants...>(<params>); }`,
/// with __launch_bounds__ when the spec sets max_threads_per_block.
std::string entry_point_text(const KernelSpec& spec);

/// Name, pointer dtypes and constant values joined by "__": "axpby__f32__256__4".
std::string readable_id(const KernelSpec& spec);

}  // namespace kjit::detail
