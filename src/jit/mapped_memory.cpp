#include "jit/mapped_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <utility>

namespace kjit::detail {

std::optional<MappedMemory> MappedMemory::file(const std::filesystem::path& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO's open would wait for a writer
    if (fd < 0) return std::nullopt;
    struct stat st {};
    void* address = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        address = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    ::close(fd);  // the mapping keeps the file
    if (address == MAP_FAILED) return std::nullopt;
    return MappedMemory(static_cast<std::byte*>(address), static_cast<std::size_t>(st.st_size));
}

MappedMemory MappedMemory::zeroed(std::size_t bytes) {
    if (bytes == 0) throw std::bad_alloc();
    void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (address == MAP_FAILED) throw std::bad_alloc();
    return MappedMemory(static_cast<std::byte*>(address), bytes);
}

void populate(std::span<std::byte> memory) noexcept {
#ifdef MADV_POPULATE_WRITE
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(memory.data()) / page * page;  // madvise takes whole pages
    const auto end = reinterpret_cast<std::uintptr_t>(memory.data() + memory.size());
    if (!memory.empty()) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
    (void)memory;
#endif
}

MappedMemory::MappedMemory(MappedMemory&& other) noexcept
    : address_(std::exchange(other.address_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedMemory& MappedMemory::operator=(MappedMemory&& other) noexcept {
    MappedMemory gone(std::move(*this));
    address_ = std::exchange(other.address_, nullptr);
    size_ = std::exchange(other.size_, 0);
    return *this;
}

MappedMemory::~MappedMemory() {
    if (address_) ::munmap(address_, size_);
}

}  // namespace kjit::detail
