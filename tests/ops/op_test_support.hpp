// What the ops' CPU tests share: a visitor that records arguments, fake device pointers, and
// the message of the UsageError an expression throws.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <kjit/args.hpp>
#include <kjit/error.hpp>

namespace kjit::test {

/// Records what pack_args visits, in order.
struct Recorder final : ArgVisitor {
    std::vector<std::variant<void*, std::int64_t, double, bool, const TensorMap*>> args;
    void visit_ptr(void* p) override { args.emplace_back(p); }
    void visit_bool(bool v) override { args.emplace_back(v); }
    void visit_i8(std::int8_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_i16(std::int16_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_i32(std::int32_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_i64(std::int64_t v) override { args.emplace_back(v); }
    void visit_u8(std::uint8_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_u16(std::uint16_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_u32(std::uint32_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_u64(std::uint64_t v) override { args.emplace_back(static_cast<std::int64_t>(v)); }
    void visit_f32(float v) override { args.emplace_back(double{v}); }
    void visit_f64(double v) override { args.emplace_back(v); }
    void visit_tensor_map(const TensorMap& map) override { args.emplace_back(&map); }
    std::int64_t i(std::size_t k) const { return std::get<std::int64_t>(args.at(k)); }
    void* p(std::size_t k) const { return std::get<void*>(args.at(k)); }
};

inline void* fake(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

inline std::string error_of(auto&& make) {
    try {
        make();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace kjit::test
