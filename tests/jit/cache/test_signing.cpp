// Signing keys for remote entries: generated, written as keygen writes them, read back; bad key
// files are refused saying what is wrong; a signature holds only for its message and key.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <kjit/error.hpp>
#include <kjit/signing.hpp>

#include "support.hpp"

using namespace kjit;

namespace {
std::string read(const std::filesystem::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
std::span<const std::uint8_t> bytes(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}
}  // namespace

TEST_CASE("signing keys: generated, written (the secret 0600, never overwritten), read back, verified") {
    test::TempDir dir;
    const SigningKey key = generate_signing_key("fleet-1");
    const auto [secret, pub] = write_key_pair(key, dir.path());
    struct stat st {};
    REQUIRE(::stat(secret.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK_THROWS_WITH_AS((void)write_key_pair(key, dir.path()), doctest::Contains("never overwrites a key"),
                         UsageError);

    const SigningKey again = parse_signing_key(read(secret), secret.string());
    CHECK(again.name == "fleet-1");
    CHECK(again.secret == key.secret);
    const auto trusted = parse_trusted_keys(fmt::format("# the fleet's keys\n\n{}  \n", read(pub)), "trusted");
    REQUIRE(trusted.size() == 1);
    CHECK(trusted[0].name == "fleet-1");
    CHECK(trusted[0].bytes == key.public_key().bytes);

    const auto signature = key.sign(bytes("kernel bytes"));
    CHECK(verify_signature(trusted[0], bytes("kernel bytes"), signature));
    CHECK_FALSE(verify_signature(trusted[0], bytes("kernel bytez"), signature));
    CHECK_FALSE(verify_signature(generate_signing_key("fleet-2").public_key(), bytes("kernel bytes"), signature));
}

TEST_CASE("bad key names and key files are refused, saying what is wrong") {
    CHECK_THROWS_WITH_AS((void)generate_signing_key("a b"), doctest::Contains("is no key name"), UsageError);
    CHECK_THROWS_WITH_AS((void)generate_signing_key(""), doctest::Contains("is no key name"), UsageError);
    const SigningKey key = generate_signing_key("k1");
    CHECK_THROWS_WITH_AS((void)parse_signing_key("k1", "s"), doctest::Contains("no ':'"), UsageError);
    CHECK_THROWS_WITH_AS((void)parse_signing_key(key.public_key().line(), "s"),
                         doctest::Contains("is not 64 bytes of base64"), UsageError);
    CHECK_THROWS_WITH_AS((void)parse_signing_key("k1:not base64!", "s"), doctest::Contains("base64"), UsageError);
    // A secret whose public half is another key's: not what keygen wrote.
    SigningKey mixed = key;
    const auto other = generate_signing_key("k2").public_key();
    std::copy(other.bytes.begin(), other.bytes.end(), mixed.secret.begin() + 32);
    CHECK_THROWS_WITH_AS((void)parse_signing_key(mixed.line(), "s"), doctest::Contains("do not belong together"),
                         UsageError);
    CHECK_THROWS_WITH_AS((void)parse_trusted_keys(fmt::format("{0}\n{0}", key.public_key().line()), "t"),
                         doctest::Contains("t line 2: the key name 'k1' is given twice"), UsageError);
    CHECK_THROWS_WITH_AS((void)parse_trusted_keys(fmt::format("\n{}", key.line()), "t"),
                         doctest::Contains("t line 2: a public key: key 'k1' is not 32 bytes"), UsageError);
    CHECK(parse_trusted_keys("# nothing yet\n", "t").empty());
}
