// The depthwise conv op: its tile rules and configurations, its shared-memory window (the
// kernel's `depthwise::Window`, computed the same way), grid and argument order.
#include <algorithm>

#include <fmt/format.h>
#include <kjit/conv.hpp>

#include "kjit/ceil_div.cuh"
#include "ops/conv/conv_call.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

namespace {
constexpr int pixels_per_step = 4;  // the kernel's PIX

/// Threads of one plane (a group's planes for narrow groups): its tile's columns in steps of 4,
/// times the row steps they share, times its output lanes.
int threads_per_plane(const DepthwiseTiles& t) { return t.threads / std::max(t.planes, 1); }
}  // namespace

void DepthwiseTiles::validate() const {
    require(block_h > 0 && block_w > 0 && planes > 0 && threads > 0,
            "depthwise tile constants must be positive: BLOCK_H {}, BLOCK_W {}, PLANES {}, THREADS {}", block_h,
            block_w, planes, threads);
    require(step_rows == 1 || step_rows == 2 || step_rows == 4,
            "STEP_ROWS = {}: a thread's step is 1, 2 or 4 output rows", step_rows);
    require(block_h % step_rows == 0 && block_w % pixels_per_step == 0,
            "BLOCK_H = {} must be a multiple of STEP_ROWS = {} and BLOCK_W = {} a multiple of 4: a thread computes "
            "{} rows x 4 columns at a time",
            block_h, step_rows, block_w, step_rows);
    require(threads % 32 == 0 && threads <= 1024, "THREADS = {} must be a multiple of 32, at most 1024", threads);
    const int across = block_w / pixels_per_step, per_plane = threads_per_plane(*this), steps = block_h / step_rows;
    require(threads % planes == 0 && per_plane % across == 0,
            "THREADS / PLANES = {} / {} must be a whole multiple of BLOCK_W / 4 = {}: a plane's threads cover its "
            "tile's columns",
            threads, planes, across);
    require(per_plane / across <= steps || per_plane % (across * steps) == 0,
            "{} threads per plane over {} columns and {} steps of {} rows (BLOCK_H = {}) leave some without work: "
            "threads beyond the steps share the group's outputs, a whole multiple of {} threads",
            per_plane, across, steps, step_rows, block_h, across * steps);
}

int DepthwiseTiles::output_lanes() const {
    const int per_plane = threads_per_plane(*this), across = block_w / pixels_per_step, steps = block_h / step_rows;
    return per_plane / across <= steps ? 1 : per_plane / (across * steps);
}

unsigned DepthwiseTiles::shared_bytes(const Conv2dAttrs& a, int group_in) const {
    return staged ? window_bytes(a, group_in) : 0;
}

unsigned DepthwiseTiles::window_bytes(const Conv2dAttrs& a, int group_in) const {
    const int offset = (4 - a.pad_w % 4) % 4;
    const int rows = (block_h - 1) * a.stride_h + a.kernel_h;
    const int pitch = ceil_div(offset + (block_w - 1) * a.stride_w + a.kernel_w, 4) * 4;
    return static_cast<unsigned>(4LL * planes * group_in * rows * pitch);
}

std::span<const DepthwiseTiles> DepthwiseTiles::configurations() {
    static const std::vector<DepthwiseTiles> list = [] {
        std::vector<DepthwiseTiles> l;
        // Tiles for images of ~7, ~14, ~28 and 56+ columns; for each, steps of 2 or 4 rows,
        // threads of a plane over all of its row steps or half of them (each thread two steps:
        // the filter's registers reused), 128 or 256 threads a block.
        for (const auto& [h, w] : {std::pair{8, 8}, {16, 16}, {16, 32}, {8, 64}, {16, 64}, {32, 64}})
            for (int rows : {2, 4})
                for (int threads : {128, 256})
                    for (int share : {1, 2}) {
                        const int per_plane = w / pixels_per_step * (h / rows / share);
                        if (per_plane == 0 || per_plane > threads || threads % per_plane || threads / per_plane > 32)
                            continue;
                        const DepthwiseTiles t{h, w, threads / per_plane, threads, rows};
                        // Without opting in, a block has 48 KB: a 7×7 filter's windows must fit.
                        if (t.shared_bytes({.kernel_h = 7, .kernel_w = 7, .pad_h = 3, .pad_w = 3}) <= 48 * 1024)
                            l.push_back(t);
                    }
        // For narrow groups, whose windows are a group's planes: one or two groups a block, the
        // threads beyond its row steps sharing its outputs.
        for (const DepthwiseTiles& t : {DepthwiseTiles{8, 8, 1, 128, 2}, DepthwiseTiles{8, 8, 2, 128, 2},
                                        DepthwiseTiles{16, 16, 1, 128, 2}, DepthwiseTiles{16, 32, 1, 128, 2}})
            l.push_back(t);
        // Unstaged, for images of ~7 to ~28 columns: a thread a step of 1 or 2 rows, every thread
        // of a plane on its own step (more threads to hide L1's latency). On ~7-column images
        // only 1-row steps in blocks of 128 threads: the 2-row ones took 1.06-1.49x their time on
        // 3x3 filters (won by 4% on 7x7 ones), and 256 threads a 7x7 filter's 178 registers.
        for (const auto& [h, w] : {std::pair{8, 8}, {16, 16}, {16, 32}})
            for (int rows : {1, 2})
                for (int threads : {128, 256}) {
                    const int per_plane = w / pixels_per_step * (h / rows);
                    if (w == 8 && (rows != 1 || threads != 128)) continue;
                    if (per_plane <= threads) l.push_back({h, w, threads / per_plane, threads, rows, false});
                }
        return l;
    }();
    return list;
}

bool is_depthwise(const Conv2dAttrs& a, const Conv2dShape& s) noexcept {
    return a.groups == s.c_in && a.groups > 0 && s.c_out % s.c_in == 0;
}

int DepthwiseGroup::outputs_per_step(const Conv2dAttrs& a) const noexcept {
    for (int n : {4, 2})
        if (out % n == 0 && n * a.kernel_h * a.kernel_w <= 64) return n;
    return 1;
}

DepthwiseGroup depthwise_group(const Conv2dAttrs& a, const Conv2dShape& s) noexcept {
    return {s.c_in / a.groups, s.c_out / a.groups};
}

bool conv2d_rounds_to_tf32(const Conv2dOp& op) noexcept {
    return !dynamic_cast<const Conv2dBnSiluDepthwiseForward*>(&op) &&
           !dynamic_cast<const Conv2dBnSiluDirectForward*>(&op);
}

namespace {
Conv2dBnSiluDepthwiseForward::KernelType depthwise_kernel(const DepthwiseTiles& t, const Conv2dAttrs& a,
                                                          const DepthwiseGroup& g) {
    t.validate();
    detail::require_general_attrs(a);
    require(
        g.in >= 1 && g.in <= DepthwiseGroup::max_in && g.out >= 1,
        "the depthwise kernel sums groups of 1 to {} input channels into 1 or more outputs; this group has {} -> {}",
        DepthwiseGroup::max_in, g.in, g.out);
    KernelSpec spec{"conv2d_bn_silu_depthwise_forward",
                    {{"KH", std::int64_t{a.kernel_h}},
                     {"KW", std::int64_t{a.kernel_w}},
                     {"STRIDE", std::int64_t{a.stride_h}},
                     {"PAD", std::int64_t{a.pad_h}},
                     {"BLOCK_H", std::int64_t{t.block_h}},
                     {"BLOCK_W", std::int64_t{t.block_w}},
                     {"PLANES", std::int64_t{t.planes}},
                     {"THREADS", std::int64_t{t.threads}},
                     {"STEP_ROWS", std::int64_t{t.step_rows}},
                     {"GROUP_IN", std::int64_t{g.in}},
                     {"OC_STEP", std::int64_t{g.outputs_per_step(a)}},
                     {"STAGED", t.staged}},
                    Conv2dBnSiluDepthwiseForward::KernelType::signature(),
                    static_cast<unsigned>(t.threads)};
    // Where a thread holds 4 outputs' filters (narrow groups), or a 7×7 filter across two steps
    // in blocks of 256 threads, ptxas otherwise trades spills for occupancy (80 registers and
    // spills where 96 fit; the 7×7 tiles on sm_80). The other depthwise tiles keep ptxas' choice:
    // their occupancy hides their memory latency.
    if (g.in > 1 || (a.kernel_h * a.kernel_w > 25 && t.threads > 128)) spec.min_blocks_per_multiprocessor = 1;
    return Conv2dBnSiluDepthwiseForward::KernelType(Kernel(std::move(spec)));
}
}  // namespace

Conv2dBnSiluDepthwiseForward::Conv2dBnSiluDepthwiseForward(const DepthwiseTiles& tiles, const Conv2dAttrs& attrs,
                                                           DepthwiseGroup group, int max_shared_bytes)
    : Conv2dOp(depthwise_kernel(tiles, attrs, group), attrs),
      tiles_(tiles),
      group_(group),
      shared_bytes_(tiles.shared_bytes(attrs, group.in)) {
    require(
        shared_bytes_ <= static_cast<unsigned>(max_shared_bytes),
        "a {}x{} filter's input windows with BLOCK_H {}, BLOCK_W {}, {} groups of {} planes take {} bytes of shared "
        "memory: the target allows {}. Use smaller tiles",
        attrs.kernel_h, attrs.kernel_w, tiles.block_h, tiles.block_w, tiles.planes, group.in, shared_bytes_,
        max_shared_bytes);
}

void Conv2dBnSiluDepthwiseForward::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    const auto conv = detail::resolve_conv_call(attrs(), call);
    const Conv2dShape& s = conv.shape;
    const int outputs_per_step = group_.outputs_per_step(attrs());
    require(s.c_in == attrs().groups * group_.in && s.c_out % attrs().groups == 0 &&
                (s.c_out / attrs().groups) % outputs_per_step == 0,
            "this depthwise kernel takes groups of {} input channels and a multiple of {} outputs; this call has {} "
            "groups, {} -> {} channels",
            group_.in, outputs_per_step, attrs().groups, s.c_in, s.c_out);
    detail::visit_conv_tensors(call, visitor);
    // log2 of the widest access (in floats: 1, 2 or 4) that rows of `width` floats starting at
    // `p` take whole.
    const auto widest = [](const void* p, long long width) {
        const auto at = reinterpret_cast<std::uintptr_t>(p);
        return at % 16 == 0 && width % 4 == 0 ? 2 : at % 8 == 0 && width % 2 == 0 ? 1 : 0;
    };
    const int x_copy = widest(call.inputs[0].data, s.width);
    const int y_store = std::min(widest(call.output, conv.ow), widest(call.output, call.output_row_stride));
    visitor.visit_i64(1LL * s.batch * s.c_in);
    for (int v : {s.c_in, s.height, s.width, conv.oh, conv.ow, s.c_out / attrs().groups, call.output_row_stride})
        visitor.visit_i32(v);
    visitor.visit_i32(x_copy | y_store << 2);
}

Dims Conv2dBnSiluDepthwiseForward::grid(ShapeView output_shape) const {
    detail::check_rank4(output_shape, "output y");
    const std::size_t planes = output_shape[0] * static_cast<std::size_t>(attrs().groups);  // B·groups
    const std::size_t rows = ceil_div<std::size_t>(output_shape[2], tiles_.block_h),
                      columns = ceil_div<std::size_t>(output_shape[3], tiles_.block_w);
    require(rows <= 65535 && columns <= 65535, "grid ({} row tiles, {} column tiles) exceeds CUDA's 65535 on y/z", rows,
            columns);
    const std::size_t blocks = ceil_div<std::size_t>(planes, tiles_.planes);
    require(blocks < (1ULL << 31), "{} blocks of planes exceed CUDA's grid limit: split the batch", blocks);
    return {static_cast<unsigned>(blocks), static_cast<unsigned>(rows), static_cast<unsigned>(columns)};
}

}  // namespace kjit
