// Mapped memory: a file's bytes without a copy (or nothing, where it cannot be mapped), and
// zeroed writable pages.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <vector>

#include "jit/mapped_memory.hpp"
#include "support.hpp"

using kjit::detail::MappedMemory;

TEST_CASE("a mapped file holds the file's bytes") {
    kjit::test::TempDir dir;
    std::string bytes(3 * 4096 + 17, '\0');  // ragged: not a whole number of pages
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 7);
    std::ofstream(dir.path() / "f", std::ios::binary) << bytes;
    const auto mapped = MappedMemory::file(dir.path() / "f");
    REQUIRE(mapped);
    const auto span = mapped->bytes();
    CHECK(std::string_view(reinterpret_cast<const char*>(span.data()), span.size()) == bytes);
}

TEST_CASE("what cannot be mapped is nullopt, for the caller to read instead") {
    kjit::test::TempDir dir;
    std::ofstream(dir.path() / "empty").flush();
    CHECK_FALSE(MappedMemory::file(dir.path() / "empty"));
    CHECK_FALSE(MappedMemory::file(dir.path() / "missing"));
    CHECK_FALSE(MappedMemory::file(dir.path()));  // a directory
    REQUIRE(::mkfifo((dir.path() / "pipe").c_str(), 0600) == 0);
    CHECK_FALSE(MappedMemory::file(dir.path() / "pipe"));  // returns at once: no writer is waited for
}

TEST_CASE("zeroed memory is zero, writable, and moves with its owner") {
    MappedMemory a = MappedMemory::zeroed(5 * 4096 + 3);
    auto span = a.bytes();
    REQUIRE(span.size() == 5 * 4096 + 3);
    CHECK(std::ranges::all_of(span, [](std::byte b) { return b == std::byte{0}; }));
    std::ranges::fill(span, std::byte{0x7e});
    MappedMemory b = std::move(a);
    CHECK(a.bytes().empty());  // NOLINT(bugprone-use-after-move): a moved-from mapping is empty
    CHECK(b.bytes().data() == span.data());
    CHECK(std::ranges::all_of(b.bytes(), [](std::byte x) { return x == std::byte{0x7e}; }));
    b = MappedMemory::zeroed(16);
    CHECK(b.bytes().size() == 16);
    CHECK_THROWS_AS((void)MappedMemory::zeroed(0), std::bad_alloc);
}

TEST_CASE("populating pages leaves what they hold as it was") {
    std::vector<std::uint32_t> v(300'000);  // ragged: its ends lie inside pages others may share
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint32_t>(i * 2654435761u);
    const auto before = v;
    kjit::detail::populate(std::as_writable_bytes(std::span(v)));
    CHECK(v == before);
    std::vector<float> reserved;
    reserved.reserve(1 << 20);  // as read_output does: storage populated, then written
    kjit::detail::populate(std::as_writable_bytes(std::span(reserved.data(), 1 << 20)));
    reserved.resize(1 << 20, 1.5f);
    CHECK(std::ranges::count(reserved, 1.5f) == 1 << 20);
    kjit::detail::populate({});  // nothing to do
}
