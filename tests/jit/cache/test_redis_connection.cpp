// The hiredis connection against a real redis-server: binary-safe values, pipelines in order,
// SCAN to its end, and failures that say what happened (refused, denied, timed out).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>

#include "jit/cache/redis_server.hpp"

using namespace kjit;
using namespace kjit::test;
using detail::RedisConnection;
using detail::RedisFailure;

TEST_CASE("redis connection: binary-safe values, pipelined replies in order, SCAN over many keys") {
    RedisServer server;
    auto c = server.connect();
    const std::string binary("a\0b\r\n\xff", 6);
    REQUIRE(c.command({"SET", "bin", binary}).is_ok());
    CHECK(c.command({"GET", "bin"}).text() == binary);
    CHECK(c.command({"GET", "absent"}).is_nil());
    CHECK(c.command({"NOSUCHCOMMAND"}).is_error());
    std::vector<std::string> names;
    for (int i = 0; i < 2500; ++i) names.push_back(fmt::format("k:{}", i));
    std::vector<std::vector<std::string_view>> sets;
    for (const auto& n : names) sets.push_back({"SET", n, n});
    const auto replies = c.pipeline(sets);
    REQUIRE(replies.size() == names.size());
    for (const auto& r : replies) CHECK(r.is_ok());
    std::vector<std::vector<std::string_view>> gets{{"GET", "k:7"}, {"GET", "absent"}, {"GET", "k:2499"}};
    const auto got = c.pipeline(gets);
    CHECK(got[0].text() == "k:7");
    CHECK(got[1].is_nil());
    CHECK(got[2].text() == "k:2499");
    auto scanned = c.scan("k:*");
    std::ranges::sort(scanned);
    std::ranges::sort(names);
    CHECK(scanned == names);
    // A pattern character escaped matches only itself (how the remote tier scans under a prefix).
    REQUIRE(c.command({"SET", "team*:x", "1"}).is_ok());
    REQUIRE(c.command({"SET", "teamA:x", "1"}).is_ok());
    CHECK(c.scan(R"(team\*:*)") == std::vector<std::string>{"team*:x"});
}

namespace {
/// The failure `work` throws; a test failure where it throws none.
template <class Work>
RedisFailure failure_of(Work&& work) {
    try {
        work();
    } catch (const RedisFailure& f) {
        return f;
    }
    FAIL("no RedisFailure thrown");
    return {};
}
}  // namespace

TEST_CASE("redis connection: refused, denied and timed-out exchanges throw, saying which") {
    RedisServer server;
    detail::RedisEndpoint missing;
    missing.socket_path = "/nonexistent/redis.sock";
    const RedisFailure refused = failure_of(
        [&] { RedisConnection c(missing, std::chrono::milliseconds(100), std::chrono::milliseconds(100)); });
    CHECK(refused.what.find("connecting to /nonexistent/redis.sock") != std::string::npos);
    CHECK_FALSE(refused.timed_out);
    detail::RedisEndpoint wrong = server.endpoint();
    wrong.user = "nobody";
    wrong.password = "nothing";
    const RedisFailure denied = failure_of(
        [&] { RedisConnection c(wrong, std::chrono::milliseconds(500), std::chrono::milliseconds(500)); });
    CHECK(denied.what.find("authenticating to") != std::string::npos);
    CHECK(denied.what.find("as nobody") != std::string::npos);
    auto c = server.connect();
    RedisConnection quick(server.endpoint(), std::chrono::milliseconds(500), std::chrono::milliseconds(200));
    server.pause();
    const auto t = std::chrono::steady_clock::now();
    CHECK(failure_of([&] { (void)quick.command({"PING"}); }).timed_out);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    CHECK(waited >= 0.19);
    CHECK(waited < 2);
    server.resume();
    CHECK(c.command({"PING"}).text() == "PONG");
}
