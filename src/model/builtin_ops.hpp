// The op table the planner looks names up in (builtin_ops.cpp).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <kjit/model.hpp>

namespace kjit::detail {

/// The factory registered as `name`; an empty function, with every registered name appended
/// to `known`, when there is none.
[[nodiscard]] OpFactory find_op_factory(std::string_view name, std::vector<std::string>& known);

/// The element types a graph's tensors may have, as graphs spell them ("f32", "f16", "bf16").
inline constexpr std::string_view element_type_names[] = {"f32", "f16", "bf16"};
/// The Scalar one of element_type_names names.
[[nodiscard]] Scalar element_type_named(std::string_view name);

}  // namespace kjit::detail
