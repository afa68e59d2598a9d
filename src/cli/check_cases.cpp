// What kjit check runs when no layer is given: conv layers chosen to land on the kernels' edges,
// and the elementwise ops' shapes, each with its float64 reference.
#include "cli.hpp"

namespace kjit::cli {
namespace {

Layer conv(LayerSpec spec) { return make_layer(spec); }

}  // namespace

std::span<const CheckLayer> conv_check_layers() {
    static const std::vector<CheckLayer> layers = {
        {conv({.batch = 1, .cin = 64, .cout = 48, .height = 1, .width = 1}), "1x1, M = 1"},
        {conv({.batch = 3, .cin = 67, .cout = 45, .height = 7, .width = 9}),
         "1x1, prime batch; pixels, channels and K off every tile"},
        {conv({.batch = 2, .cin = 64, .cout = 96, .height = 8, .width = 8}), "1x1, TMA-eligible"},
        {conv({.batch = 2, .cin = 20, .cout = 30, .height = 9, .width = 9, .stride = 2}), "1x1, stride 2"},
        {conv({.batch = 2, .cin = 19, .cout = 37, .height = 11, .width = 13, .kernel_h = 3, .kernel_w = 3, .pad = 1}),
         "3x3, odd channels: no TMA"},
        {conv({.batch = 5,
               .cin = 32,
               .cout = 64,
               .height = 15,
               .width = 17,
               .kernel_h = 3,
               .kernel_w = 3,
               .stride = 2,
               .pad = 1}),
         "3x3 stride 2, prime batch, TMA-eligible"},
        {conv({.batch = 1, .cin = 200, .cout = 40, .height = 5, .width = 6, .kernel_h = 3, .kernel_w = 3, .pad = 1}),
         "3x3, deep K on a small image: split-K"},
        {conv({.batch = 2, .cin = 8, .cout = 12, .height = 9, .width = 10, .kernel_h = 5, .kernel_w = 5, .pad = 2}),
         "5x5"},
        {conv({.batch = 1,
               .cin = 3,
               .cout = 16,
               .height = 30,
               .width = 32,
               .kernel_h = 7,
               .kernel_w = 7,
               .stride = 2,
               .pad = 3}),
         "7x7 stride 2 stem, 3 input channels"},
        {conv({.batch = 3,
               .cin = 37,
               .cout = 37,
               .height = 13,
               .width = 7,
               .kernel_h = 3,
               .kernel_w = 3,
               .pad = 1,
               .groups = 37}),
         "depthwise 3x3, odd channels and image"},
        {conv({.batch = 2,
               .cin = 24,
               .cout = 48,
               .height = 15,
               .width = 15,
               .kernel_h = 3,
               .kernel_w = 3,
               .stride = 2,
               .pad = 1,
               .groups = 24}),
         "depthwise 3x3 stride 2, channel multiplier 2"},
        {conv({.batch = 1,
               .cin = 20,
               .cout = 20,
               .height = 9,
               .width = 11,
               .kernel_h = 7,
               .kernel_w = 7,
               .pad = 3,
               .groups = 20}),
         "depthwise 7x7"},
        {conv({.batch = 2,
               .cin = 32,
               .cout = 32,
               .height = 10,
               .width = 7,
               .kernel_h = 3,
               .kernel_w = 3,
               .pad = 1,
               .groups = 4}),
         "grouped 3x3, 8 channels a group"},
        {conv({.batch = 1,
               .cin = 256,
               .cout = 256,
               .height = 7,
               .width = 7,
               .kernel_h = 3,
               .kernel_w = 3,
               .pad = 1,
               .groups = 8}),
         "grouped 3x3, 32 channels a group (tensor cores)"},
    };
    return layers;
}

bool is_elementwise_family(std::string_view family) {
    return family == "add" || family == "cast" || family == "concat_channels" || family == "maxpool2d" ||
           family == "maxpool2d_chain" || family == "upsample_nearest2d";
}

namespace {

/// Refuses the layer options `family` would not use, rather than ignoring them: the pools take a
/// square --kernel-size (maxpool2d also --stride and --pad; the chain keeps the size, so stride 1
/// and padding kernel / 2 are implied), the others none, no family takes --groups, and only a
/// concat takes --cout (its second input's channels).
void check_elementwise_options(std::string_view family, const LayerOptions& given) {
    if (given.cout && family != "concat_channels")
        throw UsageError(fmt::format("{} takes no --cout: its output has its input's channels", family));
    const int k = given.kernel_size.at(0);
    const bool square = given.kernel_size.size() == 2 && given.kernel_size[1] == k;
    if (family == "maxpool2d") {
        if (!square || given.groups != 1)
            throw UsageError(
                "maxpool2d takes a square window (--kernel-size K K), --stride and --pad, and no --groups");
    } else if (family == "maxpool2d_chain") {
        if (!square || k % 2 == 0 || given.stride != 1 || (given.pad != 0 && given.pad != k / 2) || given.groups != 1)
            throw UsageError(
                "maxpool2d_chain takes an odd square window (--kernel-size K K) and no --stride, --pad or --groups: "
                "its pools keep the image's size (stride 1, padding K / 2)");
    } else if (given.window_given() || given.groups != 1) {
        throw UsageError(fmt::format("{} takes no --kernel-size, --stride, --pad or --groups", family));
    }
}

}  // namespace

std::vector<ElementwiseCase> elementwise_check_cases(std::string_view family, const LayerOptions& given) {
    using Inputs = std::span<const std::vector<float>>;
    check_elementwise_options(family, given);
    const auto nchw = [](int b, int c, int h, int w) {
        return Shape{std::size_t(b), std::size_t(c), std::size_t(h), std::size_t(w)};
    };
    // The built-in shapes: one element, sizes off the 256-thread block, several blocks a plane.
    std::vector<Shape> shapes{nchw(1, 1, 1, 1), nchw(3, 5, 7, 9), nchw(2, 64, 33, 33)};
    if (given.given()) {
        if (given.hw.size() != 2 || !given.cin)
            throw UsageError(fmt::format("give {}'s input: --batch B --cin C --hw H W", family));
        shapes = {nchw(given.batch, given.cin, given.hw[0], given.hw[1])};
    }
    const auto name = [&](const Shape& s, std::string_view what = {}) {
        return fmt::format("{}{} on [{}]", family, what, fmt::join(s, ","));
    };
    std::vector<ElementwiseCase> cases;
    for (const Shape& s : shapes) {
        if (family == "add") {
            // fp32 addition rounds once: within 2^-24 of the exact sum, element by element.
            cases.push_back({name(s),
                             std::make_shared<AddOp>(),
                             {s, s},
                             [](Inputs in) { return add_reference(in[0], in[1]); },
                             1e-7});
        } else if (family == "cast") {
            // Every pair of types; rounded to nearest even, bit for bit the host's conversion.
            constexpr Scalar types[] = {Scalar::f32, Scalar::f16, Scalar::bf16};
            for (const Scalar from : types)
                for (const Scalar to : types) {
                    if (from == to) continue;
                    const auto rounded = [to](Inputs in) {
                        std::vector<double> r(in[0].size());
                        std::ranges::transform(in[0], r.begin(), [to](float x) {
                            return to == Scalar::f32 ? x : from_16bit(to_16bit(x, to), to);
                        });
                        return r;
                    };
                    cases.push_back({name(s, fmt::format(" {} to {}", short_name(from), short_name(to))),
                                     std::make_shared<CastOp>(from, to),
                                     {s},
                                     rounded,
                                     0,
                                     from,
                                     to});
                }
        } else if (family == "concat_channels") {
            std::vector<Shape> parts{s, s};
            parts[1][1] = given.given() ? std::size_t(std::max(1, given.cout)) : s[1] + 2;
            if (!given.given()) parts.push_back(nchw(int(s[0]), 1, int(s[2]), int(s[3])));
            cases.push_back({name(s, fmt::format(" of {} inputs", parts.size())),
                             std::make_shared<ConcatChannelsOp>(parts.size()), parts,
                             [parts](Inputs in) { return concat_channels_reference(in, parts); }, 0});
        } else if (family == "maxpool2d") {
            // A window given alone runs on the built-in shapes.
            std::vector<std::array<int, 3>> windows{{5, 1, 2}, {2, 2, 0}, {3, 2, 1}};
            if (given.given() || given.window_given()) windows = {{given.kernel_size[0], given.stride, given.pad}};
            for (const auto [k, stride, pad] : windows) {
                const auto padded = [&](std::size_t side) { return side + 2 * std::size_t(pad); };
                if (!given.given() && (padded(s[2]) < std::size_t(k) || padded(s[3]) < std::size_t(k)))
                    continue;  // a built-in image smaller than this window
                cases.push_back(
                    {name(s, fmt::format(" {}x{} s{} p{}", k, k, stride, pad)),
                     std::make_shared<MaxPool2dOp>(k, stride, pad),
                     {s},
                     [s, k, stride, pad](Inputs in) { return maxpool2d_reference(in[0], s, k, stride, pad); },
                     0});
            }
        } else if (family == "maxpool2d_chain") {
            // SPPF's 5x5 and a 3x3, each repeated up to the kernel's limit; --kernel-size picks the window.
            std::vector<int> windows{5, 3};
            if (given.given() || given.window_given()) windows = {given.kernel_size[0]};
            for (const int k : windows)
                for (int repeats = 2; repeats <= MaxPool2dChainOp::max_repeats; ++repeats)
                    cases.push_back(
                        {name(s, fmt::format(" {}x{} x{}", k, k, repeats)),
                         std::make_shared<MaxPool2dChainOp>(k, repeats),
                         {s},
                         [s, k, repeats](Inputs in) { return maxpool2d_chain_reference(in[0], s, k, repeats); },
                         0});
        } else {
            for (const int f : {2, 3})
                cases.push_back({name(s, fmt::format(" x{}", f)),
                                 std::make_shared<UpsampleNearest2dOp>(f),
                                 {s},
                                 [s, f](Inputs in) { return upsample_nearest2d_reference(in[0], s, f); },
                                 0});
        }
    }
    return cases;
}

}  // namespace kjit::cli
