// Streams: owned (created non-blocking, destroyed once) or borrowed from another framework.
#include <kjit/driver.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {

void detail::destroy_stream(CUstream_st* stream) noexcept { release(&Driver::cuStreamDestroy, stream); }

Stream::Stream(const Device& device)
    : device_(device),
      owned_(detail::create_handle<CUstream>(device, &detail::Driver::cuStreamCreate, "cuStreamCreate",
                                             unsigned{CU_STREAM_NON_BLOCKING})) {}

Stream Stream::borrow(const Device& device, CUstream_st* handle) noexcept { return Stream(device, handle); }

void Stream::synchronize() const { KJIT_CU(cuStreamSynchronize, handle()); }

bool Stream::capturing() const {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    KJIT_CU(cuStreamIsCapturing, handle(), &status);
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace kjit
