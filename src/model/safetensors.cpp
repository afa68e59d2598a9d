// safetensors files: parsed from memory with every size and offset checked (the bytes come from
// anywhere: tests/fuzz fuzzes this), and written for f32 tensors.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <kjit/error.hpp>
#include <kjit/safetensors.hpp>
#include <nlohmann/json.hpp>

#include "jit/file_bytes.hpp"
#include "jit/mapped_memory.hpp"

namespace kjit {
namespace {

/// Bytes per element of the dtypes safetensors defines.
std::optional<std::size_t> dtype_bytes(std::string_view dtype) {
    static const std::pair<std::string_view, std::size_t> sizes[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
        {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (const auto& [name, size] : sizes)
        if (name == dtype) return size;
    return std::nullopt;
}

[[noreturn]] void malformed(const std::string& what) {
    throw UsageError(fmt::format("not a valid safetensors file: {}", what));
}

}  // namespace

std::map<std::string, SafeTensor> parse_safetensors(std::span<const std::byte> file) {
    if (file.size() < 8) malformed(fmt::format("{} bytes, fewer than the 8-byte header length", file.size()));
    std::uint64_t header_size = 0;
    for (int i = 7; i >= 0; --i) header_size = header_size << 8 | std::to_integer<std::uint64_t>(file[i]);
    if (header_size > file.size() - 8)
        malformed(fmt::format("the header claims {} bytes but the file has {} after the length", header_size,
                              file.size() - 8));
    const std::string_view header(reinterpret_cast<const char*>(file.data() + 8), header_size);
    const std::span<const std::byte> data = file.subspan(8 + header_size);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(header);
    } catch (const nlohmann::json::exception& e) {
        malformed(fmt::format("its header is not JSON ({})", e.what()));
    }
    if (!j.is_object()) malformed("its header is not a JSON object");
    std::map<std::string, SafeTensor> tensors;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const auto& item : j.items()) {
        const std::string& name = item.key();
        const nlohmann::json& t = item.value();
        if (name == "__metadata__") continue;
        auto bad = [&](const std::string& what) { malformed(fmt::format("tensor '{}': {}", name, what)); };
        if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
            bad("needs dtype, shape and data_offsets");
        if (!t["dtype"].is_string()) bad("dtype is not a string");
        const std::string dtype = t["dtype"].get<std::string>();
        const auto element = dtype_bytes(dtype);
        if (!element) bad(fmt::format("unknown dtype '{}'", dtype));
        if (!t["shape"].is_array()) bad("shape is not a list");
        Shape shape;
        std::uint64_t count = 1;
        for (const auto& d : t["shape"]) {
            if (!d.is_number_unsigned()) bad(fmt::format("shape entry {} is not a non-negative integer", d.dump()));
            const auto v = d.get<std::uint64_t>();
            if (v && count > UINT64_MAX / v / *element) bad("its shape overflows");
            count *= v;
            shape.push_back(static_cast<std::size_t>(v));
        }
        const auto& offsets = t["data_offsets"];
        if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
            !offsets[1].is_number_unsigned())
            bad("data_offsets must be two non-negative integers");
        const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
        if (begin > end || end > data.size())
            bad(fmt::format("data_offsets [{}, {}] lie outside the {} bytes of data", begin, end, data.size()));
        if (end - begin != count * *element)
            bad(fmt::format("{} bytes of data for {} × {} of {} bytes", end - begin, fmt::join(shape, "×"), dtype,
                            *element));
        ranges.emplace_back(begin, end);
        tensors.emplace(name, SafeTensor{dtype, std::move(shape), data.subspan(begin, end - begin)});
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second && ranges[i].first != ranges[i].second)
            malformed(fmt::format("two tensors share the bytes {}..{}", ranges[i].first, ranges[i - 1].second));
    return tensors;
}

struct SafetensorsFile::Bytes {
    std::variant<detail::MappedMemory, std::string> held;  // mapped, or read where it cannot be

    std::span<const std::byte> span() const {
        if (const auto* mapped = std::get_if<detail::MappedMemory>(&held)) return mapped->bytes();
        return std::as_bytes(std::span(std::get<std::string>(held)));
    }
};

SafetensorsFile::SafetensorsFile(const std::filesystem::path& file) {
    if (auto mapped = detail::MappedMemory::file(file)) {
        bytes_ = std::make_unique<Bytes>(Bytes{*std::move(mapped)});
    } else if (auto read = detail::file_bytes(file)) {
        bytes_ = std::make_unique<Bytes>(Bytes{*std::move(read)});
    } else {
        throw UsageError(fmt::format("cannot read the weights file {} (does it exist?)", file.string()));
    }
    try {
        tensors_ = parse_safetensors(bytes_->span());
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", file.string(), e.what()));
    }
}

SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

void write_safetensors(const std::filesystem::path& file, std::span<const NamedTensor> tensors) {
    nlohmann::json header = nlohmann::json::object();
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        const std::size_t n = element_count(t.shape);
        if (n != t.values.size())
            throw UsageError(fmt::format("tensor '{}': shape [{}] holds {} values, {} given", t.name,
                                         fmt::join(t.shape, ", "), n, t.values.size()));
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * 4}}};
        offset += n * 4;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) throw UsageError(fmt::format("cannot write {}", file.string()));
    const std::uint64_t size = text.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>(size >> (8 * i) & 0xff));
    out << text;
    for (const auto& t : tensors)
        out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size_bytes()));
    if (!out) throw UsageError(fmt::format("writing {} failed", file.string()));
}

}  // namespace kjit
