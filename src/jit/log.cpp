#include "jit/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "jit/env_flag.hpp"

namespace kjit {
namespace {
struct LogState {
    std::mutex mutex;
    LogSink sink;
    LogLevel level = [] {
        // Not env_flag: its warning would come back here before the state exists.
        const char* v = std::getenv("KJIT_VERBOSE");
        if (!v || !*v) return LogLevel::warning;
        const auto flag = detail::parse_flag(v);
        if (!flag)
            std::fprintf(stderr, "kjit: warning: %s\n", detail::flag_complaint("KJIT_VERBOSE", v, false).c_str());
        return flag.value_or(false) ? LogLevel::debug : LogLevel::warning;
    }();
};
LogState& state() {
    static LogState s;
    return s;
}
const char* label(LogLevel level) {
    switch (level) {
        case LogLevel::debug: return "debug";
        case LogLevel::info: return "info";
        case LogLevel::warning: return "warning";
    }
    return "?";
}
}  // namespace

void set_log_sink(LogSink sink) {
    std::lock_guard lock(state().mutex);
    state().sink = std::move(sink);
}

void set_log_level(LogLevel level) {
    std::lock_guard lock(state().mutex);
    state().level = level;
}

namespace detail {
void log(LogLevel level, const std::string& message) {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    if (level < s.level) return;
    if (s.sink) {
        s.sink(level, message);
    } else {
        std::fprintf(stderr, "kjit: %s: %s\n", label(level), message.c_str());
    }
}
}  // namespace detail
}  // namespace kjit
