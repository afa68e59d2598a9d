#include "jit/env_flag.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "jit/log.hpp"

namespace kjit::detail {

std::optional<bool> parse_flag(std::string_view text) {
    std::string lower(text);
    std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const char* yes : {"1", "true", "yes", "on"})
        if (lower == yes) return true;
    for (const char* no : {"0", "false", "no", "off"})
        if (lower == no) return false;
    return std::nullopt;
}

std::string flag_complaint(const char* name, std::string_view value, bool taken) {
    return fmt::format("{}={} is not 1/0, true/false, yes/no or on/off: taken as {}", name, value,
                       taken ? "on" : "off");
}

bool env_flag(const char* name, bool fallback) {
    const char* value = std::getenv(name);
    if (!value || !*value) return fallback;
    if (const auto flag = parse_flag(value)) return *flag;
    warn(flag_complaint(name, value, fallback));
    return fallback;
}

}  // namespace kjit::detail
