// kjit/device_traits.hpp — what an op's dispatch needs to know about the device it plans for.
#pragma once
#include <kjit/arch.hpp>

namespace kjit {

class Device;

/// What dispatch needs to know about the device. No defaults: a plan made without a device
/// names the one it assumes.
struct DeviceTraits {
    int multiprocessors;
    int max_shared_bytes;  ///< per block, opt-in
    Arch arch;             ///< the device's own (sm_90 for a 9.0 device)

    /// Throws UsageError unless the counts are positive.
    DeviceTraits(int multiprocessors, int max_shared_bytes, Arch arch);
    static DeviceTraits of(const Device& device);

    /// Thread-block clusters (sm_90+): split-K is possible.
    [[nodiscard]] bool clusters() const noexcept { return arch.major() >= 9; }
    /// TMA + wgmma kernels (sm_90a) run: a 9.0 device.
    [[nodiscard]] bool hopper() const noexcept { return arch.number() == 90; }
};

}  // namespace kjit
