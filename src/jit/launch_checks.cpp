// Launch checks: what the driver would refuse, refused first with the reason; the dynamic
// shared-memory limit raised when a launch asks for more than 48 KB.
#include "jit/launch_checks.hpp"

#include <fmt/format.h>
#include <kjit/error.hpp>

#include "cuda/driver_api.hpp"

namespace kjit::detail {

void check_launch(const Kernel& kernel, const LoadedKernel& lk, const Device& device, const LaunchConfig& config) {
    const auto& [grid, block, shared, cluster] = config;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        throw UsageError(
            fmt::format("launch of {} with grid ({}, {}, {}) and block ({}, {}, {}): every dimension "
                        "must be at least 1",
                        kernel.id(), grid.x, grid.y, grid.z, block.x, block.y, block.z));
    const Dim3 c = cluster;
    if (!c.x || !c.y || !c.z || grid.x % c.x || grid.y % c.y || grid.z % c.z)
        throw UsageError(
            fmt::format("launch of {}: cluster ({}, {}, {}) must be at least 1 and divide the grid "
                        "({}, {}, {})",
                        kernel.id(), c.x, c.y, c.z, grid.x, grid.y, grid.z));
    if (c.x * c.y * c.z > 1 && device.arch().major() < 9)
        throw UsageError(
            fmt::format("launch of {} with a cluster of {} blocks: clusters need sm_90 or newer, {} "
                        "is {}",
                        kernel.id(), c.x * c.y * c.z, device.name(), device.arch().name()));
    const unsigned long long threads = 1ull * block.x * block.y * block.z;
    const unsigned bound = kernel.max_threads_per_block() ? kernel.max_threads_per_block() : 1024;
    if (threads > bound)
        throw UsageError(fmt::format("launch of {} with {} threads per block: it was compiled for at most {}",
                                     kernel.id(), threads, bound));
    if (shared <= lk.dynamic_shared_limit.load(std::memory_order_relaxed)) return;
    const int static_bytes = lk.entry->compiled.resources.shared_static_bytes;
    if (static_cast<long long>(shared) + static_bytes > device.max_shared_bytes_per_block())
        throw UsageError(
            fmt::format("launch of {} asks for {} bytes of dynamic shared memory on top of {} static: "
                        "{} allows {} per block",
                        kernel.id(), shared, static_bytes, device.name(), device.max_shared_bytes_per_block()));
    device.make_current();
    KJIT_CU(cuFuncSetAttribute, lk.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared));
    unsigned seen = lk.dynamic_shared_limit.load();
    while (seen < shared && !lk.dynamic_shared_limit.compare_exchange_weak(seen, shared)) {}
}

}  // namespace kjit::detail
