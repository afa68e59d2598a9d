// kjit/driver.hpp — RAII owners over CUDA driver handles. libcuda is loaded at run time, so
// everything here throws NoDeviceError (not a link or load failure) where no driver exists.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <kjit/arch.hpp>
#include <kjit/detail/unique_handle.hpp>

// Opaque driver handle types, declared exactly as cuda.h declares them.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraphExec_st;

namespace kjit {
namespace detail {
struct DeviceRecord;
// How each owned handle is released (src/cuda); failures there have nowhere useful to go.
void destroy_stream(CUstream_st* stream) noexcept;
void free_memory(std::uint64_t address) noexcept;
void destroy_event(CUevent_st* event) noexcept;
void destroy_graph_exec(CUgraphExec_st* exec) noexcept;
void unload_module(CUmod_st* module) noexcept;
}  // namespace detail

struct Dim3 {
    unsigned x = 1;
    unsigned y = 1;
    unsigned z = 1;
};

/// Why launching is impossible here ("no CUDA driver: …", "no CUDA device"), or empty.
[[nodiscard]] std::string device_unavailable_reason();
/// Number of CUDA devices; 0 where there is no driver.
[[nodiscard]] int device_count() noexcept;
/// The NVIDIA driver's version, "580.159.04" (from /proc/driver/nvidia/version), or where that
/// cannot be read the CUDA version the driver implements, "CUDA 13.0" (cuDriverGetVersion): what
/// a tuned winner's timing is tied to. Throws NoDeviceError where there is no driver.
[[nodiscard]] std::string driver_version();

/// A device and its retained primary context (retained on first use, kept for the process).
class Device {
public:
    /// Throws NoDeviceError when there is no driver or no such device.
    static Device get(int ordinal = 0);

    [[nodiscard]] int ordinal() const noexcept;
    [[nodiscard]] const std::string& name() const noexcept;
    [[nodiscard]] Arch arch() const noexcept;
    [[nodiscard]] int multiprocessor_count() const noexcept;
    /// Largest dynamic + static shared memory one block may opt into.
    [[nodiscard]] int max_shared_bytes_per_block() const noexcept;
    [[nodiscard]] CUctx_st* context() const noexcept;
    /// Makes the primary context current on the calling thread (cheap if it already is).
    void make_current() const;
    void synchronize() const;

private:
    explicit Device(const detail::DeviceRecord* record) noexcept : record_(record) {}
    const detail::DeviceRecord* record_;
};

/// An owned (or borrowed) stream on one device.
class Stream {
public:
    explicit Stream(const Device& device);
    /// Wraps a stream someone else owns (e.g. a framework's); it is not destroyed here.
    static Stream borrow(const Device& device, CUstream_st* handle) noexcept;

    [[nodiscard]] CUstream_st* handle() const noexcept { return owned_ ? owned_.get() : borrowed_; }
    [[nodiscard]] const Device& device() const noexcept { return device_; }
    void synchronize() const;
    /// Whether work on this stream is being captured into a CUDA graph now (nothing it enqueues
    /// runs until the graph is launched, and synchronising it would end the capture).
    [[nodiscard]] bool capturing() const;

private:
    Stream(const Device& device, CUstream_st* borrowed) noexcept : device_(device), borrowed_(borrowed) {}
    Device device_;
    CUstream_st* borrowed_ = nullptr;
    detail::UniqueHandle<CUstream_st*, detail::destroy_stream> owned_;
};

/// Device memory someone else owns — a DeviceBuffer, or a slice of one (a model's parameters
/// share one allocation) — with range-checked copies. It must not outlive that memory.
class DeviceSpan {
public:
    DeviceSpan(const Device& device, std::uint64_t address, std::size_t bytes) noexcept
        : device_(device), address_(address), bytes_(bytes) {}

    /// The device address as a typed pointer, for kernel arguments.
    template <class T>
    [[nodiscard]] T* as() const noexcept {
        return reinterpret_cast<T*>(static_cast<std::uintptr_t>(address()));
    }
    [[nodiscard]] std::uint64_t address() const noexcept { return address_; }
    [[nodiscard]] std::size_t size_bytes() const noexcept { return bytes_; }
    [[nodiscard]] const Device& device() const noexcept { return device_; }
    /// `bytes` from `offset`; throws UsageError where they do not fit.
    [[nodiscard]] DeviceSpan subspan(std::size_t offset, std::size_t bytes) const;

    /// Synchronous copies; the byte ranges are checked against the span's size. A download does
    /// not wait for kjit's streams (they do not synchronise with the legacy stream): synchronise
    /// the stream that wrote the memory first.
    void upload(std::span<const std::byte> host, std::size_t offset = 0) const;
    void download(std::span<std::byte> host, std::size_t offset = 0) const;
    template <class T>
    void upload(std::span<const T> host, std::size_t offset = 0) const {
        upload(std::as_bytes(host), offset);
    }
    template <class T>
    void download(std::span<T> host, std::size_t offset = 0) const {
        download(std::as_writable_bytes(host), offset);
    }
    /// Sets every byte to `value` (synchronous).
    void fill(std::uint8_t value) const;
    /// Enqueues setting every byte to `value` on `stream`; it is done once the stream is.
    void fill_async(const Stream& stream, std::uint8_t value) const;

protected:
    Device device_;
    std::uint64_t address_ = 0;
    std::size_t bytes_ = 0;
};

/// Device memory, owned: freed with the buffer. A moved-from buffer is empty (address 0).
class DeviceBuffer : public DeviceSpan {
public:
    DeviceBuffer(const Device& device, std::size_t bytes);
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() = default;

private:
    detail::UniqueHandle<std::uint64_t, detail::free_memory> memory_;
};

/// A timing event.
class Event {
public:
    explicit Event(const Device& device);

    void record(const Stream& stream);
    void synchronize() const;
    /// Milliseconds between two recorded, completed events.
    [[nodiscard]] static float elapsed_ms(const Event& start, const Event& end);
    [[nodiscard]] CUevent_st* handle() const noexcept { return event_.get(); }

private:
    Device device_;
    detail::UniqueHandle<CUevent_st*, detail::destroy_event> event_;
};

/// Stream work captured once and replayed with a single launch (CUDA graphs): how benchmarks
/// take launch overhead out of the measurement, and how an executor replays a whole forward.
class Graph {
public:
    /// Captures everything `work` enqueues on `stream` (nothing runs during capture).
    template <class Work>
    static Graph capture(const Stream& stream, Work&& work) {
        begin_capture(stream);
        try {
            work();
        } catch (...) {
            abandon_capture(stream);
            throw;
        }
        return end_capture(stream);
    }

    /// Enqueues one replay on `stream`.
    void launch(const Stream& stream) const;

private:
    explicit Graph(CUgraphExec_st* exec) noexcept : exec_(exec) {}
    static void begin_capture(const Stream& stream);
    static void abandon_capture(const Stream& stream) noexcept;
    static Graph end_capture(const Stream& stream);
    detail::UniqueHandle<CUgraphExec_st*, detail::destroy_graph_exec> exec_;
};

/// Enqueues a 2-D device-to-device copy on `stream`: `rows` rows of `row_bytes`, read every
/// `src_pitch` bytes from `src` and written every `dst_pitch` bytes to `dst`.
void copy_2d_async(const Stream& stream, std::uint64_t dst, std::size_t dst_pitch, std::uint64_t src,
                   std::size_t src_pitch, std::size_t row_bytes, std::size_t rows);

/// How a module's code got onto the device.
enum class LoadPath { cubin, ptx };

/// A loaded module (cuModuleLoadDataEx). Tries the cubin first; if its arch does not fit the
/// device, JIT-compiles the PTX through the driver.
class Module {
public:
    Module(const Device& device, std::span<const std::byte> cubin, std::string_view ptx);

    /// Throws CudaError naming the symbol if it is not in the module.
    [[nodiscard]] CUfunc_st* function(const std::string& name) const;
    [[nodiscard]] LoadPath load_path() const noexcept { return path_; }
    [[nodiscard]] const Device& device() const noexcept { return device_; }

private:
    Device device_;
    detail::UniqueHandle<CUmod_st*, detail::unload_module> module_;
    LoadPath path_ = LoadPath::cubin;
};

}  // namespace kjit
