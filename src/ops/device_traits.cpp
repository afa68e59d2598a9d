// Device traits: from a device, or stated for a plan made without one.
#include <kjit/device_traits.hpp>

#include <kjit/driver.hpp>

#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

DeviceTraits::DeviceTraits(int multiprocessors_, int max_shared_bytes_, Arch arch_)
    : multiprocessors(multiprocessors_), max_shared_bytes(max_shared_bytes_), arch(arch_) {
    require(multiprocessors > 0 && max_shared_bytes > 0,
            "device traits: {} multiprocessors and {} bytes of shared memory per block must be positive",
            multiprocessors, max_shared_bytes);
}

DeviceTraits DeviceTraits::of(const Device& device) {
    return {device.multiprocessor_count(), device.max_shared_bytes_per_block(), device.arch()};
}

}  // namespace kjit
