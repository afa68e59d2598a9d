// The hiredis connection (redis_connection.hpp).
#include "jit/cache/redis_connection.hpp"

#include <hiredis/hiredis.h>

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kjit::detail {
namespace {

timeval as_timeval(std::chrono::milliseconds ms) {
    return {static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

/// hiredis reports a socket time-out as an I/O error: EAGAIN from a read or write past
/// SO_RCVTIMEO/SO_SNDTIMEO, ETIMEDOUT from a connect.
bool is_timeout(const redisContext* c, int saved_errno) {
    if (c->err != REDIS_ERR_IO) return false;
    if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT) return true;
    const std::string_view why = c->errstr;
    return why == std::strerror(EAGAIN) || why == std::strerror(ETIMEDOUT);
}

/// Blocks SIGPIPE in this thread while hiredis writes (it does not ask send() for MSG_NOSIGNAL),
/// so that a server that went away is a failed write, not a signal that ends the process; a
/// SIGPIPE raised meanwhile is taken before the mask is restored. Nothing process-wide changes.
class SigpipeBlocked {
public:
    SigpipeBlocked() {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t pending;
        sigpending(&pending);
        was_pending_ = sigismember(&pending, SIGPIPE) == 1;
        pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    }
    ~SigpipeBlocked() {
        if (!was_pending_) {
            const timespec now{0, 0};
            while (sigtimedwait(&pipe_, nullptr, &now) == SIGPIPE) {}
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeBlocked(const SigpipeBlocked&) = delete;
    SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

private:
    sigset_t pipe_{}, old_{};
    bool was_pending_ = false;
};

RedisFailure wrong_type(std::string_view wanted, int type) {
    return {fmt::format("the server answered with reply type {} where {} was expected", type, wanted)};
}

}  // namespace

std::string RedisEndpoint::describe() const {
    return socket_path.empty() ? fmt::format("{}:{}", host, port) : socket_path;
}

void RedisReply::Free::operator()(redisReply* r) const noexcept { freeReplyObject(r); }
bool RedisReply::is_nil() const noexcept { return reply_->type == REDIS_REPLY_NIL; }
bool RedisReply::is_error() const noexcept { return reply_->type == REDIS_REPLY_ERROR; }
bool RedisReply::is_ok() const noexcept {
    return reply_->type == REDIS_REPLY_STATUS && std::string_view(reply_->str, reply_->len) == "OK";
}

namespace {
std::string_view text_of(const redisReply* r) {
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS && r->type != REDIS_REPLY_ERROR)
        throw wrong_type("a string", r->type);
    return {r->str, r->len};
}
}  // namespace

std::string_view RedisReply::text() const { return text_of(reply_.get()); }

long long RedisReply::integer() const {
    if (reply_->type != REDIS_REPLY_INTEGER) throw wrong_type("an integer", reply_->type);
    return reply_->integer;
}

RedisConnection::RedisConnection(const RedisEndpoint& endpoint, std::chrono::milliseconds connect_timeout,
                                 std::chrono::milliseconds operation_timeout) {
    const timeval connect_tv = as_timeval(connect_timeout);
    context_ = endpoint.socket_path.empty() ? redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, connect_tv)
                                            : redisConnectUnixWithTimeout(endpoint.socket_path.c_str(), connect_tv);
    const int saved_errno = errno;
    if (!context_) throw RedisFailure{"out of memory making a Redis connection"};
    if (context_->err) {
        RedisFailure f{fmt::format("connecting to {}: {}", endpoint.describe(), context_->errstr),
                       is_timeout(context_, saved_errno)};
        redisFree(context_);
        throw f;
    }
    if (redisSetTimeout(context_, as_timeval(operation_timeout)) != REDIS_OK) {
        redisFree(context_);
        throw RedisFailure{fmt::format("setting the time-out of the connection to {}", endpoint.describe())};
    }
    if (!endpoint.password.empty()) {
        std::vector<std::string_view> auth{"AUTH"};
        if (!endpoint.user.empty()) auth.push_back(endpoint.user);
        auth.push_back(endpoint.password);
        RedisReply reply = command(auth);
        if (reply.is_error()) {
            const std::string why(reply.text());
            redisFree(context_);
            throw RedisFailure{fmt::format("authenticating to {}{}: {}", endpoint.describe(),
                                           endpoint.user.empty() ? "" : " as " + endpoint.user, why)};
        }
    }
}

RedisConnection::~RedisConnection() { redisFree(context_); }

void RedisConnection::fail(std::string_view doing) const {
    const int saved_errno = errno;
    throw RedisFailure{fmt::format("{}: {}", doing, context_->errstr), is_timeout(context_, saved_errno)};
}

namespace {
/// hiredis's argv form of `args`.
struct Argv {
    std::vector<const char*> pointers;
    std::vector<std::size_t> sizes;
    explicit Argv(std::span<const std::string_view> args) {
        for (const auto a : args) {
            pointers.push_back(a.data());
            sizes.push_back(a.size());
        }
    }
    [[nodiscard]] int count() const { return static_cast<int>(pointers.size()); }
};
}  // namespace

RedisReply RedisConnection::read_reply() {
    const SigpipeBlocked quiet;  // redisGetReply writes what is still buffered first
    void* reply = nullptr;
    if (redisGetReply(context_, &reply) != REDIS_OK || !reply) fail("reading a reply");
    return RedisReply(static_cast<redisReply*>(reply));
}

RedisReply RedisConnection::command(std::span<const std::string_view> args) {
    const SigpipeBlocked quiet;
    Argv argv(args);
    if (redisAppendCommandArgv(context_, argv.count(), argv.pointers.data(), argv.sizes.data()) != REDIS_OK)
        fail("sending a command");
    return read_reply();
}

std::vector<RedisReply> RedisConnection::pipeline(std::span<const std::vector<std::string_view>> commands) {
    const SigpipeBlocked quiet;
    for (const auto& c : commands) {
        Argv argv(c);
        if (redisAppendCommandArgv(context_, argv.count(), argv.pointers.data(), argv.sizes.data()) != REDIS_OK)
            fail("sending a command");
    }
    std::vector<RedisReply> replies;
    replies.reserve(commands.size());
    for (std::size_t i = 0; i < commands.size(); ++i) replies.push_back(read_reply());
    return replies;
}

std::vector<std::string> RedisConnection::scan(std::string_view pattern) {
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
        const RedisReply reply = command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
        const redisReply* r = reply.reply_.get();
        if (reply.is_error()) throw RedisFailure{fmt::format("SCAN: {}", reply.text())};
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[1]->type != REDIS_REPLY_ARRAY)
            throw RedisFailure{"SCAN answered with other than a cursor and a list of keys"};
        cursor = std::string(text_of(r->element[0]));
        for (std::size_t i = 0; i < r->element[1]->elements; ++i) keys.emplace_back(text_of(r->element[1]->element[i]));
    } while (cursor != "0");
    return keys;
}

}  // namespace kjit::detail
