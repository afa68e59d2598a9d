// RAII owners of driver handles: primary context, stream, device memory, event.
#include <deque>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>

#include "cuda_driver.hpp"

namespace kjit {
namespace detail {

/// Retains a device's primary context; releases it when destroyed.
class PrimaryContext {
public:
    explicit PrimaryContext(CUdevice device) : device_(device) { KJIT_CU(cuDevicePrimaryCtxRetain, &context_, device); }
    ~PrimaryContext() { driver().cuDevicePrimaryCtxRelease(device_); }
    PrimaryContext(const PrimaryContext&) = delete;
    PrimaryContext& operator=(const PrimaryContext&) = delete;
    [[nodiscard]] CUcontext get() const noexcept { return context_; }

private:
    CUdevice device_;
    CUcontext context_ = nullptr;
};

struct DeviceRecord {
    int ordinal;
    PrimaryContext context;
    std::string name;
    Arch arch;
    int multiprocessors;
    int max_shared_optin;
};

namespace {
int attribute(CUdevice device, CUdevice_attribute which) {
    int value = 0;
    KJIT_CU(cuDeviceGetAttribute, &value, which, device);
    return value;
}

void make_current(CUcontext context) {
    CUcontext current = nullptr;
    KJIT_CU(cuCtxGetCurrent, &current);
    if (current != context) KJIT_CU(cuCtxSetCurrent, context);
}

/// Releases without throwing (destructors): a failure here has nowhere useful to go.
template <class F, class... A>
void release(F fn, A... args) noexcept {
    try {
        (void)(driver().*fn)(args...);
    } catch (...) {
    }
}
}  // namespace
}  // namespace detail

Device Device::get(int ordinal) {
    // Records live for the whole process: primary contexts stay retained, so handles never dangle.
    static auto* records = new std::deque<std::unique_ptr<detail::DeviceRecord>>();
    static std::mutex mutex;
    (void)detail::driver();  // throws NoDeviceError, saying why, where there is no driver
    std::lock_guard lock(mutex);
    for (const auto& r : *records)
        if (r->ordinal == ordinal) return Device(r.get());
    int count = 0;
    KJIT_CU(cuDeviceGetCount, &count);
    if (ordinal < 0 || ordinal >= count)
        throw NoDeviceError(fmt::format("no CUDA device {}: this machine has {} (valid ordinals 0..{})", ordinal, count,
                                        count - 1));
    CUdevice device = 0;
    KJIT_CU(cuDeviceGet, &device, ordinal);
    char name[256] = {};
    KJIT_CU(cuDeviceGetName, name, static_cast<int>(sizeof name), device);
    records->push_back(std::unique_ptr<detail::DeviceRecord>(new detail::DeviceRecord{
        ordinal, detail::PrimaryContext(device), name,
        Arch(detail::attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
             detail::attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
        detail::attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        detail::attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)}));
    return Device(records->back().get());
}

int Device::ordinal() const noexcept { return record_->ordinal; }
const std::string& Device::name() const noexcept { return record_->name; }
Arch Device::arch() const noexcept { return record_->arch; }
int Device::multiprocessor_count() const noexcept { return record_->multiprocessors; }
int Device::max_shared_bytes_per_block() const noexcept { return record_->max_shared_optin; }
CUctx_st* Device::context() const noexcept { return record_->context.get(); }
void Device::make_current() const { detail::make_current(context()); }
void Device::synchronize() const {
    make_current();
    KJIT_CU(cuCtxSynchronize);
}

// ---- Stream ---------------------------------------------------------------------------------

Stream::Stream(const Device& device) : device_(device) {
    device.make_current();
    KJIT_CU(cuStreamCreate, &handle_, CU_STREAM_NON_BLOCKING);
    owned_ = true;
}

Stream Stream::borrow(const Device& device, CUstream_st* handle) noexcept { return Stream(device, handle, false); }

Stream::~Stream() {
    if (owned_ && handle_) detail::release(&detail::Driver::cuStreamDestroy, handle_);
}

Stream::Stream(Stream&& other) noexcept
    : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)), owned_(other.owned_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        if (owned_ && handle_) detail::release(&detail::Driver::cuStreamDestroy, handle_);
        device_ = other.device_;
        handle_ = std::exchange(other.handle_, nullptr);
        owned_ = other.owned_;
    }
    return *this;
}

void Stream::synchronize() const { KJIT_CU(cuStreamSynchronize, handle_); }

// ---- DeviceBuffer ---------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(const Device& device, std::size_t bytes) : device_(device), bytes_(bytes) {
    if (bytes == 0) throw UsageError("a device buffer of 0 bytes was asked for: ask for at least 1 byte");
    device.make_current();
    CUdeviceptr address = 0;
    KJIT_CU(cuMemAlloc, &address, bytes);
    address_ = address;
}

DeviceBuffer::~DeviceBuffer() {
    if (address_) detail::release(&detail::Driver::cuMemFree, static_cast<CUdeviceptr>(address_));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_), address_(std::exchange(other.address_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        if (address_) detail::release(&detail::Driver::cuMemFree, static_cast<CUdeviceptr>(address_));
        device_ = other.device_;
        address_ = std::exchange(other.address_, 0);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

namespace {
void check_range(std::size_t offset, std::size_t size, std::size_t capacity) {
    if (offset > capacity || size > capacity - offset)
        throw UsageError(fmt::format("copy of {} bytes at offset {} does not fit a device buffer of {} bytes", size,
                                     offset, capacity));
}
}  // namespace

void DeviceBuffer::upload(std::span<const std::byte> host, std::size_t offset) {
    check_range(offset, host.size(), bytes_);
    device_.make_current();
    KJIT_CU(cuMemcpyHtoD, static_cast<CUdeviceptr>(address_ + offset), host.data(), host.size());
}

void DeviceBuffer::download(std::span<std::byte> host, std::size_t offset) const {
    check_range(offset, host.size(), bytes_);
    device_.make_current();
    KJIT_CU(cuMemcpyDtoH, host.data(), static_cast<CUdeviceptr>(address_ + offset), host.size());
}

void DeviceBuffer::fill(std::uint8_t value) {
    device_.make_current();
    KJIT_CU(cuMemsetD8, static_cast<CUdeviceptr>(address_), value, bytes_);
}

void copy_2d_async(const Stream& stream, std::uint64_t dst, std::size_t dst_pitch, std::uint64_t src,
                   std::size_t src_pitch, std::size_t row_bytes, std::size_t rows) {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = static_cast<CUdeviceptr>(src);
    copy.srcPitch = src_pitch;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = static_cast<CUdeviceptr>(dst);
    copy.dstPitch = dst_pitch;
    copy.WidthInBytes = row_bytes;
    copy.Height = rows;
    stream.device().make_current();
    KJIT_CU(cuMemcpy2DAsync, &copy, stream.handle());
}

// ---- Event ----------------------------------------------------------------------------------

Event::Event(const Device& device) : device_(device) {
    device.make_current();
    KJIT_CU(cuEventCreate, &handle_, CU_EVENT_DEFAULT);
}

Event::~Event() {
    if (handle_) detail::release(&detail::Driver::cuEventDestroy, handle_);
}

Event::Event(Event&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
    if (this != &other) {
        if (handle_) detail::release(&detail::Driver::cuEventDestroy, handle_);
        device_ = other.device_;
        handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
}

void Event::record(const Stream& stream) { KJIT_CU(cuEventRecord, handle_, stream.handle()); }
void Event::synchronize() const { KJIT_CU(cuEventSynchronize, handle_); }

float Event::elapsed_ms(const Event& start, const Event& end) {
    float ms = 0;
    KJIT_CU(cuEventElapsedTime, &ms, start.handle_, end.handle_);
    return ms;
}

// ---- Graph ----------------------------------------------------------------------------------

void Graph::begin_capture(const Stream& stream) {
    stream.device().make_current();
    KJIT_CU(cuStreamBeginCapture, stream.handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

void Graph::abandon_capture(const Stream& stream) noexcept {
    try {
        CUgraph graph = nullptr;
        if (detail::driver().cuStreamEndCapture(stream.handle(), &graph) == CUDA_SUCCESS && graph)
            detail::driver().cuGraphDestroy(graph);
    } catch (...) {
    }
}

Graph Graph::end_capture(const Stream& stream) {
    CUgraph graph = nullptr;
    KJIT_CU(cuStreamEndCapture, stream.handle(), &graph);
    CUgraphExec exec = nullptr;
    const CUresult rc = detail::driver().cuGraphInstantiate(&exec, graph, 0);
    detail::driver().cuGraphDestroy(graph);
    detail::check(rc, "cuGraphInstantiate");
    return Graph(exec);
}

Graph::~Graph() {
    if (exec_) detail::release(&detail::Driver::cuGraphExecDestroy, exec_);
}

Graph::Graph(Graph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
    if (this != &other) {
        if (exec_) detail::release(&detail::Driver::cuGraphExecDestroy, exec_);
        exec_ = std::exchange(other.exec_, nullptr);
    }
    return *this;
}

void Graph::launch(const Stream& stream) const { KJIT_CU(cuGraphLaunch, exec_, stream.handle()); }

}  // namespace kjit
