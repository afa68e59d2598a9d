// What the cache tests share: a sample entry, file bytes, an environment scope, and the
// helper-process warms that run many processes against one database.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support.hpp"

extern char** environ;

namespace kjit::test {
namespace fs = std::filesystem;

inline CacheEntry sample_entry(std::uint64_t salt = 1) {
    CacheEntry e;
    e.key = {0x0123456789abcdefULL, salt};
    e.readable_id = "axpby__f32__f32__256__4";
    e.kernel_name = "axpby";
    e.arch = "sm_90";
    e.nvrtc_version = nvrtc_version();
    e.options = "--std=c++17 -default-device --gpu-architecture=sm_90";
    e.compiled.ptx = ".version 9.0\n.target sm_90\n";
    e.compiled.cubin = {std::byte{0x7f}, std::byte{'E'}, std::byte{'L'}, std::byte{'F'}, std::byte{0}, std::byte{42}};
    e.compiled.log = "ptxas info    : Used 20 registers";
    e.compiled.resources = {.registers = 20,
                            .spill_store_bytes = 0,
                            .spill_load_bytes = 0,
                            .shared_static_bytes = 512,
                            .stack_frame_bytes = 8,
                            .constant_bytes = 392,
                            .barriers = 1};
    e.compiled.compile_ms = 12.5;
    return e;
}

inline std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Restores the working directory and an environment variable when the scope ends.
struct EnvScope {
    explicit EnvScope(std::vector<std::string> names) : names_(std::move(names)) {
        for (const auto& n : names_) {
            const char* v = std::getenv(n.c_str());
            saved_.emplace_back(v ? std::optional<std::string>(v) : std::nullopt);
        }
    }
    ~EnvScope() {
        fs::current_path(cwd_);
        for (std::size_t i = 0; i < names_.size(); ++i) {
            if (saved_[i]) ::setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
            else ::unsetenv(names_[i].c_str());
        }
    }
    fs::path cwd_ = fs::current_path();
    std::vector<std::string> names_;
    std::vector<std::optional<std::string>> saved_;
};

struct WarmReport {
    int exit_code = -1;
    int compiles = -1;
    int warnings = -1;
    bool persistent = false;
};

/// Runs `kjit_test_helper warm-list DIR THREADS N [FSIZE]` to completion.
inline WarmReport warm_list(const fs::path& dir, int threads, int n, long long fsize = 0) {
    std::string cmd = fmt::format("{} warm-list '{}' {} {}", KJIT_TEST_HELPER, dir.string(), threads, n);
    if (fsize) cmd += fmt::format(" {}", fsize);
    FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buffer[4096];
    while (std::size_t got = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, got);
    const int status = pclose(pipe);
    WarmReport r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::smatch m;
    if (std::regex_search(out, m, std::regex(R"(compiles=(\d+) warnings=(\d+) persistent=(\d))")))
        r.compiles = std::stoi(m[1]), r.warnings = std::stoi(m[2]), r.persistent = m[3] == "1";
    if (r.exit_code != 0 || r.warnings != 0) MESSAGE(out);
    return r;
}

/// Starts the same warm in the background and returns its pid.
inline pid_t spawn_warm_list(const fs::path& dir, int threads, int n) {
    const std::string helper = KJIT_TEST_HELPER, d = dir.string(), t = std::to_string(threads),
                      count = std::to_string(n);
    const char* argv[] = {helper.c_str(), "warm-list", d.c_str(), t.c_str(), count.c_str(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, helper.c_str(), &actions, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(rc == 0);
    return pid;
}

/// One value from the database at `dir` (read with SQLite directly, not through kjit).
inline std::string query(const fs::path& dir, const char* sql) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir / Cache::file_name).c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &s, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(s) == SQLITE_ROW);
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    std::string value = text ? text : "";
    sqlite3_finalize(s);
    sqlite3_close(db);
    return value;
}

/// Runs `sql` on the database at `dir` with SQLite directly.
inline bool sqlite3_exec_on(const fs::path& dir, const char* sql) {
    sqlite3* db = nullptr;
    if (sqlite3_open((dir / Cache::file_name).c_str(), &db) != SQLITE_OK) return false;
    sqlite3_busy_timeout(db, 10'000);
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    sqlite3_close(db);
    return rc == SQLITE_OK;
}

}  // namespace kjit::test
