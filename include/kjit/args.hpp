// kjit/args.hpp — kernel arguments: a visitor interface and a checked, allocation-free packer.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include <kjit/kernel.hpp>
#include <kjit/tensor_map.hpp>

namespace kjit {

/// Receives kernel arguments in order (RuntimeOp::pack_args writes into one).
class ArgVisitor {
public:
    virtual ~ArgVisitor() = default;
    virtual void visit_ptr(void* p) = 0;
    virtual void visit_bool(bool v) = 0;
    virtual void visit_i8(std::int8_t v) = 0;
    virtual void visit_i16(std::int16_t v) = 0;
    virtual void visit_i32(std::int32_t v) = 0;
    virtual void visit_i64(std::int64_t v) = 0;
    virtual void visit_u8(std::uint8_t v) = 0;
    virtual void visit_u16(std::uint16_t v) = 0;
    virtual void visit_u32(std::uint32_t v) = 0;
    virtual void visit_u64(std::uint64_t v) = 0;
    virtual void visit_f32(float v) = 0;
    virtual void visit_f64(double v) = 0;
    /// The map is referenced, not copied: it must outlive the launch the arguments are for.
    virtual void visit_tensor_map(const TensorMap& map) = 0;
};

/// One typed argument for the generic launch: `Arg(x_ptr)`, `Arg(std::int32_t{n})`, `Arg(map)`
/// (a TensorMap is referenced: it must outlive the launch).
class Arg {
public:
    template <kernel_argument T>
    requires(!std::is_same_v<T, TensorMap>) Arg(T value)
    noexcept  // NOLINT: implicit by design
        : type_(param_type_v<T>) {
        std::memcpy(bytes_.data(), &value, sizeof(T));
    }
    Arg(const TensorMap& map) noexcept : type_(param_type_v<TensorMap>), external_(&map) {}  // NOLINT: implicit
    [[nodiscard]] ParamType type() const noexcept { return type_; }
    [[nodiscard]] const void* data() const noexcept { return external_ ? external_ : bytes_.data(); }

private:
    ParamType type_;
    alignas(8) std::array<unsigned char, 8> bytes_{};
    const void* external_ = nullptr;
};

/// Builds the `void**` array cuLaunchKernel takes, checking each argument against the
/// kernel's signature as it arrives. Storage is inline: no heap allocation.
class ArgPack final : public ArgVisitor {
public:
    static constexpr std::size_t capacity = 32;

    /// `kernel_id` only names the kernel in error messages.
    ArgPack(std::span<const Param> signature, std::string_view kernel_id);

    void push(const Arg& arg);
    void visit_ptr(void* p) override;
    void visit_bool(bool v) override;
    void visit_i8(std::int8_t v) override;
    void visit_i16(std::int16_t v) override;
    void visit_i32(std::int32_t v) override;
    void visit_i64(std::int64_t v) override;
    void visit_u8(std::uint8_t v) override;
    void visit_u16(std::uint16_t v) override;
    void visit_u32(std::uint32_t v) override;
    void visit_u64(std::uint64_t v) override;
    void visit_f32(float v) override;
    void visit_f64(double v) override;
    void visit_tensor_map(const TensorMap& map) override;

    /// Throws UsageError unless every parameter received exactly one argument.
    void check_complete() const;
    [[nodiscard]] void** data() noexcept { return pointers_.data(); }
    [[nodiscard]] std::size_t size() const noexcept { return count_; }

private:
    void append(const void* bytes, std::size_t size, ParamType given, bool pointer_only);
    void check_next(ParamType given, bool pointer_only) const;
    [[noreturn]] void mismatch(std::string_view given) const;

    std::span<const Param> signature_;
    std::string_view kernel_id_;
    // Left uninitialised: append() writes each slot before it is read, and a launch should not
    // pay for zeroing 512 bytes it never uses.
    std::array<std::uint64_t, capacity> storage_;
    std::array<void*, capacity> pointers_;
    std::size_t count_ = 0;
};

}  // namespace kjit
