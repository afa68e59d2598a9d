// Times the conv kernels on ResNet-50's layers and every distinct conv of examples/yolov8n, at
// batch 1, 8 and 32: every valid configuration per shape (the best is reported, and the dispatch
// heuristic's choice beside it), each as one call per CUDA-graph replay; dispatch's choice also
// back to back (20 calls in one graph, replay time / 20: what a layer costs inside a network).
// One JSON object per line. With --nhwc, the channels-last Hopper op (Conv2dBnSiluNhwcTmaForward)
// on the same layers with NHWC tensors instead: every candidate (conv2d_bn_silu_nhwc_candidates),
// and its dispatch pick (dispatch_conv2d_bn_silu_nhwc) also back to back. With --grouped, the
// depthwise layers of MobileNetV2 and ConvNeXt-T and the grouped ones of ResNeXt-50 instead.
//   kjit_conv_bench [--quick] [--nhwc | --grouped] [--layer TEXT] [--batch N] [--config TEXT]
// --layer/--config keep only layers / configurations ("BLOCK_M=128 BLOCK_N=64") containing TEXT.
#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <kjit/kjit.hpp>

using namespace kjit;

namespace {

struct Layer {
    const char* name;
    Conv2dAttrs attrs;
    int c_in, c_out, hw;
};

// ResNet-50's 1x1 convolutions (bottleneck reduce/expand) and its 3x3 ones.
const Layer pointwise[] = {
    {"1x1 256->64 @56", {}, 256, 64, 56},     {"1x1 64->256 @56", {}, 64, 256, 56},
    {"1x1 512->128 @28", {}, 512, 128, 28},   {"1x1 128->512 @28", {}, 128, 512, 28},
    {"1x1 1024->256 @14", {}, 1024, 256, 14}, {"1x1 256->1024 @14", {}, 256, 1024, 14},
    {"1x1 2048->512 @7", {}, 2048, 512, 7},   {"1x1 512->2048 @7", {}, 512, 2048, 7},
};
constexpr Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
constexpr Conv2dAttrs k3s2{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
const Layer three_by_three[] = {
    {"3x3 64->64 @56", k3, 64, 64, 56},          {"3x3 128->128 @28", k3, 128, 128, 28},
    {"3x3 256->256 @14", k3, 256, 256, 14},      {"3x3 512->512 @7", k3, 512, 512, 7},
    {"3x3 s2 128->128 @56", k3s2, 128, 128, 56}, {"3x3 s2 256->256 @28", k3s2, 256, 256, 28},
    {"3x3 s2 512->512 @14", k3s2, 512, 512, 14},
};
// Every distinct conv of examples/yolov8n (input 320).
const Layer yolo[] = {
    {"yolo 1x1 32->16 @80", {}, 32, 16, 80},          {"yolo 1x1 48->32 @80", {}, 48, 32, 80},
    {"yolo 1x1 64->32 @40", {}, 64, 32, 40},          {"yolo 1x1 96->64 @40", {}, 96, 64, 40},
    {"yolo 1x1 128->64 @40", {}, 128, 64, 40},        {"yolo 1x1 192->32 @40", {}, 192, 32, 40},
    {"yolo 1x1 128->64 @20", {}, 128, 64, 20},        {"yolo 1x1 192->128 @20", {}, 192, 128, 20},
    {"yolo 1x1 256->128 @20", {}, 256, 128, 20},      {"yolo 1x1 384->64 @20", {}, 384, 64, 20},
    {"yolo 1x1 256->128 @10", {}, 256, 128, 10},      {"yolo 1x1 384->256 @10", {}, 384, 256, 10},
    {"yolo 1x1 512->256 @10", {}, 512, 256, 10},      {"yolo 3x3 s2 3->16 @320", k3s2, 3, 16, 320},
    {"yolo 3x3 s2 16->32 @160", k3s2, 16, 32, 160},   {"yolo 3x3 16->16 @80", k3, 16, 16, 80},
    {"yolo 3x3 s2 32->64 @80", k3s2, 32, 64, 80},     {"yolo 3x3 32->32 @40", k3, 32, 32, 40},
    {"yolo 3x3 s2 64->128 @40", k3s2, 64, 128, 40},   {"yolo 3x3 64->64 @20", k3, 64, 64, 20},
    {"yolo 3x3 s2 128->256 @20", k3s2, 128, 256, 20}, {"yolo 3x3 128->128 @10", k3, 128, 128, 10},
};

/// Depthwise (groups = C_IN = C_OUT) and grouped convolutions, at 224² input.
constexpr Conv2dAttrs dw(int k, int stride, int channels) {
    return {.kernel_h = k,
            .kernel_w = k,
            .stride_h = stride,
            .stride_w = stride,
            .pad_h = k / 2,
            .pad_w = k / 2,
            .groups = channels};
}
const Layer grouped[] = {
    // MobileNetV2's depthwise 3x3 layers.
    {"dw 3x3 32 @112", dw(3, 1, 32), 32, 32, 112},
    {"dw 3x3 s2 96 @112", dw(3, 2, 96), 96, 96, 112},
    {"dw 3x3 144 @56", dw(3, 1, 144), 144, 144, 56},
    {"dw 3x3 s2 144 @56", dw(3, 2, 144), 144, 144, 56},
    {"dw 3x3 192 @28", dw(3, 1, 192), 192, 192, 28},
    {"dw 3x3 s2 192 @28", dw(3, 2, 192), 192, 192, 28},
    {"dw 3x3 384 @14", dw(3, 1, 384), 384, 384, 14},
    {"dw 3x3 576 @14", dw(3, 1, 576), 576, 576, 14},
    {"dw 3x3 s2 576 @14", dw(3, 2, 576), 576, 576, 14},
    {"dw 3x3 960 @7", dw(3, 1, 960), 960, 960, 7},
    // ConvNeXt-T's depthwise 7x7 layers.
    {"dw 7x7 96 @56", dw(7, 1, 96), 96, 96, 56},
    {"dw 7x7 192 @28", dw(7, 1, 192), 192, 192, 28},
    {"dw 7x7 384 @14", dw(7, 1, 384), 384, 384, 14},
    {"dw 7x7 768 @7", dw(7, 1, 768), 768, 768, 7},
    // ResNeXt-50 (32x4d)'s grouped 3x3 layers: 32 groups of 4 to 32 channels.
    {"g32 3x3 128 @56", dw(3, 1, 32), 128, 128, 56},
    {"g32 3x3 s2 256 @56", dw(3, 2, 32), 256, 256, 56},
    {"g32 3x3 256 @28", dw(3, 1, 32), 256, 256, 28},
    {"g32 3x3 s2 512 @28", dw(3, 2, 32), 512, 512, 28},
    {"g32 3x3 512 @14", dw(3, 1, 32), 512, 512, 14},
    {"g32 3x3 s2 1024 @14", dw(3, 2, 32), 1024, 1024, 14},
    {"g32 3x3 1024 @7", dw(3, 1, 32), 1024, 1024, 7},
};

struct Buffers {
    DeviceBuffer x, w, scale, shift, y;
};

Buffers make_buffers(const Device& device, const Conv2dAttrs& a, const Conv2dShape& s) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> d(-1, 1);
    auto random = [&](std::size_t n) {
        std::vector<float> v(n);
        for (auto& e : v) e = d(rng);
        DeviceBuffer b(device, n * sizeof(float));
        b.upload(std::span<const float>(v));
        return b;
    };
    const std::size_t wn = 1ULL * s.c_out * s.c_in / a.groups * a.kernel_h * a.kernel_w;
    return {random(1ULL * s.batch * s.c_in * s.height * s.width), random(wn), random(s.c_out), random(s.c_out),
            random(1ULL * s.batch * s.c_out * oh * ow)};
}

/// Median µs of one forward: captured once into a CUDA graph, each replay timed with events
/// (the PyTorch side does the same), so host-side launch cost stays out of kernel time.
/// Median µs per call: `calls` forwards captured into one CUDA graph, each replay timed with
/// events and divided by `calls`.
/// The layouts a layer is timed in: NCHW (the dispatch ops) or NHWC (the channels-last op).
enum class Layout { nchw, nhwc };

double time_op(const RuntimeOp& op, const Stream& stream, Buffers& b, const Conv2dAttrs& a, const Conv2dShape& s,
               int iterations, int calls = 1, Layout layout = Layout::nchw) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    const auto n = [](int v) { return static_cast<std::size_t>(v); };
    const bool nhwc = layout == Layout::nhwc;
    const Shape xs = nhwc ? Shape{n(s.batch), n(s.height), n(s.width), n(s.c_in)}
                          : Shape{n(s.batch), n(s.c_in), n(s.height), n(s.width)};
    const Shape ys = nhwc ? Shape{n(s.batch), n(oh), n(ow), n(s.c_out)} : Shape{n(s.batch), n(s.c_out), n(oh), n(ow)};
    const Tensor inputs[] = {{b.x.as<float>(), xs}};
    void* const params[] = {b.w.as<float>(), b.scale.as<float>(), b.shift.as<float>()};
    const int row = nhwc ? s.c_out : oh * ow;
    auto once = [&] { op.forward(Runtime::global(), stream, {inputs, params, b.y.as<float>(), ys, row}); };
    for (int i = 0; i < 3; ++i) once();  // compile/load and warm up
    const Graph graph = Graph::capture(stream, [&] {
        for (int i = 0; i < calls; ++i) once();
    });
    for (int i = 0; i < 3; ++i) graph.launch(stream);
    std::vector<Event> starts, stops;
    for (int i = 0; i < iterations; ++i) starts.emplace_back(stream.device()), stops.emplace_back(stream.device());
    for (int i = 0; i < iterations; ++i) {
        starts[i].record(stream);
        graph.launch(stream);
        stops[i].record(stream);
    }
    stream.synchronize();
    std::vector<double> us;
    for (int i = 0; i < iterations; ++i) us.push_back(1000.0 * Event::elapsed_ms(starts[i], stops[i]) / calls);
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
}

/// Compiles every launch's kernel of `ops` for `device` on all cores, so that timing them does
/// not wait on one NVRTC compile after another.
void compile_all(const std::vector<std::unique_ptr<Conv2dOp>>& ops, const Device& device) {
    std::vector<const Kernel*> kernels;
    for (const auto& op : ops)
        for (std::size_t i = 0; i < op->n_launches(); ++i) kernels.push_back(&op->kernel_for_launch(i));
    Runtime::global().compile_all(kernels, device.arch());
}

std::string tiles_text(const Sm90Tiles& t) {
    return fmt::format("{}x{} s{}{}", t.block_m, t.block_n, t.stages,
                       t.split_k > 1 ? fmt::format(" split {}", t.split_k) : "");
}

/// One layer on the channels-last op: every candidate, and its dispatch pick, one call per replay
/// and back to back.
void bench_nhwc(const char* name, const Conv2dAttrs& a, const Conv2dShape& s, const Device& device,
                const Stream& stream, const DeviceTraits& traits, int iterations, const std::string& only_config) {
    if (const auto why = conv2d_nhwc_tma_unsupported_reason(a, s, traits); !why.empty()) {
        std::fprintf(stderr, "kjit_conv_bench: %s at batch %d: %s\n", name, s.batch, why.c_str());
        return;
    }
    Buffers b = make_buffers(device, a, s);  // the same sizes in either layout
    std::vector<std::unique_ptr<Conv2dOp>> ops;
    for (const Sm90Tiles& t : conv2d_bn_silu_nhwc_candidates(a, s, traits))
        if (tiles_text(t).find(only_config) != std::string::npos)
            ops.push_back(std::make_unique<Conv2dBnSiluNhwcTmaForward>(t, a, traits));
    compile_all(ops, device);
    double best = 1e30;
    std::size_t best_i = 0;
    std::string timed;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const double us = time_op(*ops[i], stream, b, a, s, iterations, 1, Layout::nhwc);
        if (us < best) best = us, best_i = i;
        const auto& t = static_cast<const Conv2dBnSiluNhwcTmaForward&>(*ops[i]).tiles();
        timed += fmt::format("{}\"{}\": {:.3f}", timed.empty() ? "" : ", ", tiles_text(t), us);
    }
    const double b2b = time_op(*ops[best_i], stream, b, a, s, iterations, 20, Layout::nhwc);
    const auto& t = static_cast<const Conv2dBnSiluNhwcTmaForward&>(*ops[best_i]).tiles();
    const auto chosen = dispatch_conv2d_bn_silu_nhwc(a, s, traits);
    const double chosen_us = time_op(*chosen, stream, b, a, s, iterations, 1, Layout::nhwc);
    const double chosen_b2b = time_op(*chosen, stream, b, a, s, iterations, 20, Layout::nhwc);
    std::printf(
        "{\"layout\": \"nhwc\", \"layer\": \"%s\", \"batch\": %d, \"c_in\": %d, \"c_out\": %d, \"hw\": %d, "
        "\"out_hw\": %d, \"kernel\": %d, \"stride\": %d, \"best_us\": %.3f, \"best\": \"%s\", \"best_b2b_us\": %.3f, "
        "\"dispatch_us\": %.3f, \"dispatch\": \"%s\", \"dispatch_b2b_us\": %.3f, \"candidates\": {%s}}\n",
        name, s.batch, s.c_in, s.c_out, s.height, conv2d_output_size(a, s).first, a.kernel_h, a.stride_h, best,
        tiles_text(t).c_str(), b2b, chosen_us, tiles_text(chosen->tiles()).c_str(), chosen_b2b, timed.c_str());
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) try {
    bool quick = false, nhwc = false, grouped_only = false;
    std::string only_layer, only_config;
    int only_batch = 0;
    const option options[] = {{"quick", no_argument, nullptr, 'q'},
                              {"nhwc", no_argument, nullptr, 'n'},
                              {"grouped", no_argument, nullptr, 'g'},
                              {"layer", required_argument, nullptr, 'l'},
                              {"batch", required_argument, nullptr, 'b'},
                              {"config", required_argument, nullptr, 'c'},
                              {nullptr, 0, nullptr, 0}};
    for (int opt; (opt = getopt_long(argc, argv, "", options, nullptr)) != -1;) {
        switch (opt) {
            case 'q': quick = true; break;
            case 'n': nhwc = true; break;
            case 'g': grouped_only = true; break;
            case 'l': only_layer = optarg; break;
            case 'b': only_batch = std::atoi(optarg); break;
            case 'c': only_config = optarg; break;
            default:
                std::fprintf(stderr,
                             "usage: %s [--quick] [--nhwc | --grouped] [--layer TEXT] [--batch N] [--config TEXT]\n",
                             argv[0]);
                return 2;
        }
    }
    if (nhwc && grouped_only) {
        std::fprintf(stderr, "kjit_conv_bench: --nhwc and --grouped: the channels-last op takes ungrouped layers\n");
        return 2;
    }
    const auto device = Device::get(0);
    Stream stream(device);
    const auto traits = DeviceTraits::of(device);
    const int iterations = quick ? 20 : 100;
    std::printf("{\"context\": {\"device\": \"%s\", \"arch\": \"%s\", \"nvrtc\": \"%s\"}}\n", device.name().c_str(),
                device.arch().name().c_str(), nvrtc_version().c_str());
    const std::vector<std::span<const Layer>> groups = grouped_only ? std::vector<std::span<const Layer>>{grouped}
                                                                    : std::vector<std::span<const Layer>>{
                                                                          pointwise, three_by_three, yolo};
    for (const std::span<const Layer> group : groups) {
        for (const Layer& l : group)
            for (int batch : {1, 8, 32}) {
                if (std::string(l.name).find(only_layer) == std::string::npos) continue;
                if (only_batch && batch != only_batch) continue;
                const Conv2dShape s{batch, l.c_in, l.hw, l.hw, l.c_out};
                if (nhwc) {
                    bench_nhwc(l.name, l.attrs, s, device, stream, traits, iterations, only_config);
                    continue;
                }
                Buffers b = make_buffers(device, l.attrs, s);
                double best = 1e30;
                std::string best_id, timed;  // every candidate's time: what the dispatch cost model is fitted to
                // The same candidates `kjit tune` times.
                std::vector<std::string> configs;
                std::vector<std::unique_ptr<Conv2dOp>> ops;
                for (const auto& config : conv2d_bn_silu_candidates(l.attrs, s, traits))
                    if (config.find(only_config) != std::string::npos) {
                        configs.push_back(config);
                        ops.push_back(make_conv2d_bn_silu(l.attrs, s, config, traits));
                    }
                compile_all(ops, device);
                for (std::size_t i = 0; i < ops.size(); ++i) {
                    const double us = time_op(*ops[i], stream, b, l.attrs, s, iterations);
                    if (us < best) best = us, best_id = configs[i];
                    timed += fmt::format("{}\"{}\": {:.3f}", timed.empty() ? "" : ", ", configs[i], us);
                }
                const auto chosen = dispatch_conv2d_bn_silu(l.attrs, s, traits);
                const double chosen_us = time_op(*chosen, stream, b, l.attrs, s, iterations);
                constexpr int back_to_back = 20;
                const double chosen_b2b_us = time_op(*chosen, stream, b, l.attrs, s, iterations, back_to_back);
                const int oh = conv2d_output_size(l.attrs, s).first;
                std::printf(
                    "{\"layer\": \"%s\", \"batch\": %d, \"c_in\": %d, \"c_out\": %d, \"hw\": %d, \"out_hw\": %d, "
                    "\"kernel\": %d, \"stride\": %d, \"groups\": %d, \"best_us\": %.3f, \"best\": \"%s\", "
                    "\"dispatch_us\": %.3f, \"dispatch\": \"%s\", \"dispatch_b2b_us\": %.3f, \"candidates\": {%s}}\n",
                    l.name, batch, l.c_in, l.c_out, l.hw, oh, l.attrs.kernel_h, l.attrs.stride_h, l.attrs.groups, best,
                    best_id.c_str(), chosen_us, conv2d_bn_silu_config(*chosen).c_str(), chosen_b2b_us, timed.c_str());
                std::fflush(stdout);
            }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_conv_bench: %s\n", e.what());
    return 1;
}
