// Device memory: allocations with range-checked synchronous copies, and pitched async copies.
#include <utility>

#include <fmt/format.h>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {

void detail::free_memory(std::uint64_t address) noexcept {
    release(&Driver::cuMemFree, static_cast<CUdeviceptr>(address));
}

namespace {
std::size_t nonzero(std::size_t bytes) {
    if (bytes == 0) throw UsageError("a device buffer of 0 bytes was asked for: ask for at least 1 byte");
    return bytes;
}

void check_range(std::size_t offset, std::size_t size, std::size_t capacity) {
    if (offset > capacity || size > capacity - offset)
        throw UsageError(
            fmt::format("{} bytes at offset {} do not fit device memory of {} bytes", size, offset, capacity));
}
}  // namespace

DeviceBuffer::DeviceBuffer(const Device& device, std::size_t bytes)
    : DeviceSpan(device, 0, bytes),
      memory_(detail::create_handle<CUdeviceptr>(device, &detail::Driver::cuMemAlloc, "cuMemAlloc", nonzero(bytes))) {
    address_ = memory_.get();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : DeviceSpan(std::exchange(static_cast<DeviceSpan&>(other), DeviceSpan(other.device_, 0, 0))),
      memory_(std::move(other.memory_)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        memory_ = std::move(other.memory_);
        static_cast<DeviceSpan&>(*this) = std::exchange(static_cast<DeviceSpan&>(other),
                                                        DeviceSpan(other.device_, 0, 0));
    }
    return *this;
}

DeviceSpan DeviceSpan::subspan(std::size_t offset, std::size_t bytes) const {
    check_range(offset, bytes, bytes_);
    return {device_, address_ + offset, bytes};
}

void DeviceSpan::upload(std::span<const std::byte> host, std::size_t offset) const {
    check_range(offset, host.size(), bytes_);
    device_.make_current();
    KJIT_CU(cuMemcpyHtoD, static_cast<CUdeviceptr>(address() + offset), host.data(), host.size());
    // From pageable memory it returns once the bytes are staged, not written: a kernel on a
    // non-blocking stream could read them first. The legacy stream's sync waits for the DMA.
    KJIT_CU(cuStreamSynchronize, nullptr);
}

void DeviceSpan::download(std::span<std::byte> host, std::size_t offset) const {
    check_range(offset, host.size(), bytes_);
    device_.make_current();
    KJIT_CU(cuMemcpyDtoH, host.data(), static_cast<CUdeviceptr>(address() + offset), host.size());
}

void DeviceSpan::fill(std::uint8_t value) const {
    device_.make_current();
    // cuMemsetD8 returns before device memory is set and orders nothing with kjit's non-blocking
    // streams: a kernel launched next could run first. Set on the legacy stream and wait for it.
    KJIT_CU(cuMemsetD8Async, static_cast<CUdeviceptr>(address()), value, bytes_, nullptr);
    KJIT_CU(cuStreamSynchronize, nullptr);
}

void DeviceSpan::fill_async(const Stream& stream, std::uint8_t value) const {
    device_.make_current();
    KJIT_CU(cuMemsetD8Async, static_cast<CUdeviceptr>(address()), value, bytes_, stream.handle());
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

}  // namespace kjit
