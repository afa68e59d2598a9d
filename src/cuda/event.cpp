// Timing events.
#include <kjit/driver.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {

void detail::destroy_event(CUevent_st* event) noexcept { release(&Driver::cuEventDestroy, event); }

Event::Event(const Device& device)
    : device_(device),
      event_(detail::create_handle<CUevent>(device, &detail::Driver::cuEventCreate, "cuEventCreate",
                                            unsigned{CU_EVENT_DEFAULT})) {}

void Event::record(const Stream& stream) { KJIT_CU(cuEventRecord, handle(), stream.handle()); }
void Event::synchronize() const { KJIT_CU(cuEventSynchronize, handle()); }

float Event::elapsed_ms(const Event& start, const Event& end) {
    float ms = 0;
    KJIT_CU(cuEventElapsedTime, &ms, start.handle(), end.handle());
    return ms;
}

}  // namespace kjit
