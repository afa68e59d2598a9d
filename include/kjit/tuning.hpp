// kjit/tuning.hpp — tuned winners: the configuration that ran a kernel family fastest on one
// problem, kept in the kernel cache's database so that they travel with its export and import.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <kjit/cache.hpp>

namespace kjit {

/// A tuned winner: the configuration that ran a kernel family fastest on one problem shape.
struct TunedConfig {
    std::string kernel;  ///< family name, e.g. "conv2d_bn_silu"
    std::string shape;   ///< canonical problem description
    std::string device;  ///< device name
    std::string arch;    ///< "sm_90"
    std::string config;  ///< the winning configuration, as the tuner wrote it
    double microseconds = 0;
};

/// Stores `winner`, replacing the one for the same (kernel, shape, device, arch). Throws Error
/// when the cache works from memory.
void store_tuned(Cache& cache, const TunedConfig& winner);
/// The winner for (kernel, shape, device, arch), if `cache` holds one (never throws).
[[nodiscard]] std::optional<TunedConfig> find_tuned(Cache& cache, const std::string& kernel, const std::string& shape,
                                                    const std::string& device, const std::string& arch);
/// Every winner `cache` holds. Throws Error when the cache works from memory.
[[nodiscard]] std::vector<TunedConfig> tuned_configs(Cache& cache);

}  // namespace kjit
