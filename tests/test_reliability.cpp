// The cache under concurrency, crashes and a full disk (issue 6; docs/RELIABILITY.md names
// each test). Every process here is kjit_test_helper warming the same list of small kernels.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "support.hpp"

extern char** environ;

using namespace kjit;
namespace fs = std::filesystem;

namespace {

struct WarmReport {
    int exit_code = -1;
    int compiles = -1;
    int warnings = -1;
    bool persistent = false;
};

/// Runs `kjit_test_helper warm-list DIR THREADS N [FSIZE]` to completion.
WarmReport warm_list(const fs::path& dir, int threads, int n, long long fsize = 0) {
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
pid_t spawn_warm_list(const fs::path& dir, int threads, int n) {
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
std::string query(const fs::path& dir, const char* sql) {
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
bool sqlite3_exec_on(const fs::path& dir, const char* sql) {
    sqlite3* db = nullptr;
    if (sqlite3_open((dir / Cache::file_name).c_str(), &db) != SQLITE_OK) return false;
    sqlite3_busy_timeout(db, 10'000);
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    sqlite3_close(db);
    return rc == SQLITE_OK;
}

}  // namespace

TEST_CASE("concurrency: 8 processes x 4 threads warm one list into one database, NVRTC once per key") {
    test::TempDir dir;
    constexpr int kernels = 16;
    std::vector<std::future<WarmReport>> runs;
    for (int p = 0; p < 8; ++p)
        runs.push_back(std::async(std::launch::async, [&] { return warm_list(dir.path(), 4, kernels); }));
    int compiles = 0;
    for (auto& run : runs) {
        const WarmReport r = run.get();
        CHECK(r.exit_code == 0);
        CHECK(r.warnings == 0);  // no busy/locked error reached anyone: each stayed on the database
        CHECK(r.persistent);
        compiles += r.compiles;
    }
    CHECK(compiles == kernels);  // cross-process single-flight: exactly one NVRTC run per key
    CHECK(query(dir.path(), "SELECT count(*) FROM kernels") == std::to_string(kernels));
    CHECK(query(dir.path(), "SELECT count(DISTINCT key) FROM kernels") == std::to_string(kernels));
    CHECK(query(dir.path(), "SELECT count(*) FROM claims") == "0");
    CHECK(query(dir.path(), "PRAGMA integrity_check") == "ok");
    Cache cache(dir.path());
    CHECK(cache.verify().empty());
}

TEST_CASE("a claim left by a dead process is taken over at once") {
    test::TempDir dir;
    const Kernel k = test::scale_kernel("", 3);
    const auto o = test::options_for("sm_90");
    const pid_t dead = [] {
        const pid_t child = fork();
        if (child == 0) _exit(0);
        waitpid(child, nullptr, 0);
        return child;  // reaped: no process has this pid now
    }();
    {
        Cache cache(dir.path());
        REQUIRE(cache.claim(k.key(o), std::chrono::seconds(600)) == Cache::Claim::owned);
    }
    REQUIRE(sqlite3_exec_on(dir.path(), fmt::format("UPDATE claims SET pid = {}", dead).c_str()));
    Runtime rt(dir.path());
    const auto started = std::chrono::steady_clock::now();
    CHECK(rt.compile(k, o).origin == Origin::compiled);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
    CHECK(query(dir.path(), "SELECT count(*) FROM claims") == "0");
}

TEST_CASE("a live process's claim makes others wait for its entry instead of compiling") {
    test::TempDir dir;
    const Kernel k = test::scale_kernel("", 4);
    const auto o = test::options_for("sm_90");
    Cache owner(dir.path());
    REQUIRE(owner.claim(k.key(o), std::chrono::seconds(600)) == Cache::Claim::owned);
    CHECK(Cache(dir.path()).claim(k.key(o), std::chrono::seconds(600)) == Cache::Claim::held);  // this pid lives
    Runtime waiter(dir.path());
    auto waiting = std::async(std::launch::async, [&] { return waiter.compile(k, o).origin; });
    CHECK(waiting.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);  // it waits
    owner.store(make_cache_entry(k, o, compile(k, o)));  // the owner stores: the claim goes with it
    CHECK(waiting.get() == Origin::cache);
    CHECK(waiter.stats().compiles == 0);
}

TEST_CASE("crashes: 50 warms killed at random moments, the database stays sound and loses nothing else") {
    test::TempDir dir;
    constexpr int kernels = 10;
    // Kill moments are drawn within the time a warm of two thirds of the list takes here.
    const auto started = std::chrono::steady_clock::now();
    REQUIRE(warm_list(dir.path(), 4, kernels).compiles == kernels);
    const auto full_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    std::mt19937 rng(20261130);
    std::uniform_int_distribution<int> delay_ms(0, static_cast<int>(full_ms.count() * 2 / 3));
    REQUIRE(sqlite3_exec_on(dir.path(), "DELETE FROM kernels WHERE abs(random()) % 3 != 0"));
    int kills_with_work_lost = 0;
    for (int round = 0; round < 50; ++round) {
        CAPTURE(round);
        const pid_t pid = spawn_warm_list(dir.path(), 4, kernels);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) ++kills_with_work_lost;

        std::size_t present = 0;
        {
            Cache cache(dir.path());
            REQUIRE(cache.persistent());  // it opens,
            const auto faults = cache.verify();  // integrity_check ok, every checksum valid
            CHECK(faults.empty());
            for (const auto& f : faults) MESSAGE(f);
            present = cache.entries().size();
        }
        CHECK(query(dir.path(), "PRAGMA integrity_check") == "ok");
        const WarmReport next = warm_list(dir.path(), 4, kernels);  // recompiles exactly what was lost
        CHECK(next.exit_code == 0);
        CHECK(next.warnings == 0);
        CHECK(next.compiles == kernels - static_cast<int>(present));

        // Drop a random part of the list again, so the next kill has compiles to interrupt.
        REQUIRE(sqlite3_exec_on(dir.path(), "DELETE FROM kernels WHERE abs(random()) % 3 != 0"));
    }
    MESSAGE(kills_with_work_lost << " of 50 kills landed while the warm ran");
    CHECK(kills_with_work_lost >= 25);  // most kills landed mid-warm, not after it ended
}

TEST_CASE("a full disk (file size limit): kjit keeps working from memory and warns once") {
    test::TempDir dir;
    const WarmReport r = warm_list(dir.path(), 2, 8, 64 * 1024);  // a 64 KB file limit
    CHECK(r.exit_code == 0);  // every kernel compiled and was handed out
    CHECK(r.compiles == 8);
    CHECK(r.warnings == 1);
    CHECK_FALSE(r.persistent);
}
