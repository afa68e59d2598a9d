// kjit/tuning.hpp — tuned winners: the configuration that ran a kernel family fastest on one
// problem, kept in the kernel cache's database so that they travel with its export and import.
// A winner holds for the device, arch and driver it was timed on and for the kernel source it
// ran: a kernel edit or a new driver makes it stale, and the dispatches pass it by.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <kjit/cache.hpp>

namespace kjit {

/// A tuned winner: the configuration that ran a kernel family fastest on one problem shape.
struct TunedConfig {
    std::string kernel;       ///< family name, e.g. "conv2d_bn_silu"
    std::string shape;        ///< canonical problem description
    std::string device;       ///< device name
    std::string arch;         ///< "sm_90"
    std::string driver;       ///< driver_version() it was timed under
    std::string source_hash;  ///< Kernel::source_hash() of the kernel the configuration runs
    std::string config;       ///< the winning configuration, as the tuner wrote it
    double microseconds = 0;
    std::int64_t created_at = 0;  ///< unix seconds; store_tuned sets it
};

/// Stores `winner`, replacing the one for the same (kernel, shape, device, arch, driver,
/// source_hash). Throws Error when the cache works from memory.
void store_tuned(Cache& cache, const TunedConfig& winner);
/// The winners for (kernel, shape, device, arch, driver) that `cache` holds, newest first: one
/// per kernel source they were timed with — the caller takes the one whose source_hash is its
/// kernel's now (never throws; none where the cache works from memory).
[[nodiscard]] std::vector<TunedConfig> find_tuned(Cache& cache, const std::string& kernel, const std::string& shape,
                                                  const std::string& device, const std::string& arch,
                                                  const std::string& driver);
/// Every winner `cache` holds, by kernel, shape, device, arch. Throws Error when the cache works
/// from memory.
[[nodiscard]] std::vector<TunedConfig> tuned_configs(Cache& cache);
/// Removes every winner; returns how many. Throws Error when the cache works from memory.
std::size_t clear_tuned(Cache& cache);

}  // namespace kjit
