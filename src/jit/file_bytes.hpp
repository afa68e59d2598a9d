// A whole file read in one go: its size first, then one read, rather than through a growing
// string stream (which copies a 10 MB weights file several times over).
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace kjit::detail {

/// The file's bytes, or nullopt where it cannot be opened or read.
std::optional<std::string> file_bytes(const std::filesystem::path& file);

}  // namespace kjit::detail
