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

}  // namespace kjit::detail
