// Reads ptxas' verbose report ("Used 40 registers, 1024 bytes smem, …") for one entry point.
#include <charconv>
#include <optional>

#include <kjit/compile.hpp>

namespace kjit {
namespace {

/// The number written just before `phrase` in `line` (e.g. "12" in "12 bytes stack frame").
std::optional<int> number_before(std::string_view line, std::string_view phrase) {
    const auto at = line.find(phrase);
    if (at == std::string_view::npos) return std::nullopt;
    auto end = at;
    while (end > 0 && line[end - 1] == ' ') --end;
    auto begin = end;
    while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
    int value = 0;
    if (begin == end || std::from_chars(line.data() + begin, line.data() + end, value).ec != std::errc{})
        return std::nullopt;
    return value;
}

}  // namespace

ResourceReport parse_ptxas_report(std::string_view log, std::string_view entry_point) {
    ResourceReport report;
    bool in_entry = false;
    std::size_t pos = 0;
    while (pos < log.size()) {
        std::size_t end = log.find('\n', pos);
        if (end == std::string_view::npos) end = log.size();
        const std::string_view line = log.substr(pos, end - pos);
        pos = end + 1;
        if (line.find("Compiling entry function '") != std::string_view::npos) {
            // A section per entry: "Compiling entry function 'NAME' for 'sm_90'".
            const auto open = line.find('\'') + 1;
            in_entry = line.substr(open, line.find('\'', open) - open) == entry_point;
            continue;
        }
        if (!in_entry) continue;
        auto take = [&](int& field, std::string_view phrase) {
            if (auto v = number_before(line, phrase)) field = *v;
        };
        take(report.stack_frame_bytes, " bytes stack frame");
        take(report.spill_store_bytes, " bytes spill stores");
        take(report.spill_load_bytes, " bytes spill loads");
        take(report.registers, " registers");
        take(report.barriers, " barriers");
        take(report.shared_static_bytes, " bytes smem");
        take(report.constant_bytes, " bytes cmem[0]");
    }
    return report;
}

}  // namespace kjit
