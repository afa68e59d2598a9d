// Pages mapped into the process with mmap: a file read without a copy, or zeroed memory whose
// pages are populated in one call. A first touch costs a trap for every 4 KB page — about 2 µs
// a page on the virtualised GPU hosts measured (docs/BENCHMARKS.md), milliseconds for the few
// megabytes of a model's weights.
#pragma once
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>

namespace kjit::detail {

class MappedMemory {
public:
    /// `file` mapped read-only, every page read in; nullopt where it cannot be mapped (not a
    /// regular file, empty, or mmap refused), so the caller reads it instead.
    [[nodiscard]] static std::optional<MappedMemory> file(const std::filesystem::path& file);
    /// `bytes` (> 0) of zeroed, writable memory with every page populated (populate). Throws std::bad_alloc
    /// where the system has none to give.
    [[nodiscard]] static MappedMemory zeroed(std::size_t bytes);

    MappedMemory(MappedMemory&& other) noexcept;
    MappedMemory& operator=(MappedMemory&& other) noexcept;
    MappedMemory(const MappedMemory&) = delete;
    MappedMemory& operator=(const MappedMemory&) = delete;
    ~MappedMemory();

    [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {address_, size_}; }

private:
    MappedMemory(std::byte* address, std::size_t size) noexcept : address_(address), size_(size) {}
    std::byte* address_ = nullptr;
    std::size_t size_ = 0;
};

/// The pages of `memory` (any the process owns: a vector's reserved storage) made present and
/// writable in one call, their contents unchanged (MADV_POPULATE_WRITE, Linux 5.14+), in 2 MB
/// pages where the range is megabytes and the system allows: 6.4 MB in 0.8 ms, against 1.9 ms
/// in 4 KB pages and 6.8 ms of faults on the build machine. Where the kernel cannot, they fault
/// in as they are first written, as without it.
void populate(std::span<std::byte> memory) noexcept;

}  // namespace kjit::detail
