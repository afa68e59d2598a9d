// kjit/safetensors.hpp — safetensors files: parsed from memory with every size and offset
// checked, and written for f32 tensors.
#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>

#include <kjit/runtime_op.hpp>

namespace kjit {

/// One tensor of a safetensors file: its dtype ("F32", "F16", …), shape, and bytes in the file.
struct SafeTensor {
    std::string dtype;
    Shape shape;
    std::span<const std::byte> data;
};

/// The tensors of a safetensors file held in memory (8-byte little-endian header length, a JSON
/// header, the data). Throws UsageError saying what is malformed: sizes, offsets outside the
/// data, a byte count that does not match dtype × shape, an unknown dtype, overlapping tensors.
[[nodiscard]] std::map<std::string, SafeTensor> parse_safetensors(std::span<const std::byte> file);

/// A safetensors file opened for reading: mapped into memory with its pages read in one call
/// (a file that cannot be mapped, a pipe, is read instead) and parsed. The tensors' bytes are
/// the file's, not a copy, valid while this lives; as with any mapped file, it must not be
/// truncated meanwhile.
class SafetensorsFile {
public:
    /// Throws UsageError naming the file when it cannot be read or is malformed.
    explicit SafetensorsFile(const std::filesystem::path& file);
    ~SafetensorsFile();
    SafetensorsFile(SafetensorsFile&&) noexcept;
    SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

    [[nodiscard]] const std::map<std::string, SafeTensor>& tensors() const noexcept { return tensors_; }

private:
    struct Bytes;
    std::unique_ptr<Bytes> bytes_;
    std::map<std::string, SafeTensor> tensors_;
};

/// A named f32 tensor to write.
struct NamedTensor {
    std::string name;
    Shape shape;
    std::span<const float> values;
};
/// Writes `tensors` as a safetensors file (F32).
void write_safetensors(const std::filesystem::path& file, std::span<const NamedTensor> tensors);

}  // namespace kjit
