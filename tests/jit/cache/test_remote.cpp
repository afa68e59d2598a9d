// The fleet tier against a real redis-server (redis_server.hpp): two cache directories as two
// machines, values tampered, unsigned, untrusted or under the wrong key, the server killed,
// stopped, evicting or allowing only reads, concurrent writers, push and pull, and the settings.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <barrier>
#include <future>
#include <random>

#include <kjit/tuning.hpp>

#include "jit/cache/cache_test_support.hpp"
#include "jit/cache/redis_server.hpp"
#include "jit/cache/remote_entry.hpp"

using namespace kjit;
using namespace kjit::test;
using Clock = std::chrono::steady_clock;

namespace {

const CompileOptions sm90 = options_for("sm_90");

/// The remote name of `k`'s entry at sm_90 (the format the tier writes: kjit:1:entry:HEX).
std::string entry_name(const Kernel& k, std::string_view prefix = "") {
    return fmt::format("{}kjit:1:entry:{}", prefix, k.key(sm90).hex());
}

/// A writer machine compiles `kernels` into its own directory and publishes them.
void warm_remote(const RedisServer& server, const SigningKey& key, std::span<const Kernel> kernels) {
    TempDir dir;
    Runtime writer(dir.path(), writer_options(server, key));
    for (const Kernel& k : kernels) CHECK(writer.compile(k, sm90).origin == Origin::compiled);
    REQUIRE(writer.remote()->flush(std::chrono::seconds(10)));
    CHECK(writer.remote()->counters().published == kernels.size());
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

TEST_CASE("remote: a writer warms, a reader on another directory hits with zero compiles and keeps it locally") {
    RedisServer server;
    const SigningKey key = generate_signing_key("fleet-1");
    const std::vector<Kernel> kernels{scale_kernel("", 2), scale_kernel("", 3), scale_kernel("", 5)};
    warm_remote(server, key, kernels);

    TempDir reader_dir;
    {
        Runtime reader(reader_dir.path(), reader_options(server, {key.public_key()}));
        for (const Kernel& k : kernels) {
            const auto r = reader.compile(k, sm90);
            CHECK(r.origin == Origin::remote);
            CHECK(r.entry->key == k.key(sm90));
            CHECK_FALSE(r.entry->compiled.cubin.empty());
        }
        CHECK(reader.stats().compiles == 0);
        CHECK(reader.stats().remote_hits == kernels.size());
        CHECK(reader.remote()->counters().hits == kernels.size());
        CHECK(reader.remote()->counters().bytes_down > 0);
    }
    // Stored into SQLite on the way: a later process needs neither the server nor NVRTC, and the
    // file kept the counts of the process before it.
    server.stop();
    Runtime again(reader_dir.path(), std::nullopt);
    for (const Kernel& k : kernels) CHECK(again.compile(k, sm90).origin == Origin::cache);
    CHECK(again.cache().remote_counters().hits == kernels.size());
}

TEST_CASE("remote: tampered, unsigned, untrusted and misplaced values are rejected, counted and compiled locally") {
    RedisServer server;
    const SigningKey trusted_key = generate_signing_key("fleet-1");
    const SigningKey other_key = generate_signing_key("intruder-1");
    const Kernel tampered = scale_kernel("", 2), unsigned_one = scale_kernel("", 3), untrusted = scale_kernel("", 5),
                 misplaced = scale_kernel("", 7);
    warm_remote(server, trusted_key, std::vector{tampered, misplaced});
    warm_remote(server, other_key, std::vector{untrusted});
    auto raw = server.connect();
    const std::string sound(raw.command({"GET", entry_name(tampered)}).text());
    std::string flipped = sound;
    flipped[flipped.size() / 2] ^= 0x01;
    REQUIRE(raw.command({"SET", entry_name(tampered), flipped}).is_ok());
    // An entry without an envelope, as a careless or hostile writer would store one.
    REQUIRE(raw.command({"SET", entry_name(unsigned_one),
                         "\x7f"
                         "ELF, trust me"})
                .is_ok());
    // A sound, signed value copied under another kernel's key: a replay.
    REQUIRE(raw.command({"SET", entry_name(misplaced), sound}).is_ok());
    LogCapture log;
    TempDir dir;
    Runtime reader(dir.path(), reader_options(server, {trusted_key.public_key()}));
    for (const Kernel& k : {tampered, unsigned_one, untrusted, misplaced}) {
        const auto r = reader.compile(k, sm90);
        CHECK(r.origin == Origin::compiled);
        CHECK(r.entry->key == k.key(sm90));
    }
    const RemoteCounters c = reader.remote()->counters();
    CHECK(c.rejected == 4);
    CHECK(c.hits == 0);
    CHECK(c.errors == 0);
    const auto warnings = log.warnings();
    REQUIRE(warnings.size() == 1);  // one warning; the rest are counted
    CHECK(warnings[0].find("rejected the value of") != std::string::npos);
    CHECK(warnings[0].find("kjit cache stats") != std::string::npos);
}

TEST_CASE("remote: a killed server costs a local compile, once, then the breaker keeps kjit off it") {
    auto server = std::make_unique<RedisServer>();
    const SigningKey key = generate_signing_key("fleet-1");
    TempDir dir;
    LogCapture log;
    Runtime rt(dir.path(), writer_options(*server, key));
    CHECK(rt.compile(scale_kernel("", 2), sm90).origin == Origin::compiled);  // connected, published
    REQUIRE(rt.remote()->flush(std::chrono::seconds(5)));
    server->stop();  // mid-run
    const auto t = Clock::now();
    for (int f = 3; f < 9; ++f) CHECK(rt.compile(scale_kernel("", f), sm90).origin == Origin::compiled);
    CHECK(rt.remote()->flush(std::chrono::seconds(5)));
    CHECK(seconds_since(t) < 20);
    const RemoteCounters c = rt.remote()->counters();
    CHECK(c.errors >= 1);
    CHECK(c.skipped >= 1);  // the breaker was open for the next ones
    CHECK(c.published == 1);
    const auto warnings = log.warnings();
    REQUIRE(warnings.size() == 1);  // one warning per outage
    CHECK(warnings[0].find("working without it") != std::string::npos);
}

TEST_CASE("remote: a stopped server (SIGSTOP) is a time-out, never a hang") {
    RedisServer server;
    const SigningKey key = generate_signing_key("fleet-1");
    TempDir dir;
    LogCapture log;
    auto options = reader_options(server, {key.public_key()});
    options.operation_timeout = std::chrono::milliseconds(300);
    Runtime rt(dir.path(), options);
    CHECK(rt.compile(scale_kernel("", 2), sm90).origin == Origin::compiled);  // connected: a miss
    server.pause();
    const auto t = Clock::now();
    CHECK(rt.compile(scale_kernel("", 3), sm90).origin == Origin::compiled);
    const double first = seconds_since(t);
    const auto t2 = Clock::now();
    CHECK(rt.compile(scale_kernel("", 4), sm90).origin == Origin::compiled);
    const double second = seconds_since(t2);
    server.resume();
    const RemoteCounters c = rt.remote()->counters();
    CHECK(c.timeouts == 1);
    CHECK(c.skipped >= 1);
    CHECK(first >= 0.3);      // waited for the time-out …
    CHECK(first < 0.3 + 10);  // … and no longer than it and a compile
    CHECK(second < first);    // the breaker: no second wait
    REQUIRE(log.warnings().size() == 1);
    CHECK(log.warnings()[0].find("timed out") != std::string::npos);
}

TEST_CASE("remote: a server answering garbage costs a local compile") {
    // A listener that answers every request with bytes that are no Redis reply.
    const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(listener >= 0);
    TempDir dir;
    const std::string path = (dir.path() / "garbage.sock").string();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    std::jthread garbage([listener] {
        for (;;) {
            const int c = ::accept(listener, nullptr, nullptr);
            if (c < 0) return;
            char buffer[4096];
            if (::read(c, buffer, sizeof buffer) > 0) (void)!::write(c, "%&garbage\r\n", 11);
            ::close(c);
        }
    });
    const SigningKey key = generate_signing_key("fleet-1");
    RemoteOptions o;
    o.address = "unix://" + path;
    o.trusted_keys = {key.public_key()};
    LogCapture log;
    {
        Runtime rt(dir.path() / "cache", o);
        CHECK(rt.compile(scale_kernel("", 2), sm90).origin == Origin::compiled);
        CHECK(rt.remote()->counters().errors == 1);
    }
    ::shutdown(listener, SHUT_RDWR);
    ::close(listener);
    CHECK(log.warnings().size() == 1);
}

TEST_CASE(
    "remote: an ACL user allowed only reads serves a reader, and as a writer its publishes are refused, not fatal") {
    RedisServer server;
    auto admin = server.connect();
    REQUIRE(admin
                .command({"ACL", "SETUSER", "gpu-server", "on", ">reader-secret", "~kjit:*", "resetchannels", "-@all",
                          "+get", "+ping"})
                .is_ok());
    // The writer's ACL docs/SECURITY.md gives: enough to fetch, claim, publish and push.
    REQUIRE(admin
                .command({"ACL", "SETUSER", "kjit-writer", "on", ">writer-secret", "~kjit:*", "resetchannels", "-@all",
                          "+get", "+set", "+del", "+exists", "+scan", "+ping"})
                .is_ok());
    const SigningKey key = generate_signing_key("fleet-1");
    const Kernel published = scale_kernel("", 2);
    {
        TempDir box;
        auto o = writer_options(server, key);
        o.address = server.address() + "?user=kjit-writer&password=writer-secret";
        Runtime writer(box.path(), o);
        CHECK(writer.compile(published, sm90).origin == Origin::compiled);
        REQUIRE(writer.remote()->flush(std::chrono::seconds(5)));
        store_tuned(writer.cache(), {"conv2d_bn_silu", "n1", "NVIDIA H200", "sm_90", "580", "abc", "tile=64", 1.0});
        CHECK(writer.remote()->push(writer.cache()).winners == 1);
        CHECK(writer.remote()->counters().published == 1);
        CHECK(writer.remote()->counters().errors == 0);
    }

    const std::string as_reader = server.address() + "?user=gpu-server&password=reader-secret";
    TempDir dir;
    {
        auto o = reader_options(server, {key.public_key()});
        o.address = as_reader;
        Runtime reader(dir.path(), o);
        CHECK(reader.compile(published, sm90).origin == Origin::remote);
    }
    // The same user configured as a writer by mistake: claims and publishes are denied.
    LogCapture log;
    auto o = writer_options(server, key);
    o.address = as_reader;
    TempDir dir2;
    Runtime writer(dir2.path(), o);
    CHECK(writer.compile(scale_kernel("", 3), sm90).origin == Origin::compiled);
    writer.remote()->flush(std::chrono::seconds(5));
    CHECK(writer.remote()->counters().errors >= 1);
    CHECK(writer.remote()->counters().published == 0);
    CHECK(server.connect().command({"EXISTS", entry_name(scale_kernel("", 3))}).integer() == 0);
    REQUIRE_FALSE(log.warnings().empty());
    CHECK(log.warnings()[0].find("NOPERM") != std::string::npos);
    // A wrong password is a failed connection: a local compile.
    auto bad = reader_options(server, {key.public_key()});
    bad.address = server.address() + "?user=gpu-server&password=wrong";
    TempDir dir3;
    Runtime denied(dir3.path(), bad);
    CHECK(denied.compile(published, sm90).origin == Origin::compiled);
    CHECK(denied.remote()->counters().errors == 1);
}

TEST_CASE("remote: an evicting server serves what it kept, a full one refuses writes, and both cost local compiles") {
    RedisServer server({"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"});
    const SigningKey key = generate_signing_key("fleet-1");
    std::vector<Kernel> kernels;
    for (int f = 2; f < 10; ++f) kernels.push_back(scale_kernel("", f));
    warm_remote(server, key, kernels);
    // Other tenants' data fills the server: the least recently used entries go.
    auto raw = server.connect();
    std::mt19937_64 random(7);
    for (int i = 0; i < 40; ++i) {
        std::string filler(100'000, '\0');
        for (auto& c : filler) c = static_cast<char>(random());
        (void)raw.command({"SET", fmt::format("tenant:{}", i), filler});
    }
    std::size_t kept = 0;
    for (const Kernel& k : kernels) kept += raw.command({"EXISTS", entry_name(k)}).integer() == 1;
    CHECK(kept < kernels.size());
    TempDir dir;
    Runtime reader(dir.path(), reader_options(server, {key.public_key()}));
    std::size_t remote = 0;
    for (const Kernel& k : kernels) {
        const auto r = reader.compile(k, sm90);
        CHECK(r.entry->key == k.key(sm90));
        remote += r.origin == Origin::remote;
    }
    CHECK(remote == kept);
    CHECK(reader.remote()->counters().errors == 0);
    CHECK(reader.remote()->counters().rejected == 0);

    // Full under noeviction: the tenants' data is over the limit, so the server refuses every write
    // (a limit just above the data would let a small entry in after a refused large one).
    REQUIRE(raw.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).is_ok());
    REQUIRE(raw.command({"CONFIG", "SET", "maxmemory", "1mb"}).is_ok());
    REQUIRE(raw.command({"SET", "tenant:late", "y"}).is_error());
    LogCapture log;
    TempDir dir2;
    Runtime writer(dir2.path(), writer_options(server, key));
    CHECK(writer.compile(scale_kernel("", 11), sm90).origin == Origin::compiled);
    writer.remote()->flush(std::chrono::seconds(5));
    CHECK(writer.remote()->counters().published == 0);
    CHECK(writer.remote()->counters().errors >= 1);
    REQUIRE_FALSE(log.warnings().empty());
    CHECK(log.warnings()[0].find("OOM") != std::string::npos);
}

TEST_CASE("remote: four concurrent writers on one server compile each key once") {
    RedisServer server;
    const SigningKey key = generate_signing_key("fleet-1");
    std::vector<Kernel> kernels;
    for (int f = 2; f < 10; ++f) kernels.push_back(scale_kernel("", f));
    constexpr int machines = 4;
    std::barrier start(machines);
    std::vector<std::future<RuntimeStats>> stats;
    std::vector<std::unique_ptr<TempDir>> dirs;
    for (int m = 0; m < machines; ++m) dirs.push_back(std::make_unique<TempDir>());
    for (int m = 0; m < machines; ++m)
        stats.push_back(std::async(std::launch::async, [&, m] {
            Runtime rt(dirs[m]->path(), writer_options(server, key));
            start.arrive_and_wait();
            for (std::size_t i = 0; i < kernels.size(); ++i) {
                const auto& k = kernels[(i + m * 3) % kernels.size()];  // overlapping orders
                CHECK(rt.compile(k, sm90).entry->key == k.key(sm90));
            }
            return rt.stats();
        }));
    std::uint64_t compiles = 0, remote_hits = 0;
    for (auto& s : stats) {
        const RuntimeStats r = s.get();
        compiles += r.compiles;
        remote_hits += r.remote_hits;
    }
    CHECK(compiles == kernels.size());
    CHECK(remote_hits == kernels.size() * (machines - 1));
    CHECK(server.connect().command({"DBSIZE"}).integer() == static_cast<long long>(kernels.size()));  // claims gone
}

TEST_CASE("remote: a key claimed by another machine is passed by (try_compile) and waited for (compile)") {
    RedisServer server;
    const SigningKey key = generate_signing_key("fleet-1");
    const Kernel k = scale_kernel("", 2);
    auto raw = server.connect();
    REQUIRE(raw.command({"SET", fmt::format("kjit:1:claim:{}", k.key(sm90).hex()), "other-box:1", "NX", "EX", "60"})
                .is_ok());
    TempDir dir;
    Runtime rt(dir.path(), writer_options(server, key));
    CHECK_FALSE(rt.try_compile(k, sm90));
    // The other box publishes its entry a moment later (and lets its claim go): compile() waits
    // for it and compiles nothing.
    std::jthread other([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        TempDir box;
        const auto entry = Runtime(box.path(), std::nullopt).compile(k, sm90).entry;
        auto c = server.connect();
        (void)c.command({"SET", entry_name(k), detail::seal_entry(*entry, entry_name(k), key)});
        (void)c.command({"DEL", fmt::format("kjit:1:claim:{}", k.key(sm90).hex())});
    });
    auto waiter_options = writer_options(server, key);
    TempDir dir2;
    Runtime waiter(dir2.path(), waiter_options);
    const auto r = waiter.compile(k, sm90);
    CHECK(r.origin == Origin::remote);
    CHECK(waiter.stats().compiles == 0);
}

TEST_CASE("remote: push and pull move every entry and tuned winner, and pull rejects what it cannot verify") {
    RedisServer server;
    const SigningKey key = generate_signing_key("fleet-1");
    TempDir a, b;
    {
        Runtime writer(a.path(), std::nullopt);  // a cache filled before the fleet existed
        for (int f = 2; f < 6; ++f) (void)writer.compile(scale_kernel("", f), sm90);
        store_tuned(writer.cache(),
                    {"conv2d_bn_silu", "n1 c8", "NVIDIA H200", "sm_90", "580.1", "abc", "tile=64", 12.5});
    }
    {
        Runtime rt(a.path(), writer_options(server, key));
        const auto pushed = rt.remote()->push(rt.cache());
        CHECK(pushed.entries == 4);
        CHECK(pushed.winners == 1);
        CHECK(pushed.present == 0);
        CHECK(pushed.bytes > 0);
        const auto again = rt.remote()->push(rt.cache());
        CHECK(again.entries == 0);
        CHECK(again.present == 5);
    }
    auto raw = server.connect();
    REQUIRE(raw.command({"SET", "kjit:1:entry:" + std::string(32, 'a'), "not an envelope"}).is_ok());
    {
        LogCapture log;
        Runtime rt(b.path(), reader_options(server, {key.public_key()}));
        const auto pulled = rt.remote()->pull(rt.cache());
        CHECK(pulled.entries == 4);
        CHECK(pulled.winners == 1);
        CHECK(pulled.rejected == 1);
        REQUIRE(tuned_configs(rt.cache()).size() == 1);
        CHECK(tuned_configs(rt.cache())[0].config == "tile=64");
        CHECK(rt.remote()->pull(rt.cache()).entries == 0);  // all here now
        CHECK(rt.cache().keys().size() == 4);
        for (int f = 2; f < 6; ++f) CHECK(rt.compile(scale_kernel("", f), sm90).origin == Origin::cache);
    }
    // A reader cannot push; an unreachable server is the command's error.
    Runtime reader(b.path(), reader_options(server, {key.public_key()}));
    CHECK_THROWS_AS((void)reader.remote()->push(reader.cache()), UsageError);
    server.stop();
    CHECK_THROWS_WITH_AS((void)reader.remote()->pull(reader.cache()), doctest::Contains("cannot pull from"), Error);
}

TEST_CASE("remote: a key prefix keeps two caches apart on one server") {
    RedisServer server;
    const SigningKey key = generate_signing_key("fleet-1");
    const Kernel k = scale_kernel("", 2);
    TempDir a, b;
    auto team_a = writer_options(server, key);
    team_a.address += "?prefix=team-a:";
    {
        Runtime rt(a.path(), team_a);
        (void)rt.compile(k, sm90);
        REQUIRE(rt.remote()->flush(std::chrono::seconds(5)));
    }
    CHECK(server.connect().command({"EXISTS", entry_name(k, "team-a:")}).integer() == 1);
    auto team_b = reader_options(server, {key.public_key()});
    team_b.address += "?prefix=team-b:";
    Runtime rt(b.path(), team_b);
    CHECK(rt.compile(k, sm90).origin == Origin::compiled);
}

TEST_CASE("remote: settings are checked, and say what to set") {
    const SigningKey key = generate_signing_key("fleet-1");
    const auto refused = [&](RemoteOptions o) {
        try {
            RemoteCache remote(std::move(o));
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    RemoteOptions o;
    o.trusted_keys = {key.public_key()};
    for (const char* bad :
         {"http://host:6379", "redis://", "redis://host:99999", "redis://host:port", "redis://host/3",
          "unix://relative/path", "redis://host?colour=blue", "redis://user@host", "redis://host?prefix=%zz"}) {
        o.address = bad;
        CAPTURE(bad);
        CHECK(refused(o).find("remote cache address") != std::string::npos);
    }
    o.address = "redis://[::1]:7000?prefix=a";
    CHECK(refused(o) == "accepted");
    o.address = "redis://u:p%40ss@host";
    CHECK(refused(o) == "accepted");
    RemoteOptions writer;
    writer.address = "redis://host";
    writer.mode = RemoteMode::read_write;
    CHECK(refused(writer).find("KJIT_SIGNING_KEY") != std::string::npos);
    RemoteOptions reader;
    reader.address = "redis://host";
    CHECK(refused(reader).find("KJIT_TRUSTED_KEYS") != std::string::npos);
    writer.signing_key = key;  // a writer trusts its own key
    CHECK(refused(writer) == "accepted");
    CHECK(RemoteCache(writer).describe() == "redis://host:6379 (read-write, signing as fleet-1)");

    EnvScope env({"KJIT_REMOTE", "KJIT_REMOTE_MODE", "KJIT_SIGNING_KEY", "KJIT_TRUSTED_KEYS"});
    ::unsetenv("KJIT_REMOTE");
    CHECK_FALSE(RemoteOptions::from_environment());
    ::setenv("KJIT_REMOTE", "redis://host", 1);
    ::setenv("KJIT_REMOTE_MODE", "write", 1);
    CHECK_THROWS_WITH_AS((void)RemoteOptions::from_environment(), doctest::Contains("read-only or read-write"),
                         UsageError);
    ::setenv("KJIT_REMOTE_MODE", "read-write", 1);
    ::setenv("KJIT_SIGNING_KEY", "/nonexistent/fleet-1.secret", 1);
    CHECK_THROWS_WITH_AS((void)RemoteOptions::from_environment(), doctest::Contains("cannot read the file"),
                         UsageError);
    TempDir keys;
    const auto [secret, pub] = write_key_pair(key, keys.path());
    ::setenv("KJIT_SIGNING_KEY", secret.c_str(), 1);
    ::setenv("KJIT_TRUSTED_KEYS", pub.c_str(), 1);
    const auto from_env = RemoteOptions::from_environment();
    REQUIRE(from_env);
    CHECK(from_env->mode == RemoteMode::read_write);
    CHECK(from_env->signing_key->name == "fleet-1");
    REQUIRE(from_env->trusted_keys.size() == 1);
    // A runtime made with the environment's settings refuses wrong ones at once.
    ::setenv("KJIT_REMOTE", "redis:/typo", 1);
    CHECK_THROWS_AS(Runtime(keys.path()), UsageError);
}
