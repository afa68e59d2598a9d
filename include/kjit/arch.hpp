// kjit/arch.hpp — a compilation target (sm_80, sm_90a, …) and the targets this NVRTC supports.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kjit {

/// A compilation target: sm_80, sm_87, sm_90, sm_90a, sm_100f, …
class Arch {
public:
    /// Accepts "sm_90", "sm_90a", "compute_90", "90", "9.0". Throws UsageError naming the
    /// archs this NVRTC supports when the text is malformed or the arch unknown.
    static Arch parse(std::string_view text);
    constexpr Arch(int major, int minor, char suffix = '\0') noexcept : major_(major), minor_(minor), suffix_(suffix) {}

    [[nodiscard]] constexpr int major() const noexcept { return major_; }
    [[nodiscard]] constexpr int minor() const noexcept { return minor_; }
    /// '\0', or 'a' / 'f' for arch-specific / family-specific targets.
    [[nodiscard]] constexpr char suffix() const noexcept { return suffix_; }
    [[nodiscard]] constexpr int number() const noexcept { return major_ * 10 + minor_; }
    [[nodiscard]] std::string name() const;  // "sm_90a"
    friend constexpr bool operator==(Arch, Arch) = default;

private:
    int major_;
    int minor_;
    char suffix_;
};

/// Archs this NVRTC can compile for (nvrtcGetSupportedArchs).
[[nodiscard]] std::vector<int> supported_arch_numbers();

}  // namespace kjit
