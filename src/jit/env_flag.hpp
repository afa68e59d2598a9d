// On/off environment variables (KJIT_VERBOSE, KJIT_DEPENDENT_LAUNCH): one spelling rule for all.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace kjit::detail {

/// 1, true, yes, on → true; 0, false, no, off → false (any case); anything else: nothing.
[[nodiscard]] std::optional<bool> parse_flag(std::string_view text);

/// Why `value` of variable `name` is not a flag, and what was taken instead.
[[nodiscard]] std::string flag_complaint(const char* name, std::string_view value, bool taken);

/// Variable `name` as a flag: unset or empty, `fallback`; a value that is no flag, `fallback` and
/// one warning saying so (a misspelt "KJIT_DEPENDENT_LAUNCH=off" must not pass for on).
[[nodiscard]] bool env_flag(const char* name, bool fallback);

}  // namespace kjit::detail
