// Splits a fuzzer's bytes into the fields a target needs, without FuzzedDataProvider (the
// replay build uses g++ and only what the README installs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace kjit::fuzz {

class Input {
public:
    Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

    /// The next field: a one-byte length (0-255), then that many bytes (fewer at the end).
    std::string bytes() {
        const std::size_t n = std::min<std::size_t>(byte(), size_);
        std::string out(reinterpret_cast<const char*>(data_), n);
        data_ += n, size_ -= n;
        return out;
    }
    /// Everything left.
    std::string rest() {
        std::string out(reinterpret_cast<const char*>(data_), size_);
        size_ = 0;
        return out;
    }
    std::uint8_t byte() {
        if (!size_) return 0;
        --size_;
        return *data_++;
    }
    std::int64_t i64() {
        std::int64_t v = 0;
        const std::size_t n = std::min(sizeof v, size_);
        if (n) std::memcpy(&v, data_, n);  // data_ may be null for an empty input
        data_ += n, size_ -= n;
        return v;
    }

private:
    const std::uint8_t* data_;
    std::size_t size_;
};

}  // namespace kjit::fuzz
