// Devices without a GPU: the driver's version as /proc/driver/nvidia/version gives it, which
// tuned winners are tied to.
#include <doctest/doctest.h>

#include "cuda/driver_api.hpp"

using kjit::detail::module_version;

TEST_CASE("the driver's version from /proc/driver/nvidia/version, proprietary and open kernel modules") {
    CHECK(module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Sun Oct 12 2025\n"
                         "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n") == "580.159.04");
    CHECK(module_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                         "(dvs-builder@U16-I3-B08-1-1)  Sun Oct 12 2025\nGCC version:  gcc version 12.2.0\n") ==
          "580.159.04");
    CHECK(module_version("").empty());
    CHECK(module_version("NVRM version: something else entirely 12").empty());
}
