// Layers for kjit run, tune and check: from command-line numbers or a shapes file (JSON, untrusted).
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "cli.hpp"

namespace kjit::cli {

Layer make_layer(const LayerSpec& s) {
    const std::pair<const char*, int> positive[] = {
        {"batch", s.batch},           {"cin", s.cin},       {"cout", s.cout},
        {"height", s.height},         {"width", s.width},   {"kernel height", s.kernel_h},
        {"kernel width", s.kernel_w}, {"stride", s.stride}, {"groups", s.groups}};
    for (const auto& [name, value] : positive)
        if (value <= 0) throw UsageError(fmt::format("{} = {}: it must be a positive number", name, value));
    if (s.pad < 0) throw UsageError(fmt::format("pad = {}: it must not be negative", s.pad));
    Layer l{{.kernel_h = s.kernel_h,
             .kernel_w = s.kernel_w,
             .stride_h = s.stride,
             .stride_w = s.stride,
             .pad_h = s.pad,
             .pad_w = s.pad,
             .groups = s.groups},
            {s.batch, s.cin, s.height, s.width, s.cout}};
    (void)conv2d_output_size(l.attrs, l.shape);  // validates the combination, saying what is wrong
    return l;
}

void add_layer_options(CLI::App& sub, LayerOptions& o) {
    sub.add_option("--batch", o.batch, "Batch size")->check(positive_int);
    sub.add_option("--cin", o.cin, "Input channels")->check(positive_int);
    sub.add_option("--cout", o.cout, "Output channels")->check(positive_int);
    sub.add_option("--hw", o.hw, "Input height and width")->expected(2)->check(positive_int);
    sub.add_option("--kernel-size", o.kernel_size, "Kernel height and width (default 1 1)")
        ->expected(2)
        ->check(positive_int);
    sub.add_option("--stride", o.stride, "Stride (default 1)")->check(positive_int);
    sub.add_option("--pad", o.pad, "Padding (default 0)")->check(non_negative_int);
    sub.add_option("--groups", o.groups, "Groups (default 1)")->check(positive_int);
}

Layer layer_of(const LayerOptions& o) {
    if (o.hw.size() != 2) throw UsageError("give the layer: --batch B --cin K --cout N --hw H W, all positive");
    return make_layer({.batch = o.batch,
                       .cin = o.cin,
                       .cout = o.cout,
                       .height = o.hw[0],
                       .width = o.hw[1],
                       .kernel_h = o.kernel_size[0],
                       .kernel_w = o.kernel_size[1],
                       .stride = o.stride,
                       .pad = o.pad,
                       .groups = o.groups});
}

void check_fits_host(const Layer& l) {
    const auto& s = l.shape;
    const auto [oh, ow] = conv2d_output_size(l.attrs, s);
    const double x = 1.0 * s.batch * s.c_in * s.height * s.width,
                 w = 1.0 * s.c_out * (s.c_in / l.attrs.groups) * l.attrs.kernel_h * l.attrs.kernel_w,
                 y = 1.0 * s.batch * s.c_out * oh * ow;
    // x and W twice (as generated, and in the run's layout), y as read back with its guard, and
    // its reference.
    const double bytes = 8.0 * (x + w) + 4.0 * y + 8.0 * y;
    const double memory = 1.0 * sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE);
    if (bytes > memory)
        throw UsageError(
            fmt::format("this layer's tensors and its float64 reference take {:.1f} GB of host memory; "
                        "this machine has {:.1f} GB: choose a smaller layer or batch",
                        bytes / 1e9, memory / 1e9));
}

namespace {

/// An integer field that fits an int (JSON numbers may be anything: floats, 2^64, negative).
int int_field(const nlohmann::json& layer, const char* name, std::optional<int> fallback = std::nullopt) {
    if (!layer.contains(name)) {
        if (fallback) return *fallback;
        throw UsageError(fmt::format("\"{}\" is missing", name));
    }
    const auto& v = layer.at(name);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > INT_MAX) ||
        (!v.is_number_unsigned() && (v.get<std::int64_t>() > INT_MAX || v.get<std::int64_t>() < INT_MIN)))
        throw UsageError(fmt::format("\"{}\" is {}: it must be a whole number that fits 32 bits", name, v.dump()));
    return v.get<int>();
}

/// Two integers, e.g. "hw": [56, 56].
std::pair<int, int> pair_field(const nlohmann::json& layer, const char* name,
                               std::optional<std::pair<int, int>> fallback) {
    if (!layer.contains(name)) {
        if (fallback) return *fallback;
        throw UsageError(fmt::format("\"{}\" is missing", name));
    }
    const auto& v = layer.at(name);
    if (!v.is_array() || v.size() != 2)
        throw UsageError(fmt::format("\"{}\" is {}: it takes two numbers, e.g. [56, 56]", name, v.dump()));
    const nlohmann::json pair{{"first", v[0]}, {"second", v[1]}};
    return {int_field(pair, "first"), int_field(pair, "second")};
}

}  // namespace

std::vector<Layer> parse_layers(std::string_view text, const std::string& source) {
    const auto example = R"(expected {"layers": [{"batch": 1, "cin": 64, "cout": 64, "hw": [56, 56]}, …]})";
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
        throw UsageError(fmt::format("{}: not valid JSON: {} ({})", source, e.what(), example));
    }
    if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
        throw UsageError(fmt::format("{}: no \"layers\" list ({})", source, example));
    // A misspelt key would otherwise be ignored and its default used: every key must be known.
    const auto only_known = [&](const nlohmann::json& object, std::initializer_list<std::string_view> known) {
        for (const auto& [key, value] : object.items())
            if (std::ranges::find(known, key) == known.end())
                throw UsageError(fmt::format("unknown key \"{}\": the keys are {}", key, fmt::join(known, ", ")));
    };
    try {
        only_known(j, {"layers"});
    } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", source, e.what()));
    }
    if (j["layers"].empty()) throw UsageError(fmt::format("{}: the \"layers\" list is empty", source));
    std::vector<Layer> layers;
    for (std::size_t i = 0; i < j["layers"].size(); ++i) {
        const auto& l = j["layers"][i];
        try {
            if (!l.is_object()) throw UsageError("it is not an object");
            only_known(l, {"batch", "cin", "cout", "hw", "kernel_size", "stride", "pad", "groups"});
            const auto [h, w] = pair_field(l, "hw", std::nullopt);
            const auto [kh, kw] = pair_field(l, "kernel_size", std::pair{1, 1});
            layers.push_back(make_layer({.batch = int_field(l, "batch"),
                                         .cin = int_field(l, "cin"),
                                         .cout = int_field(l, "cout"),
                                         .height = h,
                                         .width = w,
                                         .kernel_h = kh,
                                         .kernel_w = kw,
                                         .stride = int_field(l, "stride", 1),
                                         .pad = int_field(l, "pad", 0),
                                         .groups = int_field(l, "groups", 1)}));
        } catch (const UsageError& e) {
            throw UsageError(fmt::format("{}: layer {}: {}", source, i + 1, e.what()));
        }
    }
    return layers;
}

}  // namespace kjit::cli
