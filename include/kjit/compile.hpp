// kjit/compile.hpp — NVRTC compilation: targets, typed options, the ptxas resource report.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <kjit/arch.hpp>
#include <kjit/kernel.hpp>

namespace kjit {

enum class CxxStandard { cxx17, cxx20 };

/// A preprocessor definition: -D NAME=VALUE.
struct Define {
    std::string name;
    std::string value;
    friend bool operator==(const Define&, const Define&) = default;
};

/// Everything NVRTC is told. `canonical()` is the exact option list, in a fixed order; it is
/// part of the cache key.
struct CompileOptions {
    Arch arch{9, 0};
    CxxStandard standard = CxxStandard::cxx17;
    bool line_info = false;
    std::vector<Define> defines{};

    [[nodiscard]] std::vector<std::string> canonical() const;
    /// Equal options have equal canonical() lists.
    friend bool operator==(const CompileOptions&, const CompileOptions&) = default;
};

/// What ptxas reported for the entry point (--ptxas-options=-v).
struct ResourceReport {
    int registers = 0;
    int spill_store_bytes = 0;
    int spill_load_bytes = 0;
    int shared_static_bytes = 0;
    int stack_frame_bytes = 0;
    int constant_bytes = 0;  ///< cmem[0]: the parameter bank
    int barriers = 0;
    friend bool operator==(const ResourceReport&, const ResourceReport&) = default;
};

/// Parses ptxas' verbose output for one entry function.
[[nodiscard]] ResourceReport parse_ptxas_report(std::string_view log, std::string_view entry_point);

/// The products of one NVRTC run.
struct Compiled {
    std::string ptx;
    std::vector<std::byte> cubin;
    std::string log;
    ResourceReport resources;
    double compile_ms = 0;
};

/// Compiles `kernel` for `options.arch` to PTX and cubin. Needs no GPU and no driver.
/// Safe to call from many threads. Throws CompileError with the log and the source lines
/// around the first error.
[[nodiscard]] Compiled compile(const Kernel& kernel, const CompileOptions& options);

/// "13.0 build 65be0db342ad51a0": NVRTC's version and the build id of the loaded library.
[[nodiscard]] const std::string& nvrtc_version();

}  // namespace kjit
