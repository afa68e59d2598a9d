// Fuzz target: a safetensors weights file (LoadedModel::load_weights, kjit model run --input).
// Every input parses to tensors whose bytes lie inside the file, or throws UsageError.
#include <kjit/error.hpp>
#include <kjit/model.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
    try {
        for (const auto& [name, t] : kjit::parse_safetensors(file))
            if (t.data.data() < file.data() || t.data.data() + t.data.size() > file.data() + file.size())
                __builtin_trap();  // a tensor pointing outside the file
    } catch (const kjit::UsageError&) {}
    return 0;
}
