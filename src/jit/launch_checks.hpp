// Launch checks run before every launch of a resolved kernel.
#pragma once
#include <kjit/runtime.hpp>

namespace kjit::detail {

/// Throws UsageError for a launch the driver would refuse (a zero dimension, a cluster that does
/// not divide the grid or that the device lacks, more threads than the kernel's launch bounds,
/// more shared memory than the device allows); raises the function's dynamic shared-memory
/// limit when `config` needs more than it allows now.
void check_launch(const Kernel& kernel, const LoadedKernel& lk, const Device& device, const LaunchConfig& config);

}  // namespace kjit::detail
