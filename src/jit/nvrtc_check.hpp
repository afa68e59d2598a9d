// Turns an nvrtcResult into an exception naming the call.
#pragma once
#include <nvrtc.h>

#include <fmt/format.h>
#include <kjit/error.hpp>

namespace kjit::detail {
inline void check_nvrtc(nvrtcResult result, const char* call) {
    if (result != NVRTC_SUCCESS)
        throw Error(fmt::format("{} failed: {} ({})", call, nvrtcGetErrorString(result), static_cast<int>(result)));
}
}  // namespace kjit::detail
