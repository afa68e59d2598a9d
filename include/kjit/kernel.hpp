// kjit/kernel.hpp — a kernel object: name, compile-time constants, parameter signature, sources.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <kjit/arch.hpp>

namespace kjit {

struct CompileOptions;
struct LaunchConfig;
class Stream;
class Arg;
struct TensorMap;
namespace detail {
struct KernelState;
}  // namespace detail

/// Element and scalar types a kernel parameter or type constant may have; `tensor_map` is a
/// by-value TMA descriptor parameter (kjit/tensor_map.hpp).
enum class Scalar : std::uint8_t { boolean, u8, i32, i64, u32, u64, f16, bf16, f32, f64, tensor_map };

/// "f32", "bf16", "bool", … (used in readable ids and messages).
[[nodiscard]] std::string_view short_name(Scalar s) noexcept;
/// The CUDA C++ spelling NVRTC sees: "float", "long long", "kjit::f16", …
[[nodiscard]] std::string_view cuda_type(Scalar s) noexcept;
/// Bytes one value takes in device memory (128 for a tensor map).
[[nodiscard]] std::size_t byte_size(Scalar s) noexcept;

/// A parameter type: a pointer to f32/f16/bf16/i32/i64/u8, or a scalar i32/i64/u32/u64/f32/f64/bool,
/// or a TensorMap.
struct ParamType {
    Scalar scalar;
    bool pointer = false;
    friend constexpr bool operator==(ParamType, ParamType) = default;
};
[[nodiscard]] std::string to_string(ParamType t);  // "f32*", "i32"

namespace detail {
template <class T>
struct scalar_of;
template <>
struct scalar_of<bool> {
    static constexpr Scalar value = Scalar::boolean;
};
template <>
struct scalar_of<std::uint8_t> {
    static constexpr Scalar value = Scalar::u8;
};
template <>
struct scalar_of<std::int32_t> {
    static constexpr Scalar value = Scalar::i32;
};
template <>
struct scalar_of<std::int64_t> {
    static constexpr Scalar value = Scalar::i64;
};
template <>
struct scalar_of<std::uint32_t> {
    static constexpr Scalar value = Scalar::u32;
};
template <>
struct scalar_of<std::uint64_t> {
    static constexpr Scalar value = Scalar::u64;
};
template <>
struct scalar_of<float> {
    static constexpr Scalar value = Scalar::f32;
};
template <>
struct scalar_of<double> {
    static constexpr Scalar value = Scalar::f64;
};
template <>
struct scalar_of<TensorMap> {
    static constexpr Scalar value = Scalar::tensor_map;
};
}  // namespace detail

/// Host-side storage types for f16 / bf16 device pointers (kjit never does arithmetic on them).
struct f16 {
    std::uint16_t bits;
};
struct bf16 {
    std::uint16_t bits;
};
namespace detail {
template <>
struct scalar_of<kjit::f16> {
    static constexpr Scalar value = Scalar::f16;
};
template <>
struct scalar_of<kjit::bf16> {
    static constexpr Scalar value = Scalar::bf16;
};

template <class T>
struct param_type_of {
    static constexpr ParamType value{scalar_of<T>::value, false};
};
template <class T>
struct param_type_of<T*> {
    static constexpr ParamType value{scalar_of<std::remove_const_t<T>>::value, true};
};
}  // namespace detail

/// C++ types that map to a kernel parameter type.
template <class T>
concept kernel_scalar = requires {
    detail::scalar_of<T>::value;
};
template <class T>
concept kernel_argument = kernel_scalar<T> ||
    (std::is_pointer_v<T>&& kernel_scalar<std::remove_cv_t<std::remove_pointer_t<T>>>);

/// The ParamType of a C++ argument type: `float*` → f32*, `std::int32_t` → i32.
template <kernel_argument T>
inline constexpr ParamType param_type_v = detail::param_type_of<T>::value;

/// One entry of the parameter signature.
struct Param {
    std::string name;
    ParamType type;
    friend bool operator==(const Param&, const Param&) = default;
};

/// A compile-time constant: becomes a template argument of the kernel body.
struct Constant {
    std::string name;
    std::variant<std::int64_t, bool, Scalar> value;
    friend bool operator==(const Constant&, const Constant&) = default;
};

/// A constant's value as the readable id writes it: "64", "true", "f32".
[[nodiscard]] std::string value_text(const Constant& c);

/// 128-bit content hash identifying one compiled binary (XXH3-128).
struct CacheKey {
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    friend constexpr bool operator==(const CacheKey&, const CacheKey&) = default;
    [[nodiscard]] std::string hex() const;  // 32 lowercase hex digits
};

/// A named source file handed to NVRTC (a header the kernel includes from kernels_src).
struct SourceFile {
    std::string name;
    std::string content;
};

/// Everything that defines a kernel except its body source.
struct KernelSpec {
    std::string name;                    ///< body template name; its file is kernels_src/<name>.cu
    std::vector<Constant> constants;     ///< template arguments of the body, in order
    std::vector<Param> params;           ///< entry-point parameters, in order
    unsigned max_threads_per_block = 0;  ///< > 0: `__launch_bounds__` on the entry point
    /// > 0 (with max_threads_per_block): blocks per multiprocessor the launch bounds promise,
    /// which caps registers per thread — what `setmaxnreg` needs to take effect.
    unsigned min_blocks_per_multiprocessor = 0;
    /// Set for a kernel built on arch-specific instructions (wgmma, setmaxnreg): the one target
    /// it compiles for (sm_90a), and so the only arch whose devices run it.
    std::optional<Arch> only_for = std::nullopt;
    /// Set when the body, built for sm_90+, calls `kjit::wait_for_previous_grid()`
    /// (kjit/ptx_sm90.cuh) itself before it touches memory another kernel may write: its setup
    /// (barrier init, tables from its arguments) then overlaps the previous kernel's tail.
    /// Unset, the entry point waits before the body starts.
    bool waits_in_body = false;
    friend bool operator==(const KernelSpec&, const KernelSpec&) = default;
};

/// A kernel ready to compile and launch. Cheap to copy (copies share the immutable state and
/// the resolved-function memo). Construction validates the spec and throws UsageError.
class Kernel {
public:
    /// Body from kernels_src/<name>.cu: embedded at build time, or read from $KJIT_KERNELS_DIR.
    explicit Kernel(KernelSpec spec);
    /// Body supplied by the caller (a kernel that does not ship with kjit).
    Kernel(KernelSpec spec, std::string body_source);

    [[nodiscard]] const std::string& name() const noexcept;
    /// Readable id: name, pointer dtypes, constant values, joined by "__". Not the cache key.
    [[nodiscard]] const std::string& id() const noexcept;
    [[nodiscard]] const std::string& kernel_source() const noexcept;
    [[nodiscard]] const std::string& entry_point_source() const noexcept;
    /// kernel_source() + "\n\n" + entry_point_source(): what NVRTC compiles.
    [[nodiscard]] const std::string& source() const noexcept;
    [[nodiscard]] const std::string& entry_point_name() const noexcept;
    [[nodiscard]] const std::vector<Constant>& constants() const noexcept;
    [[nodiscard]] const std::vector<Param>& params() const noexcept;
    [[nodiscard]] unsigned max_threads_per_block() const noexcept;
    [[nodiscard]] const std::optional<Arch>& only_for() const noexcept;
    /// Whether devices of arch `device` (sm_90 for a 9.0 device) can run this kernel.
    [[nodiscard]] bool runs_on(Arch device) const noexcept;
    /// What it compiles for on such a device: `device`, or only_for().
    [[nodiscard]] Arch target(Arch device) const noexcept;
    /// Headers from kernels_src that source() includes, directly or not.
    [[nodiscard]] const std::vector<SourceFile>& headers() const noexcept;
    /// XXH3-128 of source() and every header it includes, as 32 hex digits: what a tuned winner
    /// is tied to (an edit to the kernel or a header it includes changes it).
    [[nodiscard]] std::string source_hash() const;

    /// The cache key for these options; computed once per kernel object and options.
    [[nodiscard]] CacheKey key(const CompileOptions& options) const;

    /// Launches through the process-wide Runtime, checking count and types of `args`
    /// against params() before anything reaches the driver. Does not synchronise.
    void launch(const Stream& stream, const LaunchConfig& config, std::span<const Arg> args) const;

    [[nodiscard]] const detail::KernelState& state() const noexcept { return *state_; }

protected:
    /// Launch with arguments already packed and checked (typed wrappers use this).
    void launch_packed(const Stream& stream, const LaunchConfig& config, void** args) const;

private:
    std::shared_ptr<detail::KernelState> state_;
};

}  // namespace kjit
