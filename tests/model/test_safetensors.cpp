// safetensors files: written, parsed back, and malformed ones refused with the reason.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>

#include <kjit/safetensors.hpp>

#include "support.hpp"

using namespace kjit;

namespace {

std::vector<std::byte> safetensors_bytes(const std::string& header, std::size_t data_bytes, std::uint64_t claimed = 0) {
    std::vector<std::byte> out(8);
    const std::uint64_t n = claimed ? claimed : header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(n >> (8 * i) & 0xff);
    for (char c : header) out.push_back(static_cast<std::byte>(c));
    out.resize(out.size() + data_bytes, std::byte{0x3f});
    return out;
}

std::string parse_error(const std::vector<std::byte>& file) {
    try {
        (void)parse_safetensors(file);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("safetensors: a written file parses back, tensor by tensor") {
    test::TempDir dir;
    const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{-1.5f};
    const NamedTensor tensors[] = {{"layer.weight", {2, 3}, a}, {"layer.bias", {1}, b}};
    write_safetensors(dir.path() / "w.safetensors", tensors);
    std::ifstream in(dir.path() / "w.safetensors", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto parsed = parse_safetensors(std::as_bytes(std::span(bytes)));
    REQUIRE(parsed.size() == 2);
    const SafeTensor& w = parsed.at("layer.weight");
    CHECK(w.dtype == "F32");
    CHECK(w.shape == Shape{2, 3});
    REQUIRE(w.data.size() == 24);
    std::vector<float> back(6);
    std::memcpy(back.data(), w.data.data(), 24);
    CHECK(back == a);
    CHECK((bytes.size() - w.data.size() - 4) % 8 == 0);  // data starts 8-byte aligned
    CHECK_THROWS_WITH_AS(write_safetensors(dir.path() / "x", std::array{NamedTensor{"t", {2, 2}, a}}),
                         doctest::Contains("holds 4 values, 6 given"), UsageError);
}
TEST_CASE("safetensors: malformed files are errors saying what is wrong") {
    const std::string ok = R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
    CHECK(parse_error(safetensors_bytes(ok, 8)) == "(no error)");
    CHECK(parse_error({std::byte{1}, std::byte{2}}).find("fewer than the 8-byte header length") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(ok, 8, 1ULL << 40)).find("the header claims") != std::string::npos);
    CHECK(parse_error(safetensors_bytes("{not json", 0)).find("header is not JSON") != std::string::npos);
    CHECK(parse_error(safetensors_bytes("[1, 2]", 0)).find("not a JSON object") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(ok, 4)).find("outside the 4 bytes of data") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8))
              .find("8 bytes of data for 3 × F32") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8))
              .find("unknown dtype 'Q4'") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8))
              .find("not a non-negative integer") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8))
              .find("outside") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [2]}})", 8))
              .find("needs dtype, shape and data_offsets") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                        12))
              .find("share the bytes") != std::string::npos);
    CHECK(parse_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],
                                             "data_offsets": [0, 8]}})",
                                        8))
              .find("overflows") != std::string::npos);
}

TEST_CASE("safetensors: an opened file maps the written tensors, unreadable and malformed files name the file") {
    test::TempDir dir;
    const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{-1.5f};
    const NamedTensor tensors[] = {{"layer.weight", {2, 3}, a}, {"layer.bias", {1}, b}};
    write_safetensors(dir.path() / "w.safetensors", tensors);
    SafetensorsFile opened(dir.path() / "w.safetensors");
    const SafetensorsFile file = std::move(opened);  // the tensors stay valid: they point into the mapping
    REQUIRE(file.tensors().size() == 2);
    const SafeTensor& w = file.tensors().at("layer.weight");
    CHECK(w.shape == Shape{2, 3});
    std::vector<float> back(6);
    REQUIRE(w.data.size() == 24);
    std::memcpy(back.data(), w.data.data(), 24);
    CHECK(back == a);
    CHECK_THROWS_WITH_AS(SafetensorsFile(dir.path() / "missing.safetensors"),
                         doctest::Contains("cannot read the weights file"), UsageError);
    std::ofstream(dir.path() / "empty.safetensors").flush();  // cannot be mapped: read, then refused
    CHECK_THROWS_WITH_AS(SafetensorsFile(dir.path() / "empty.safetensors"),
                         doctest::Contains("empty.safetensors: not a valid safetensors file: 0 bytes"), UsageError);
}
