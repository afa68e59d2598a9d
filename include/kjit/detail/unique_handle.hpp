// kjit/detail/unique_handle.hpp — the one ownership policy of every driver handle kjit owns.
#pragma once
#include <utility>

namespace kjit::detail {

/// Owns one driver handle (a pointer, or a device address where 0 is null) and releases it
/// exactly once through `Destroy`, which must not throw. Move-only: a moved-from owner is empty.
template <class Handle, void (*Destroy)(Handle) noexcept>
class UniqueHandle {
public:
    UniqueHandle() noexcept = default;
    explicit UniqueHandle(Handle handle) noexcept : handle_(handle) {}
    ~UniqueHandle() { reset(); }
    UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
    UniqueHandle& operator=(UniqueHandle&& other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, Handle{});
        }
        return *this;
    }
    UniqueHandle(const UniqueHandle&) = delete;
    UniqueHandle& operator=(const UniqueHandle&) = delete;

    [[nodiscard]] Handle get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != Handle{}; }
    void reset() noexcept {
        if (handle_ != Handle{}) Destroy(std::exchange(handle_, Handle{}));
    }

private:
    Handle handle_{};
};

}  // namespace kjit::detail
