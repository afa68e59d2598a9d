// Internal logging entry points (the public side is kjit/log.hpp).
#pragma once
#include <string>

#include <kjit/log.hpp>

namespace kjit::detail {
void log(LogLevel level, const std::string& message);
inline void warn(const std::string& message) { log(LogLevel::warning, message); }
inline void debug(const std::string& message) { log(LogLevel::debug, message); }
}  // namespace kjit::detail
