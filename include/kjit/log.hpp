// kjit/log.hpp — where kjit's warnings and verbose messages go.
#pragma once
#include <functional>
#include <string_view>

namespace kjit {

enum class LogLevel { debug, info, warning };

/// Receives every message at or above the current level. The default sink writes
/// "kjit: warning: …" lines to stderr. Pass an empty function to restore it.
using LogSink = std::function<void(LogLevel, std::string_view message)>;
void set_log_sink(LogSink sink);

/// Messages below this level are dropped. Default: warning (or debug when KJIT_VERBOSE=1).
void set_log_level(LogLevel level);

}  // namespace kjit
