// On/off environment variables: one spelling rule, and a value that is no flag is said to be one.
#include <doctest/doctest.h>

#include <cstdlib>

#include <kjit/log.hpp>

#include "jit/env_flag.hpp"

using namespace kjit;

TEST_CASE("flags: 1/true/yes/on and 0/false/no/off in any case, anything else no flag") {
    for (const char* on : {"1", "true", "TRUE", "Yes", "on"}) CHECK(detail::parse_flag(on) == true);
    for (const char* off : {"0", "false", "False", "NO", "off"}) CHECK(detail::parse_flag(off) == false);
    for (const char* neither : {"", "2", "of", "enable", " 1"}) CHECK_FALSE(detail::parse_flag(neither).has_value());
}

TEST_CASE("an environment flag: unset or empty takes the default, and a misspelling takes it too, with a warning") {
    std::vector<std::string> warnings;
    set_log_sink([&](LogLevel level, std::string_view message) {
        if (level == LogLevel::warning) warnings.emplace_back(message);
    });
    const char* name = "KJIT_TEST_FLAG";
    ::unsetenv(name);
    CHECK(detail::env_flag(name, true));
    ::setenv(name, "", 1);
    CHECK_FALSE(detail::env_flag(name, false));
    ::setenv(name, "off", 1);
    CHECK_FALSE(detail::env_flag(name, true));  // it used to be on: only "0" meant off
    CHECK(warnings.empty());
    ::setenv(name, "nope", 1);
    CHECK(detail::env_flag(name, true));
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] == "KJIT_TEST_FLAG=nope is not 1/0, true/false, yes/no or on/off: taken as on");
    ::unsetenv(name);
    set_log_sink(nullptr);
}
