// kjit/typed_kernel.hpp — kernels whose argument types are checked at compile time.
#pragma once
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <kjit/kernel.hpp>
#include <kjit/runtime.hpp>

namespace kjit {

/// A string usable as a template argument (parameter names of typed kernels).
template <std::size_t N>
struct fixed_string {
    char chars[N]{};
    constexpr fixed_string(const char (&s)[N]) noexcept {  // NOLINT: implicit by design
        for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
    }
    [[nodiscard]] constexpr std::string_view view() const noexcept { return {chars, N - 1}; }
};

/// One parameter of a typed kernel: `param<"x", float*>`.
template <fixed_string Name, kernel_argument T>
struct param {
    using type = T;
    static constexpr std::string_view name = Name.view();
};

namespace detail {
/// `given` may be passed for a parameter declared `declared`: the same type, or a pointer to
/// const where the declaration has a pointer to mutable.
template <class Declared, class Given>
inline constexpr bool arg_matches =
    std::is_same_v<Declared, std::remove_cvref_t<Given>> ||
    (std::is_pointer_v<Declared> && std::is_pointer_v<std::remove_cvref_t<Given>> &&
     std::is_same_v<std::remove_pointer_t<Declared>,
                    std::remove_const_t<std::remove_pointer_t<std::remove_cvref_t<Given>>>>);

/// Throws UsageError unless `kernel`'s parameters are `expected`, names and types.
void require_signature(const Kernel& kernel, const std::vector<Param>& expected);

template <class Declared, class Given>
constexpr Declared as_declared(Given given) noexcept {
    if constexpr (std::is_pointer_v<Declared>) return const_cast<Declared>(given);
    else return given;
}
}  // namespace detail

/// A kernel whose signature is a C++ parameter list: launch() only compiles when the arguments
/// match it exactly. Ops hold one per kernel they launch.
template <class... Params>
class TypedKernel : public Kernel {
    static_assert(sizeof...(Params) > 0, "a kernel takes at least one parameter");

public:
    /// The run-time signature, derived from the same parameter list.
    [[nodiscard]] static std::vector<Param> signature() {
        return {Param{std::string(Params::name), param_type_v<typename Params::type>}...};
    }

    template <class... Given>
    requires(sizeof...(Given) == sizeof...(Params) &&
             (detail::arg_matches<typename Params::type, Given> &&
              ...)) void launch(const Stream& stream, const LaunchConfig& config, Given... args) const {
        std::tuple<typename Params::type...> values{detail::as_declared<typename Params::type>(args)...};
        std::apply(
            [&](auto&... v) {
                void* packed[] = {static_cast<void*>(&v)...};
                launch_packed(stream, config, packed);
            },
            values);
    }

    template <class... Given>
    requires(sizeof...(Given) == sizeof...(Params) &&
             (detail::arg_matches<typename Params::type, Given> && ...)) void launch(const Stream& stream, Dim3 grid,
                                                                                     Dim3 block, Given... args) const {
        launch(stream, LaunchConfig{grid, block, 0}, args...);
    }

    using Kernel::launch;

    /// The body is kernels_src/<name>.cu; `max_threads_per_block` > 0 sets its launch bounds.
    TypedKernel(std::string name, std::vector<Constant> constants, unsigned max_threads_per_block)
        : Kernel(KernelSpec{std::move(name), std::move(constants), signature(), max_threads_per_block}) {}
    /// A typed view of `kernel` (sharing its state and memos, e.g. an op's kernel()). Throws
    /// UsageError unless its signature is this parameter list.
    explicit TypedKernel(const Kernel& kernel) : Kernel(kernel) { detail::require_signature(*this, signature()); }
};

}  // namespace kjit
