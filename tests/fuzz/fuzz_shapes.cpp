// Fuzz target: a shapes file for `kjit tune --shapes` (JSON from the user). Every input parses
// to layers or throws UsageError; nothing else.
#include <kjit/error.hpp>

#include "../../src/cli/cli.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto layers = kjit::cli::parse_layers(std::string_view(reinterpret_cast<const char*>(data), size),
                                                    "fuzz");
        for (const auto& l : layers)
            if (l.shape.batch <= 0 || l.shape.c_in <= 0 || l.attrs.stride_h <= 0) __builtin_trap();  // validated
    } catch (const kjit::UsageError&) {}
    return 0;
}
