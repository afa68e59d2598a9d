// Dispatch: which conv kernel and tiles a layer gets on a device — a tuned winner when the cache
// holds one, else a cost model of the tensor-core GEMM, or the direct kernel's rule.
#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <kjit/conv.hpp>
#include <kjit/tuning.hpp>

#include "jit/log.hpp"
#include "kjit/ceil_div.cuh"
#include "kjit/gemm_geometry.cuh"
#include "ops/conv/gemm_forward.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

namespace {

// The cost models estimate clocks on one multiprocessor. Their constants were fitted to every
// candidate's time over the 111 layer × batch rows of kjit_conv_bench on an H200
// (docs/BENCHMARKS.md): the pick is within 1.15× of the best candidate on most rows.

/// What launching in clusters costs (split-K): clusters launch plainly, without the dependent
/// launch that lets a kernel's start overlap the one before — up to ~1 µs more back to back
/// (yolo 1x1 256->128 @10 b1 on the H200: 4.7 → 5.8 µs), which the fit's one-call times do not
/// show; charged in part.
constexpr double clustered_launch = 600.0;

/// Split-K's reduction: one block of a cluster sums the other blocks' partial tiles, at ~16 bytes
/// a clock (both GEMM models charge it).
double partial_tiles_summed(int block_m, int block_n, int split_k) {
    return (split_k - 1) * block_m * block_n * 4.0 / 16.0;
}

/// The sm80 GEMM: the larger of two bounds. Latency — the waves of co-resident blocks, each a
/// chain of K tiles whose step costs at least a memory round trip, its warps' MMAs or its
/// threads' copies, plus a fixed start and, with split-K, the cluster reduction (a 7x7 stem's
/// 128x64 tiles split 4 took 1.7x their unsplit time on the H200, 2026-12-05). Throughput —
/// the multiprocessor's share of the blocks' tensor-core work, operand traffic and fragment
/// reads. An implicit GEMM gathers X with 4-byte copies: its X traffic counts double. A grouped
/// layer runs every group's GEMM (p × n × k each) in one grid, so its blocks fill the waves
/// together.
double gemm_cost(const GemmTiles& t, int split_k, long long p, int n, int k, int groups, bool gathers,
                 const DeviceTraits& device) {
    const double gather = gathers ? 2.0 : 1.0;
    const int warps_m = t.block_m / 32, warps_n = t.block_n >= 64 ? 2 : 1, warps = warps_m * warps_n;
    const long long blocks = ceil_div<long long>(p, t.block_m) * ceil_div(n, t.block_n) * split_k * groups;
    const long long resident = std::clamp<long long>(
        std::min<long long>(device.max_shared_bytes / std::max(1u, t.shared_bytes(split_k)), 2048 / t.threads()), 1,
        32);
    const long long waves = ceil_div<long long>(blocks, resident * device.multiprocessors);
    const int k_per_block = ceil_div(k, split_k);
    const double mmas_per_warp = 1.0 * t.block_m * t.block_n * t.block_k / (warps * 1024.0);
    const double copies_per_thread = (t.block_m * t.block_k * gather + t.block_n * t.block_k) / t.threads() / 4.0;
    const double step = std::max({200.0, 16.0 * mmas_per_warp, 32.0 * copies_per_thread});
    const double reduction = split_k > 1 ? 500.0 * split_k + partial_tiles_summed(t.block_m, t.block_n, split_k) : 0.0;
    const double latency = waves * (ceil_div(k_per_block, t.block_k) * step + 1000.0 + reduction);
    const double math = t.block_m * t.block_n / 256.0;
    const double traffic = (t.block_n + t.block_m * gather) * 4.0 / 32.0;
    const double fragments = warps * (32.0 + t.block_n / warps_n) * 4.0 / 64.0;
    const double throughput = static_cast<double>(ceil_div<long long>(blocks, device.multiprocessors)) * k_per_block *
                              std::max({math, traffic, fragments});
    return std::max(latency, throughput) + (split_k > 1 ? clustered_launch : 0.0);
}

/// Clusters of `size` blocks that run at once at one block per multiprocessor (every Hopper
/// kernel's shared memory allows only one). A cluster's blocks share a GPC, and GPCs hold
/// unequal numbers of SMs, so sizes of 4 and 8 leave SMs over: on the H200 (132 SMs) 30
/// clusters of 4 ran in one wave and 32 in two (1.3–1.7× the time of half the split on the same
/// tiles), 14 of 8 in one and 16 in two; 64 of 2 in one (2026-12-02 bench, every candidate).
long long clusters_at_once(int sms, int size) {
    return size == 1 ? sms : size == 2 ? sms / 2 : std::max(1, sms / size - 2);
}

/// The Hopper GEMM, in the same units: a persistent block's tiles, each the larger of its
/// consumers' work and operand traffic (or its K steps' latency) over its share of K, plus the
/// epilogue's store and a start — and with split-K, block 0's reading of the other blocks' partial
/// tiles through distributed shared memory; a split-K grid runs in waves of the clusters that fit
/// at once. A consumer's work per k is its wgmma (∝ BLOCK_N) and its A fragments, read from
/// shared memory whatever BLOCK_N is (`a_fragments` channels' worth: the implicit GEMM finds each
/// element in its patch), weighted up where a block has one consumer (nothing overlaps its reads)
/// and down where it has four (more warps hide them). Its pipeline hides latency the sm80 model
/// charges, hence the weight against that model (start and weight refitted to the 2026-12-02 H200
/// run of the landed kernels; the lone consumer's weight to that day's run of every candidate
/// with 32-channel tiles, 111 bench rows; the hand-over's costs to an earlier run with split-K). A kernel that gathers X is bound by its
/// producer's 4-byte copies, `gathered` clocks per k and pixel whatever BLOCK_N is (a gathering
/// tile of 128 pixels took 59–65 µs over K = 1152 at every BLOCK_N, twice one of 64, H200,
/// 2026-12-03). The A fragments' cost, the gathering and the four consumers' were refitted to the
/// run of every candidate after the TMA producers' box corners left the K loop (2026-12-03,
/// twelfth session: the implicit GEMM's tap boxes 10-35% faster; its 256-pixel tiles now win
/// some rows).
/// What a Hopper kernel's K step costs beyond its wgmma, per pixel or channel row of the tile:
/// X's and W's traffic (weights against the model's bytes per clock: rows that mostly hit L2
/// weigh less), the A fragments a consumer reads (`a_fragments` channels' worth), and the
/// gathering producer's copies (`gathered` clocks per pixel).
struct Sm90StepCost {
    double x_weight = 1.0, w_weight = 1.0, a_fragments = 0.0, gathered = 0.0;
};

double tma_gemm_cost(const Sm90Tiles& t, long long boxes, int n, int k, int sms, const Sm90StepCost& step) {
    const long long tiles = Sm90Geometry{t.block_m, t.block_n, t.stages}.column_tiles(boxes) * ceil_div(n, t.block_n);
    const double per_sm = static_cast<double>(ceil_div<long long>(tiles, clusters_at_once(sms, t.split_k)));
    const int k_share = ceil_div(ceil_div(k, 32), t.split_k) * 32;
    const double consumers = t.block_m == 64 ? 1.3 : t.block_m == 256 ? 0.9 : 1.0;
    const double math = consumers * t.block_m * (t.block_n + step.a_fragments) / 1024.0,
                 traffic = (t.block_m * step.x_weight + t.block_n * step.w_weight) * 4.0 / 24.0;
    // The epilogue computes and stages only the channel groups below N (epilogue_sm90.cuh).
    const double store = t.block_m * std::min(t.block_n, ceil_div(n, 8) * 8) * 4.0 / 32.0;
    // Block 0 reads each other block's partial tile at ~16 bytes a clock, after a hand-over's latency.
    const double reduction = partial_tiles_summed(t.block_m, t.block_n, t.split_k) + (t.split_k - 1) * 1500.0;
    constexpr double start = 1100.0, weight = 0.21;
    const double work = k_share * std::max({math, traffic, step.gathered * t.block_m}) + store + reduction + start;
    const double latency = ceil_div(k_share, 32) * 100.0 + reduction + start;
    return weight * per_sm * std::max(work, latency) + (t.split_k > 1 ? clustered_launch : 0.0);
}

struct GemmPick {
    GemmTiles tiles;
    int split_k;
    double cost;
};

/// The sm80 tiles and split-K with the lowest gemm_cost; none when no configuration fits.
std::optional<GemmPick> best_sm80(const Conv2dAttrs& a, const Conv2dShape& s, int oh, int ow,
                                  const DeviceTraits& device) {
    const int cout_pg = s.c_out / a.groups, k = s.c_in / a.groups * a.kernel_h * a.kernel_w;
    const long long p = 1LL * s.batch * oh * ow;
    std::optional<GemmPick> best;
    for (const auto& t : GemmTiles::configurations())
        for (int split : {1, 2, 4, 8}) {
            // Every group's tiles share the grid: split K only where all of them leave SMs idle.
            if (!detail::worth_splitting(t, split, p * a.groups, cout_pg, k, device)) continue;
            if (t.shared_bytes(split) > static_cast<unsigned>(device.max_shared_bytes)) continue;
            const double cost = gemm_cost(t, split, p, cout_pg, k, a.groups, !detail::is_pointwise(a), device);
            if (!best || cost < best->cost) best = GemmPick{t, split, cost};
        }
    return best;
}

struct TmaPick {
    Sm90Tiles tiles;
    double cost;
    bool gathers;
};

/// The Hopper kernels' cheapest tiles and split-K for a layer (each with the deepest pipeline
/// that fits beside the implicit GEMM's tap table), over the kernel whose X and Y TMA boxes and
/// the one that gathers X, where each takes the layer — or none, `why_not` saying why. Where TMA
/// cannot box the layer `why_not` says why, a pick or not.
std::optional<TmaPick> best_tma(const Conv2dAttrs& a, const Conv2dShape& s, const DeviceTraits& device,
                                std::string& why_not) {
    why_not = conv2d_tma_unsupported_reason(a, s, device);
    const std::string why_not_gather = conv2d_gather_unsupported_reason(a, s, device);
    const int k = s.c_in / a.groups * a.kernel_h * a.kernel_w;  // a group's
    std::optional<TmaPick> best;
    for (const bool gathers : {false, true}) {
        if (!(gathers ? why_not_gather : why_not).empty()) continue;
        // The implicit GEMM's X boxes cost more than the 1×1 kernel's: patches wider than their
        // 32 pixels, reads masked at the padding — whole flattened rows more so. Whole-image
        // boxes (1×1 layers of small images) are rows of 8 floats, 64 images' worth whatever the
        // batch: twice their bytes (a 1280->1000 classifier at batch 1-24 took ~0.55 us a K step
        // at 64x32 and 64x64 tiles alike, H200 2026-12-05; any weight from 1.8 to 2.3 leaves the
        // same rows over 1.15x in every replayed run). Gathered X costs its producer's copies
        // instead. Fitted on the H200 bench rows like the rest.
        const bool pointwise = detail::is_pointwise(a) && !gathers;
        const Sm90StepCost step{.x_weight = pointwise && detail::image_box(a, s) ? 2.0
                                            : gathers || pointwise               ? 1.0
                                            : s.width % 4                        ? 1.5
                                                                                 : 1.25,
                                .a_fragments = pointwise ? 64.0 : 300.0,
                                .gathered = gathers ? 1.0 : 0.0};
        const long long boxes = detail::sm90_boxes(a, s, gathers);
        for (const auto& t : detail::sm90_split_candidates(a, s, device, gathers)) {
            const double cost = tma_gemm_cost(t, boxes, s.c_out, k, device.multiprocessors, step);
            // Equal costs (traffic-bound tiles of the same BLOCK_M + BLOCK_N): the wider wgmma,
            // whose A fragments serve more channels (1x1 512->2048 @7 b8 on the H200, 2026-12-03:
            // 64x128 14.3 us, 128x64 16.7).
            if (!best || cost < best->cost || (cost == best->cost && t.block_n > best->tiles.block_n))
                best = TmaPick{t, cost, gathers};
        }
    }
    if (!best && why_not.empty()) why_not = "no TMA pipeline of 3 stages fits this device's shared memory";
    if (!best && !why_not_gather.empty() && why_not != why_not_gather) why_not += "; " + why_not_gather;
    return best;
}

/// The depthwise kernel takes depthwise layers and groups of up to 16 input channels, each
/// output summing its group's planes: measured on the H200 (2026-12-04, ResNeXt-50's 3×3 layers
/// of 32 groups), 1.3–6.3× faster than the implicit GEMM's best tile on groups of 4 and 8
/// channels; on groups of 16, 1.12–1.33× faster on three of the six rows (batch 8, and 512 @14
/// at 32) and 1.09–1.21× slower on the other three; on 32 the GEMM is 1.5–2× faster.
bool depthwise_kernel_layer(const Conv2dAttrs& a, const Conv2dShape& s) {
    return is_depthwise(a, s) || (a.groups > 1 && s.c_in / a.groups <= 16);
}

/// Tensor cores pay when each group's GEMM is at least one MMA step deep (K ≥ 16) and a few
/// channels wide: measured on the H200 (2026-12-04, ResNeXt-50's 3×3 layers of 32 groups), the
/// implicit GEMM's 16-wide tiles ran groups of 4 and 8 output channels 1.04–5× faster than the
/// direct kernel's best tile, though they leave most of each MMA idle.
bool tensor_core_layer(const Conv2dAttrs& a, const Conv2dShape& s) {
    const int cin_pg = s.c_in / a.groups, cout_pg = s.c_out / a.groups;
    return detail::is_pointwise(a) || (cin_pg * a.kernel_h * a.kernel_w >= 16 && cout_pg >= 4 &&
                                       a.kernel_h * a.kernel_w <= 64 && a.stride_h == a.stride_w && a.pad_h == a.pad_w);
}

/// The depthwise tiles with the least estimated time, in clocks of one SM. Each SM runs its share
/// of the blocks: per block, bringing in its input window (halo and padding included: staged, a
/// 16-byte copy two clocks and narrower ones more; unstaged, into L1 at a quarter of that) and
/// computing every output of its tile, those past the image too: the filter's FMAs (128 a
/// clock), its input rows' loads (staged, a warp's 16-byte shared loads in 4 clocks; unstaged, a
/// 4-byte L1 load a clock for each element a step's rows span) and the store. The blocks that run
/// at once (as many as the threads and shared memory allow) go in rounds, each a memory round
/// trip plus its threads' chains of FMAs (~32 clocks a tap of each output a thread computes):
/// fewer outputs a thread, more threads to hide the latency. Nothing is faster than the card's
/// bandwidth: x and y once, ~4 floats a clock per SM — of the SMs the grid fills. A narrow
/// group's output reads group.in planes. The time is the largest of the floor, the rounds, and
/// the work with a quarter of the rounds beside it: more rows a step means less work but fewer
/// warps to hide the rounds' latency (dw 3x3 s2 192 @28 b32: 4-row steps 1.34x the best tile
/// while the work alone decided). Fitted to H200 runs of every tile on the 28 depthwise and the
/// ResNeXt bench rows (2026-12-04, docs/BENCHMARKS.md); the quarter replayed on the ten runs of
/// grouped and narrow candidates in docs/bench-data: as many rows over 1.15x or fewer on each. (It
/// preferred unstaged 2-row steps on ~7-column images, 1.27-1.49x slower than 1-row ones there;
/// the tile list no longer has them.)
std::optional<DepthwiseTiles> best_depthwise(const Conv2dAttrs& a, const Conv2dShape& s, int oh, int ow,
                                             const DeviceTraits& device) {
    const DepthwiseGroup group = depthwise_group(a, s);
    const long long groups = 1LL * s.batch * a.groups;
    const int taps = a.kernel_h * a.kernel_w * group.in;  // each output's FMAs
    const double floor = (1.0 * groups * group.in * s.height * s.width + 1.0 * groups * group.out * oh * ow) / 4.0 /
                         device.multiprocessors;
    const int span_chunks = ceil_div((4 - a.pad_w % 4) % 4 + 3 * a.stride_w + a.kernel_w, 4);
    std::optional<std::pair<DepthwiseTiles, std::pair<double, double>>> best;
    // Copies of 16 bytes where x's rows are whole chunks, else 8 or 4 (x assumed aligned).
    const int copy_bytes = s.width % 4 == 0 ? 16 : s.width % 2 == 0 ? 8 : 4;
    for (const auto& t : DepthwiseTiles::configurations()) {
        const unsigned shared = t.shared_bytes(a, group.in);
        if (shared > static_cast<unsigned>(device.max_shared_bytes)) continue;
        const long long blocks = ceil_div<long long>(groups, t.planes) * ceil_div(oh, t.block_h) *
                                 ceil_div(ow, t.block_w);
        const long long per_sm = ceil_div<long long>(blocks, device.multiprocessors);
        const long long at_once = std::max<long long>(
            1, std::min<long long>({2048 / t.threads, device.max_shared_bytes / std::max(shared, 1u), 32, per_sm}));
        const double outputs = 1.0 * t.planes * t.block_h * t.block_w * group.out;
        const int row_span = (t.step_rows - 1) * a.stride_h + a.kernel_h;
        // Staged: the window's copies (narrower ones cost more than their bytes: squared, fitted)
        // and its 16-byte shared loads. Unstaged: the same window's bytes into L1 (in whole
        // sectors, a quarter of the copies' cost: fitted), and a 4-byte L1 load a clock for each
        // element a step's rows span.
        const double window = t.window_bytes(a, group.in) / 8.0;
        const double staging = t.staged ? window * (16.0 / copy_bytes) * (16.0 / copy_bytes) : window / 4.0;
        const double loads = t.staged ? row_span * span_chunks / 8.0 : row_span * (3.0 * a.stride_w + a.kernel_w);
        const double work = per_sm *
                            (staging + outputs * (taps / 128.0 + loads * group.in / (4.0 * t.step_rows) + 0.02));
        // Output lanes beyond the group's steps of outputs idle: worth it only where the grid
        // would leave SMs idle otherwise (small layers at batch 1), not where few working threads
        // a block must hide the memory latency. A block's work then sits in a warp or two: up to
        // four blocks an SM, one for each scheduler; past that they share them (g8 3x3 64 @30 b5
        // on the H200: 8x8 tiles at 5 blocks an SM, 1.57x the 16x32 tiles' time; a cut at 3 or 4
        // replays alike, at 5 keeps that row).
        const int lanes = t.output_lanes(), busy = std::min(lanes, group.out / group.outputs_per_step(a));
        if (busy < lanes && per_sm > 4) continue;
        const double per_thread = outputs / (1.0 * t.threads * busy / lanes);
        const double rounds = ceil_div(per_sm, at_once) * (3000.0 + 32.0 * taps * per_thread);
        // A grid of fewer blocks than SMs reaches the bandwidth of the SMs it fills.
        const double fill = std::min<double>(1.0, 1.0 * blocks / device.multiprocessors);
        // Where the bandwidth bounds several tiles alike, the one with less work beside it.
        // A block's work hides only part of its rounds' latency: a quarter of it adds on.
        const std::pair cost{std::max({floor / fill, work + rounds / 4.0, rounds}), work};
        if (!best || cost < best->second) best = std::pair{t, cost};
    }
    if (!best) return std::nullopt;
    return best->first;
}

}  // namespace

std::unique_ptr<Conv2dOp> dispatch_conv2d_bn_silu(const Conv2dAttrs& a, const Conv2dShape& s,
                                                  const DeviceTraits& device) {
    const auto [oh, ow] = conv2d_output_size(a, s);  // throws for attributes no kernel takes
    // Where no tile's windows fit in shared memory (filters of dozens of taps), the kernels below.
    if (const auto tiles = depthwise_kernel_layer(a, s) ? best_depthwise(a, s, oh, ow, device) : std::nullopt)
        return std::make_unique<Conv2dBnSiluDepthwiseForward>(*tiles, a, depthwise_group(a, s),
                                                              device.max_shared_bytes);
    if (tensor_core_layer(a, s)) {
        const auto sm80 = best_sm80(a, s, oh, ow, device);
        std::string why_not;
        if (const auto tma = best_tma(a, s, device, why_not); tma && (!sm80 || tma->cost <= sm80->cost))
            return detail::make_tma_conv(a, tma->tiles, device, tma->gathers);
        require(sm80.has_value(), "no GEMM configuration fits this device's shared memory");
        return detail::make_gemm_conv(a, sm80->tiles, device.max_shared_bytes, sm80->split_k);
    }
    // Direct: pixels per block from the row width; channels per block shrink until the grid
    // covers the device twice.
    const int block_ow = ow >= 48 ? 64 : ow >= 24 ? 32 : 16;
    int block_oc = 64;
    auto blocks = [&, oh = oh, ow = ow](int oc) {
        return 1LL * ceil_div(ow, block_ow) * oh * s.batch * ceil_div(s.c_out, oc);
    };
    while (block_oc > 16 && (blocks(block_oc) < 2LL * device.multiprocessors || block_oc / 2 >= s.c_out)) block_oc /= 2;
    if (Conv2dBnSiluDirectForward::threads({block_oc, block_ow}) < 32) block_oc = 32;
    return std::make_unique<Conv2dBnSiluDirectForward>(block_oc, block_ow, a, s, device.max_shared_bytes);
}

std::unique_ptr<Conv2dBnSiluNhwcTmaForward> dispatch_conv2d_bn_silu_nhwc(const Conv2dAttrs& a, const Conv2dShape& s,
                                                                         const DeviceTraits& device) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    const long long boxes = ceil_div(1LL * s.batch * oh * ow, 32LL);
    std::optional<std::pair<Sm90Tiles, double>> best;
    // Its X box is the GEMM's A as it stands, copied once per K step like the 1×1 kernel's: no
    // fragments, no patch beyond the box. Where the filter has several taps, X's traffic weighs
    // 0.6 of W's: the boxes of a tile's taps overlap, so most of its copies hit L2. A 1×1 layer's
    // X is read once per channel tile and its W, small and read by every tile, stays in L2: X
    // weighs 1, W 0.4. Fitted to two H200 runs of every candidate over the 108 bench rows TMA
    // takes (2026-12-04, fourteenth and fifteenth sessions): 108 of 108 within 1.15x of the best
    // in both (worst 1.10x and 1.11x) for 1×1 weights X 0.9–1.4 with W 0.3–0.4; with the taps'
    // weights for 1×1 layers as well, 1x1 512->2048 @7 b8 took 1.16x in the second (128x64 tiles,
    // where 64x128 fill the SMs as well and waste fewer of their 392 pixels) and 1x1 512->128 @28
    // b32 1.15x in both.
    const bool one_tap = a.kernel_h * a.kernel_w == 1;
    const Sm90StepCost step = one_tap ? Sm90StepCost{.x_weight = 1.0, .w_weight = 0.4} : Sm90StepCost{.x_weight = 0.6};
    for (const auto& t : conv2d_bn_silu_nhwc_candidates(a, s, device)) {
        const double cost = tma_gemm_cost(t, boxes, s.c_out, detail::nhwc_k(a, s), device.multiprocessors, step);
        if (!best || cost < best->second || (cost == best->second && t.block_n > best->first.block_n))
            best = std::pair{t, cost};
    }
    require(best.has_value(), "no TMA pipeline of 3 stages fits this device's shared memory");
    return std::make_unique<Conv2dBnSiluNhwcTmaForward>(best->first, a, device);
}

std::string conv2d_bn_silu_dispatch_reason(const Conv2dAttrs& a, const Conv2dShape& s, const DeviceTraits& device) {
    const auto op = dispatch_conv2d_bn_silu(a, s, device);
    const std::string name = op->kernel_for_launch(0).name();
    std::string split;  // a Hopper pick's split-K
    if (const auto* t = dynamic_cast<const TmaConvOp*>(op.get()); t && t->tiles().split_k > 1)
        split = fmt::format(", K split over a cluster of {} blocks (its tiles alone would leave SMs idle)",
                            t->tiles().split_k);
    if (name == "conv2d_bn_silu_gemm_tma_forward") return "the TMA + wgmma 1x1 kernel (sm_90a)" + split;
    if (name == "conv2d_bn_silu_tma_forward") return "the TMA + wgmma implicit GEMM (sm_90a)" + split;
    if (name == "conv2d_bn_silu_gather_tma_forward") {
        const std::string why = conv2d_tma_unsupported_reason(a, s, device);
        return "the wgmma implicit GEMM with x gathered, W by TMA (sm_90a)" + split + ": " +
               (why.empty() ? "the cost model estimates it faster for this layer than TMA's boxes" : why);
    }
    if (name == "conv2d_bn_silu_depthwise_forward")
        return is_depthwise(a, s) ? "the depthwise kernel (fp32): each input element read once a block (windows staged "
                                    "in shared memory, small images through L1)"
                                  : fmt::format(
                                        "the depthwise kernel (fp32), each output summing its group's {} planes: "
                                        "groups of 16 or fewer channels keep tensor cores mostly idle",
                                        s.c_in / a.groups);
    if (name == "conv2d_bn_silu_direct_forward")
        return "the direct kernel: each group's GEMM is too thin for tensor cores";
    const std::string mainloop = device.arch.number() >= 80 ? "the sm80 mainloop (cp.async + mma.sync)"
                                                            : "the FMA path";
    std::string why_not;
    const auto tma = best_tma(a, s, device, why_not);
    if (!tma) return mainloop + ": " + why_not;
    const std::string hopper = tma->gathers ? "the Hopper kernel that gathers x (TMA cannot box it: " + why_not + ")"
                                            : "the TMA kernel";
    return mainloop + ": the cost model estimates it faster for this layer than " + hopper;
}

const char* conv2d_tuned_family(Conv2dLayout layout) noexcept {
    return layout == Conv2dLayout::nhwc ? "conv2d_bn_silu_nhwc" : "conv2d_bn_silu";
}

namespace detail {

std::unique_ptr<Conv2dOp> tuned_conv2d_op(Conv2dLayout layout, const Conv2dAttrs& a, const Conv2dShape& s,
                                          const DeviceTraits& device, const std::string& device_name,
                                          const std::string& driver, Cache& cache) {
    const char* family = conv2d_tuned_family(layout);
    const std::string key = conv2d_problem_key(a, s);
    const auto winners = find_tuned(cache, family, key, device_name, device.arch.name(), driver);
    auto ignore = [&](const TunedConfig& winner, const std::string& why) {
        detail::warn(
            fmt::format("ignoring the tuned {} configuration '{}' for {}: {}", family, winner.config, key, why));
    };
    bool edited = false;  // a winner timed on a kernel source since edited: its time says nothing of this one's
    for (const TunedConfig& winner : winners) {  // newest first
        try {
            auto op = make_conv2d_bn_silu(a, s, winner.config, device);
            // A winner of the other layout would read these tensors' elements in the wrong order.
            const bool nhwc = dynamic_cast<const Conv2dBnSiluNhwcTmaForward*>(op.get()) != nullptr;
            if (nhwc != (layout == Conv2dLayout::nhwc))
                ignore(winner, nhwc ? "it names the channels-last kernel, and these tensors are NCHW"
                                    : "it names an NCHW kernel, and these tensors are channels-last");
            else if (op->kernel().source_hash() == winner.source_hash) return op;
            else edited = true;
        } catch (const UsageError& e) {
            ignore(winner, e.what());
        }
    }
    if (edited)
        detail::warn(
            fmt::format("no tuned {} winner for {} holds: its kernel's source changed since it was timed "
                        "(kjit tune times it again); dispatch picks instead",
                        family, key));
    return nullptr;
}

}  // namespace detail

}  // namespace kjit
