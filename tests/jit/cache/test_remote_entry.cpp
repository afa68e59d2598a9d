// The remote tier's entry envelope: an entry sealed and opened again unchanged; anything else — a
// flipped byte anywhere, another key, an untrusted or unknown signer, cut short, garbage — is
// rejected with the reason, never opened.
#include <doctest/doctest.h>

#include <random>

#include "jit/cache/cache_test_support.hpp"
#include "jit/cache/remote_entry.hpp"

using namespace kjit;
using namespace kjit::test;

namespace {
bool same(const CacheEntry& a, const CacheEntry& b) {
    return a.key == b.key && a.readable_id == b.readable_id && a.kernel_name == b.kernel_name && a.arch == b.arch &&
           a.nvrtc_version == b.nvrtc_version && a.options == b.options && a.compiled.ptx == b.compiled.ptx &&
           a.compiled.cubin == b.compiled.cubin && a.compiled.log == b.compiled.log &&
           a.compiled.resources == b.compiled.resources && a.compiled.compile_ms == b.compiled.compile_ms;
}
}  // namespace

TEST_CASE("a sealed entry opens unchanged for its key, signed by a trusted key") {
    const SigningKey writer = generate_signing_key("fleet-1");
    const std::vector<PublicKey> trusted{generate_signing_key("old-0").public_key(), writer.public_key()};
    CacheEntry entry = sample_entry(7);
    entry.compiled.ptx = std::string(20000, 'p');  // compresses
    entry.compiled.compile_ms = 123.25;
    entry.compiled.resources.registers = -1;  // any int travels
    const std::string key = "kjit:v1:" + entry.key.hex();
    const std::string value = detail::seal_entry(entry, key, writer);
    CHECK(value.size() < entry.compiled.ptx.size());
    const detail::OpenedEntry opened = detail::open_entry(value, key, trusted, entry.key);
    CHECK(opened.rejected.empty());
    REQUIRE(opened.entry);
    CHECK(same(*opened.entry, entry));
    CHECK(opened.entry->hit_count == 0);  // local bookkeeping does not travel
}

TEST_CASE("a remote value that is not sound is rejected with the reason, never opened") {
    const SigningKey writer = generate_signing_key("fleet-1");
    const std::vector<PublicKey> trusted{writer.public_key()};
    const CacheEntry entry = sample_entry(9);
    const std::string key = "kjit:v1:" + entry.key.hex();
    const std::string value = detail::seal_entry(entry, key, writer);
    const auto rejected = [&](std::string_view v, std::string_view k = {}, const CacheKey* expected = nullptr) {
        const auto opened = detail::open_entry(v, k.empty() ? key : k, trusted, expected ? *expected : entry.key);
        CHECK_FALSE(opened.entry);
        return opened.rejected;
    };
    // Every byte flipped in turn: none passes.
    for (std::size_t i = 0; i < value.size(); ++i) {
        std::string bad = value;
        bad[i] = static_cast<char>(bad[i] ^ 0x20);
        CAPTURE(i);
        CHECK_FALSE(rejected(bad).empty());
    }
    // The same value under another key (a replay), or holding another key's entry.
    CHECK(rejected(value, "kjit:v1:" + sample_entry(10).key.hex()).find("does not hold for this key") !=
          std::string::npos);
    const CacheKey other = sample_entry(10).key;
    CHECK(rejected(value, key, &other) == "it holds the entry of another key");
    // Signed by a key the reader does not trust, or one of the same name that is not the trusted one.
    CHECK(
        detail::open_entry(value, key, std::vector{generate_signing_key("fleet-2").public_key()}, entry.key).rejected ==
        "signed by 'fleet-1', a key this reader does not trust");
    CHECK(detail::open_entry(value, key, std::vector{generate_signing_key("fleet-1").public_key()}, entry.key)
              .rejected.find("does not hold") != std::string::npos);
    CHECK(detail::open_entry(value, key, {}, entry.key).rejected.find("does not trust") != std::string::npos);
    // Cut short anywhere, or not an envelope at all.
    for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{8}, std::size_t{40}, value.size() - 1})
        CHECK_FALSE(rejected(std::string_view(value).substr(0, n)).empty());
    std::mt19937_64 rng{std::random_device{}()};
    std::string garbage(300, '\0');
    for (auto& c : garbage) c = static_cast<char>(rng());
    CHECK(rejected(garbage) == "not a kjit entry (no magic)");
    CHECK(!rejected("kjit.ent" + garbage).empty());
}

TEST_CASE("a tuned winner's envelope opens unchanged under its name, and never as an entry or under another name") {
    const SigningKey writer = generate_signing_key("fleet-1");
    const std::vector<PublicKey> trusted{writer.public_key()};
    const TunedConfig winner{"conv2d_bn_silu", "n1 c64", "NVIDIA H200", "sm_90", "580.65", "0123abcd", "TMA=1", 17.25};
    const std::string name = "kjit:1:winner:00aa";
    const std::string value = detail::seal_winner(winner, name, writer);
    const auto opened = detail::open_winner(value, name, trusted);
    REQUIRE(opened.winner);
    CHECK(opened.winner->config == "TMA=1");
    CHECK(opened.winner->source_hash == "0123abcd");
    CHECK(opened.winner->microseconds == 17.25);
    CHECK(detail::open_winner(value, "kjit:1:winner:00ab", trusted).rejected.find("does not hold") !=
          std::string::npos);
    CHECK(detail::open_entry(value, name, trusted, sample_entry(1).key).rejected == "not a kjit entry (no magic)");
    const std::string entry_value = detail::seal_entry(sample_entry(1), name, writer);
    CHECK(detail::open_winner(entry_value, name, trusted).rejected == "not a kjit tuned winner (no magic)");
}
