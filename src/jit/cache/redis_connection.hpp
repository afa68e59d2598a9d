// One connection to a Redis server (hiredis), owned: connect and operation time-outs, replies
// freed by their owner, and every failure an exception that says whether it was a time-out.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;
struct redisReply;

namespace kjit::detail {

/// Where the server is and who to be there: from a KJIT_REMOTE address (kjit/remote.hpp).
struct RedisEndpoint {
    std::string host;  ///< empty for a Unix socket
    int port = 6379;
    std::string socket_path;                     ///< set for a Unix socket
    std::string user;                            ///< ACL user (AUTH user password), empty: default user
    std::string password;                        ///< empty: no AUTH
    [[nodiscard]] std::string describe() const;  ///< "host:port" or the socket path
};

/// A failed exchange with the server; `timed_out` when it did not answer in time.
struct RedisFailure {
    std::string what;
    bool timed_out = false;
};

/// A reply, freed on destruction.
class RedisReply {
public:
    explicit RedisReply(redisReply* reply) noexcept : reply_(reply) {}
    [[nodiscard]] bool is_nil() const noexcept;
    [[nodiscard]] bool is_error() const noexcept;
    [[nodiscard]] bool is_ok() const noexcept;  ///< the status "OK"
    /// The bytes of a string (or status, or error) reply; RedisFailure for any other type.
    [[nodiscard]] std::string_view text() const;
    /// An integer reply; RedisFailure otherwise.
    [[nodiscard]] long long integer() const;

private:
    friend class RedisConnection;
    struct Free {
        void operator()(redisReply* r) const noexcept;
    };
    std::unique_ptr<redisReply, Free> reply_;
};

class RedisConnection {
public:
    /// Connects within `connect_timeout`, sets `operation_timeout` on every later read and write,
    /// and authenticates when the endpoint names a password. Throws RedisFailure.
    RedisConnection(const RedisEndpoint& endpoint, std::chrono::milliseconds connect_timeout,
                    std::chrono::milliseconds operation_timeout);
    ~RedisConnection();
    RedisConnection(const RedisConnection&) = delete;
    RedisConnection& operator=(const RedisConnection&) = delete;

    /// One command, its arguments binary-safe. An error reply is returned (is_error()), not
    /// thrown; a broken connection or a time-out throws RedisFailure and leaves the connection
    /// unusable (its owner drops it).
    RedisReply command(std::span<const std::string_view> args);
    RedisReply command(std::initializer_list<std::string_view> args) {
        return command(std::span<const std::string_view>(args.begin(), args.size()));
    }
    /// Pipelined: every command sent, then every reply read, in order.
    std::vector<RedisReply> pipeline(std::span<const std::vector<std::string_view>> commands);
    /// Every key matching the glob `pattern` (SCAN to its end); RedisFailure on an error reply.
    std::vector<std::string> scan(std::string_view pattern);

private:
    [[noreturn]] void fail(std::string_view doing) const;
    RedisReply read_reply();
    redisContext* context_ = nullptr;
};

}  // namespace kjit::detail
