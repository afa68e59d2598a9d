// A real redis-server for the remote tier's tests: started per test on a Unix socket in a scratch
// directory (no persistence), waited for, and stopped by its pid. Not a mock: the tests exercise
// the protocol, ACLs, eviction and a stopped or killed server as a deployment would meet them.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <kjit/remote.hpp>

#include "jit/cache/redis_connection.hpp"
#include "support.hpp"

namespace kjit::test {

class RedisServer {
public:
    /// Starts redis-server with `extra` configuration arguments (e.g. {"--maxmemory", "1mb"}).
    explicit RedisServer(std::vector<std::string> extra = {}) : socket_(dir_.path() / "redis.sock") {
        std::vector<std::string> args{"redis-server",
                                      "--port",
                                      "0",
                                      "--unixsocket",
                                      socket_.string(),
                                      "--unixsocketperm",
                                      "700",
                                      "--save",
                                      "",
                                      "--appendonly",
                                      "no",
                                      "--dir",
                                      dir_.path().string()};
        args.insert(args.end(), extra.begin(), extra.end());
        const std::string log = (dir_.path() / "redis.log").string();
        std::fflush(stdout);  // else the child's freopen writes the parent's buffered output again
        std::fflush(stderr);
        pid_ = fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            std::freopen(log.c_str(), "w", stdout);
            std::freopen(log.c_str(), "a", stderr);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            execvp("redis-server", argv.data());
            std::fprintf(stderr, "cannot run redis-server: %s (scripts/install-deps installs it)\n", strerror(errno));
            _exit(127);
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < deadline) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                FAIL("redis-server exited at start: " << log_text());
            }
            try {
                if (connect().command({"PING"}).text() == "PONG") return;
            } catch (const detail::RedisFailure&) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
        FAIL("redis-server did not answer within 10 s: " << log_text());
    }
    ~RedisServer() { stop(); }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    [[nodiscard]] std::string address() const { return "unix://" + socket_.string(); }
    [[nodiscard]] detail::RedisEndpoint endpoint() const {
        detail::RedisEndpoint e;
        e.socket_path = socket_.string();
        return e;
    }
    /// A raw connection as the default (all-powerful) user: what a test plants or inspects.
    [[nodiscard]] detail::RedisConnection connect() const {
        return detail::RedisConnection(endpoint(), std::chrono::milliseconds(1000), std::chrono::milliseconds(5000));
    }
    void pause() const { ::kill(pid_, SIGSTOP); }
    void resume() const { ::kill(pid_, SIGCONT); }
    /// SIGKILL, as a crash: no goodbye to the clients.
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    [[nodiscard]] std::string log_text() const {
        std::ifstream in(dir_.path() / "redis.log");
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }

private:
    TempDir dir_;
    std::filesystem::path socket_;
    pid_t pid_ = -1;
};

/// Options for a machine of the fleet on `server`: a writer signing with `key`, or a reader
/// trusting `trusted`; short time-outs, so that the failure tests run quickly.
inline RemoteOptions writer_options(const RedisServer& server, const SigningKey& key) {
    RemoteOptions o;
    o.address = server.address();
    o.mode = RemoteMode::read_write;
    o.signing_key = key;
    o.operation_timeout = std::chrono::milliseconds(500);
    return o;
}
inline RemoteOptions reader_options(const RedisServer& server, std::vector<PublicKey> trusted) {
    RemoteOptions o;
    o.address = server.address();
    o.trusted_keys = std::move(trusted);
    o.operation_timeout = std::chrono::milliseconds(500);
    return o;
}

}  // namespace kjit::test
