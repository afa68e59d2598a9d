// kjit/device_traits.hpp — what an op's dispatch needs to know about the device it plans for.
#pragma once

namespace kjit {

class Device;

/// What dispatch needs to know about the device. No defaults: a plan made without a device
/// names the one it assumes.
struct DeviceTraits {
    int multiprocessors;
    int max_shared_bytes;  ///< per block, opt-in
    bool clusters;         ///< thread-block clusters (sm_90+): split-K is possible

    /// Throws UsageError unless the counts are positive.
    DeviceTraits(int multiprocessors, int max_shared_bytes, bool clusters);
    static DeviceTraits of(const Device& device);
};

}  // namespace kjit
