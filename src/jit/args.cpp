// The argument packer: checks each argument against the signature as it is visited.
#include <fmt/format.h>
#include <kjit/args.hpp>
#include <kjit/error.hpp>

namespace kjit {

ArgPack::ArgPack(std::span<const Param> signature, std::string_view kernel_id)
    : signature_(signature), kernel_id_(kernel_id) {
    if (signature.size() > capacity)
        throw UsageError(
            fmt::format("kernel {} has {} parameters: kjit packs at most {}", kernel_id, signature.size(), capacity));
}

void ArgPack::mismatch(std::string_view given) const {
    if (count_ >= signature_.size())
        throw UsageError(fmt::format("too many arguments for kernel {}: it takes {} ({} given so far, then {})",
                                     kernel_id_, signature_.size(), count_, given));
    const Param& p = signature_[count_];
    throw UsageError(fmt::format("argument {} ('{}') of kernel {} must be {}, but {} was given", count_ + 1, p.name,
                                 kernel_id_, to_string(p.type), given));
}

void ArgPack::check_next(ParamType given, bool pointer_only) const {
    if (count_ >= signature_.size()) mismatch(pointer_only ? "a pointer" : to_string(given));
    const ParamType expected = signature_[count_].type;
    const bool ok = pointer_only ? expected.pointer : expected == given;
    if (!ok) mismatch(pointer_only ? "a pointer" : to_string(given));
}

void ArgPack::append(const void* bytes, std::size_t size, ParamType given, bool pointer_only) {
    check_next(given, pointer_only);
    storage_[count_] = 0;
    std::memcpy(&storage_[count_], bytes, size);
    pointers_[count_] = &storage_[count_];
    ++count_;
}

void ArgPack::push(const Arg& arg) {
    if (arg.type() == param_type_v<TensorMap>) return visit_tensor_map(*static_cast<const TensorMap*>(arg.data()));
    append(arg.data(), 8, arg.type(), false);
}

void ArgPack::visit_tensor_map(const TensorMap& map) {
    check_next(param_type_v<TensorMap>, false);
    pointers_[count_++] = const_cast<TensorMap*>(&map);  // cuLaunchKernel copies the 128 bytes
}

void ArgPack::visit_ptr(void* p) { append(&p, sizeof p, ParamType{Scalar::u8, true}, true); }
void ArgPack::visit_bool(bool v) { append(&v, sizeof v, param_type_v<bool>, false); }
void ArgPack::visit_i8(std::int8_t) { mismatch("i8"); }
void ArgPack::visit_i16(std::int16_t) { mismatch("i16"); }
void ArgPack::visit_i32(std::int32_t v) { append(&v, sizeof v, param_type_v<std::int32_t>, false); }
void ArgPack::visit_i64(std::int64_t v) { append(&v, sizeof v, param_type_v<std::int64_t>, false); }
void ArgPack::visit_u8(std::uint8_t) { mismatch("u8"); }
void ArgPack::visit_u16(std::uint16_t) { mismatch("u16"); }
void ArgPack::visit_u32(std::uint32_t v) { append(&v, sizeof v, param_type_v<std::uint32_t>, false); }
void ArgPack::visit_u64(std::uint64_t v) { append(&v, sizeof v, param_type_v<std::uint64_t>, false); }
void ArgPack::visit_f32(float v) { append(&v, sizeof v, param_type_v<float>, false); }
void ArgPack::visit_f64(double v) { append(&v, sizeof v, param_type_v<double>, false); }

void ArgPack::check_complete() const {
    if (count_ != signature_.size())
        throw UsageError(fmt::format("kernel {} takes {} arguments but {} were given; missing '{}' ({})", kernel_id_,
                                     signature_.size(), count_, signature_[count_].name,
                                     to_string(signature_[count_].type)));
}

}  // namespace kjit
