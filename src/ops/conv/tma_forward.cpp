// The Hopper conv ops (the 1×1 GEMM and the implicit GEMM): their tile rules, the persistent grid,
// the input patch boxes of the implicit GEMM, and the tensor maps each op builds once per pointer
// set and shape (what TMA reads x, w and y through).
#include <algorithm>
#include <array>
#include <bit>
#include <climits>

#include <fmt/format.h>
#include <kjit/conv.hpp>

#include "jit/log.hpp"
#include "kjit/ceil_div.cuh"
#include "kjit/gemm_geometry.cuh"
#include "ops/conv/conv_call.hpp"
#include "ops/conv/gemm_forward.hpp"
#include "ops/op_checks.hpp"
#include "ops/tensor_map_cache.hpp"

namespace kjit {

using detail::require;

// ---- tiles ------------------------------------------------------------------------------------

namespace {
constexpr Sm90Geometry geometry(const Sm90Tiles& t) { return {t.block_m, t.block_n, t.stages}; }
constexpr int deepest_pipeline = 8;
/// Every BLOCK_M × BLOCK_N the kernels take, in dispatch's order of preference on equal cost:
/// after the square and wide tiles, four consumer warpgroups for short-K layers (whose consumers
/// spend a tile mostly on its A fragments and epilogue) and narrow tiles for layers of few output
/// channels, or small layers that would leave SMs idle.
constexpr std::array<std::pair<int, int>, 7> tile_shapes{
    {{128, 128}, {128, 64}, {64, 128}, {64, 64}, {256, 32}, {128, 32}, {64, 32}}};
}  // namespace

unsigned Sm90Tiles::threads() const { return static_cast<unsigned>(geometry(*this).threads()); }
unsigned Sm90Tiles::shared_bytes() const { return static_cast<unsigned>(geometry(*this).shared_bytes()); }

int Sm90Tiles::max_stages(int block_m, int block_n, int max_shared_bytes) {
    int stages = deepest_pipeline;
    while (stages > 1 && geometry({block_m, block_n, stages, 1}).shared_bytes() > max_shared_bytes) --stages;
    return stages;
}

void Sm90Tiles::validate(int max_shared_bytes) const {
    require(block_m == 64 || block_m == 128 || block_m == 256,
            "BLOCK_M = {} must be 64, 128 or 256: each consumer warpgroup owns 64 pixels, 1, 2 or 4 of them", block_m);
    require(block_n == 32 || block_n == 64 || block_n == 128,
            "BLOCK_N = {} must be 32, 64 or 128 (the wgmma N the kernel issues)", block_n);
    // ptxas compiles all 640 threads to the launch's 96 registers: 64 channels' accumulators
    // and BN parameters spill there (sm_90a, NVRTC 13.0).
    require(block_m < 256 || block_n == 32,
            "BLOCK_M = 256 takes BLOCK_N = 32 only: five warpgroups leave {} registers a thread, too few for {} "
            "channels' accumulators",
            geometry(*this).launch_registers(), block_n);
    require(stages >= 2 && stages <= deepest_pipeline, "STAGES = {} must be between 2 and {}", stages,
            deepest_pipeline);
    require(group_m > 0, "GROUP_M = {} must be positive", group_m);
    require(split_k >= 1 && split_k <= 8,
            "SPLIT_K = {} must be between 1 and 8 (the blocks of a portable thread-block cluster)", split_k);
    require(shared_bytes() <= static_cast<unsigned>(max_shared_bytes),
            "tiles {}x{} with {} stages need {} bytes of shared memory: the device allows {} ({} stages fit)", block_m,
            block_n, stages, shared_bytes(), max_shared_bytes, max_stages(block_m, block_n, max_shared_bytes));
}

std::span<const Sm90Tiles> Sm90Tiles::configurations() {
    static const std::vector<Sm90Tiles> list = [] {
        constexpr int h100_shared = 232448;  // what every 9.0 device allows a block
        std::vector<Sm90Tiles> l;
        for (const auto& [m, n] : tile_shapes) {
            const int deepest = max_stages(m, n, h100_shared);
            for (int s : {4, deepest})
                if (std::find(l.begin(), l.end(), Sm90Tiles{m, n, s, 8}) == l.end()) l.push_back({m, n, s, 8});
        }
        return l;
    }();
    return list;
}

// ---- the implicit GEMM's patch boxes ------------------------------------------------------------

std::optional<TapBox> detail::tap_box(const Conv2dAttrs& a, int oh, int ow) {
    const int taps = a.kernel_h * a.kernel_w;
    const int channels = TapBox::step_channels(taps);
    std::optional<TapBox> best;
    long long best_pixels = 0;  // output pixels the boxes cover: the fewer, the less waste
    for (int box_w : {32, 16, 8, 4}) {
        const TapBox box{box_w, channels, a.kernel_h, a.kernel_w, a.stride_h};
        if (box.bytes() > Sm90Geometry::box * Sm90Geometry::block_k * 4 || box.patch_w() > 256 || box.patch_h() > 256)
            continue;
        const long long pixels = 32LL * box.boxes<long long>(1, oh, ow);
        if (!best || pixels < best_pixels) best = box, best_pixels = pixels;
    }
    return best;
}

int detail::rows_box_rows(const Conv2dAttrs& a, int oh, int ow) {
    // Output rows the boxes span: at most 2 + 30/ow (32 pixels from a row's last column) and
    // oh. Every forward plans its call, so the walk over the boxes stops once that is reached.
    const long long most = std::min(2LL + 30 / ow, 1LL * oh);
    long long spanned = 0;
    for (long long j0 = 0; j0 < 1LL * oh * ow && spanned < most; j0 += 32) {
        const long long first = j0 / ow, last = std::min(j0 + 31, 1LL * oh * ow - 1) / ow;
        spanned = std::max(spanned, last - first + 1);
    }
    return spanned ? static_cast<int>(std::min<long long>((spanned - 1) * a.stride_h + a.kernel_h, INT32_MAX)) : 0;
}

std::optional<RowsBox> detail::rows_box(const Conv2dAttrs& a, const Conv2dShape& s, int oh, int ow) {
    const RowsBox box{rows_box_rows(a, oh, ow), TapBox::step_channels(a.kernel_h * a.kernel_w), s.width,
                      s.height * s.width, s.height * s.width % 4 != 0};
    if (box.extent() > 256 || box.channels > 256 || box.bytes() > Sm90Geometry::box * Sm90Geometry::block_k * 4)
        return std::nullopt;
    return box;
}

std::optional<ImageBox> detail::image_box(const Conv2dAttrs& a, const Conv2dShape& s) {
    const long long m = 1LL * s.height * s.width, plane = m * s.c_in;
    if (!is_pointwise(a) || m == 0 || m > 64 || (m % 4 == 0 && m >= 32)) return std::nullopt;
    if (plane % 8 == 0) return ImageBox{static_cast<int>(m), 8};
    if (plane % 4 == 0 && m <= 32) return ImageBox{static_cast<int>(m), 4};
    return std::nullopt;
}

long long detail::sm90_boxes(const Conv2dAttrs& a, const Conv2dShape& s, bool gathers) {
    const auto [oh, ow] = conv2d_output_size(a, s);
    if (gathers) return ceil_div(1LL * s.batch * oh * ow, 32LL);  // boxes run across images
    if (const auto image = image_box(a, s)) return 2 * image->groups(1LL * s.batch);
    if (is_pointwise(a) || s.width % 4) return s.batch * ceil_div(1LL * oh * ow, 32LL);
    const auto box = tap_box(a, oh, ow);
    require(box.has_value(), "no TMA patch box fits a {}x{} output of this layer", oh, ow);
    return box->boxes<long long>(s.batch, oh, ow);
}

std::vector<Sm90Tiles> detail::sm90_split_candidates(long long boxes, int k, int c_out, unsigned policy_bytes,
                                                     const DeviceTraits& device, int groups) {
    std::vector<Sm90Tiles> list;
    for (const auto& [m, n] : tile_shapes) {
        if (!tiles_within_groups(n, c_out, groups)) continue;
        const int stages = Sm90Tiles::max_stages(m, n, device.max_shared_bytes - static_cast<int>(policy_bytes));
        if (stages < 3) continue;
        const long long tiles = geometry({m, n, stages, 8}).column_tiles(boxes) * ceil_div(c_out, n);
        for (int split : {1, 2, 4, 8})
            if (split == 1 ||
                (ceil_div(k, Sm90Geometry::block_k) >= 2 * split && tiles * split <= 2LL * device.multiprocessors))
                list.push_back({m, n, stages, 8, split});
    }
    return list;
}

std::vector<Sm90Tiles> detail::sm90_split_candidates(const Conv2dAttrs& a, const Conv2dShape& s,
                                                     const DeviceTraits& device, bool gathers) {
    return sm90_split_candidates(sm90_boxes(a, s, gathers), s.c_in / a.groups * a.kernel_h * a.kernel_w, s.c_out,
                                 tma_policy_bytes(a, gathers), device, a.groups);
}

// ---- tensor maps ------------------------------------------------------------------------------

namespace {

using u64 = std::uint64_t;
using u32 = std::uint32_t;

/// One tensor as TMA sees it: up to 4 dimensions, innermost first, and the box copied. Rank 0:
/// no map (a tensor the kernel reads or writes through a pointer).
struct MapShape {
    std::size_t rank = 0;
    std::array<u64, 4> dims{};
    std::array<u64, 3> strides{};  // bytes, of dims[1]…
    std::array<u32, 4> box{};
    TensorMapSwizzle swizzle = TensorMapSwizzle::none;
    friend bool operator==(const MapShape&, const MapShape&) = default;

    [[nodiscard]] TiledTensorMap over(const void* base) const {
        return {base, {dims.data(), rank}, {strides.data(), rank - 1}, {box.data(), rank}, swizzle};
    }
    /// Why TMA cannot take this map over `base` ("" when it can, or when there is no map).
    [[nodiscard]] std::string unsupported_reason(const void* base) const {
        return rank ? over(base).unsupported_reason() : "";
    }
    [[nodiscard]] TensorMap encode(const void* base) const { return rank ? over(base).encode() : TensorMap{}; }
};

/// A dense f32 tensor of `dims` whose rows (dims[0]) are `row` elements apart.
MapShape dense(std::initializer_list<u64> dims, u64 row, std::initializer_list<u32> box, TensorMapSwizzle swizzle) {
    MapShape m{.rank = dims.size(), .swizzle = swizzle};
    std::copy(dims.begin(), dims.end(), m.dims.begin());
    std::copy(box.begin(), box.end(), m.box.begin());
    u64 stride = 4 * row;
    for (std::size_t i = 1; i < m.rank; ++i) {
        m.strides[i - 1] = stride;
        stride *= m.dims[i];
    }
    return m;
}

/// What one call hands its kernel: x, w and y as tensor maps (x and y as pointers where the
/// kernel gathers: their maps are empty), then bn_scale, bn_shift and the kernel's ints.
/// `why_not` says why TMA cannot take it ("" when it can).
struct CallPlan {
    const void* x = nullptr;
    const void* w = nullptr;
    void* y = nullptr;
    MapShape x_map, w_map, y_map;
    std::array<std::int32_t, 17> ints{};
    std::size_t n_ints = 0;
    std::int64_t x_image_stride = 0, y_image_stride = 0;  // elements; with the residual, every kernel's last arguments
    const void* residual = nullptr;
    // The kernel takes y after y_map too; the implicit GEMM, last, whether it has a y map.
    bool y_pointer = false, y_by_tma_arg = false;
    std::string why_not;

    [[nodiscard]] bool same_maps(const CallPlan& o) const {
        return x == o.x && w == o.w && y == o.y && x_map == o.x_map && w_map == o.w_map && y_map == o.y_map;
    }
};

constexpr auto swizzle_128 = TensorMapSwizzle::bytes_128, unswizzled = TensorMapSwizzle::none;

/// A group's K in whole 32-wide steps (no step reads another group's channels) and a multiple
/// of 4 channels (its first channel moves a flattened-rows box by whole 16-byte steps).
std::string groups_reason(const Conv2dAttrs& a, const Conv2dShape& s) {
    if (a.groups == 1) return {};
    const int in = s.c_in / a.groups, k = in * a.kernel_h * a.kernel_w;
    if (k % Sm90Geometry::block_k || in % 4)
        return fmt::format(
            "the TMA implicit GEMM takes groups whose C_IN*KH*KW is a multiple of 32 and C_IN a multiple of 4; this "
            "layer's groups have {} channels, K = {}",
            in, k);
    return {};
}

/// The maps and ints of a layer's call; pointers null when only the shapes matter. Images of x
/// and y lie `strides` elements apart (0: tight).
CallPlan plan(const Conv2dAttrs& a, const Sm90Tiles& t, bool gathers, const Conv2dShape& s, int oh, int ow,
              int y_row_stride, detail::ImageStrides strides = {}) {
    CallPlan p;
    p.x_image_stride = strides.x ? strides.x : 1LL * s.c_in * s.height * s.width;
    p.y_image_stride = strides.y ? strides.y : 1LL * s.c_out * y_row_stride;
    const u64 x_image_bytes = 4ULL * p.x_image_stride, y_image_bytes = 4ULL * p.y_image_stride;
    // A grouped layer's W rows are a group's K; its tiles of BLOCK_N channels each lie in a group.
    const u64 b = s.batch, cin = s.c_in, cout = s.c_out, bn = t.block_n, k = cin / a.groups * a.kernel_h * a.kernel_w;
    if (!gathers) p.why_not = groups_reason(a, s);
    if (p.why_not.empty() && !detail::tiles_within_groups(t.block_n, s.c_out, a.groups))
        p.why_not = fmt::format("BLOCK_N = {} straddles groups of {} output channels", t.block_n, s.c_out / a.groups);
    if (!p.why_not.empty()) return p;
    auto ints = [&p](std::initializer_list<std::int32_t> v) {
        std::copy(v.begin(), v.end(), p.ints.begin());
        p.n_ints = v.size();
    };
    p.w_map = dense({k, cout}, k, {32, u32(bn)}, swizzle_128);  // every kernel's: W rows of K
    if (gathers) {
        if (1LL * (s.batch - 1) * p.x_image_stride + 1LL * s.c_in * s.height * s.width >= (1LL << 31))
            p.why_not = "the gathering kernel indexes x with 32-bit integers: its images reach 2^31 elements";
        ints({s.batch, s.c_in, s.height, s.width, s.c_out, oh, ow, a.kernel_h, a.kernel_w, a.stride_h, a.pad_h,
              y_row_stride});
    } else if (detail::is_pointwise(a)) {
        const u64 m = 1ULL * oh * ow;
        const auto image = detail::image_box(a, s);
        if (image) {  // whole images; the kernel stores y itself
            const u64 inner = image->inner;
            p.x_map = dense({inner, cin * m / inner, b}, inner,
                            {u32(inner), u32(image->step_rows()), u32(image->images())}, unswizzled);
            p.x_map.strides[1] = x_image_bytes;
        } else {
            p.x_map = dense({m, cin, b}, m, {32, 32, 1}, swizzle_128);
            p.x_map.strides[1] = x_image_bytes;
            p.y_map = dense({m, cout, b}, u64(y_row_stride), {32, u32(bn), 1}, swizzle_128);
            p.y_map.strides[1] = y_image_bytes;
        }
        ints({s.batch, s.c_in, s.c_out, oh * ow, y_row_stride, image ? image->inner : 0});
        p.y_pointer = true;
    } else if (s.width % 4 == 0) {  // tap boxes
        const auto box = detail::tap_box(a, oh, ow);
        if (!box) {
            const TapBox narrowest{4, TapBox::step_channels(a.kernel_h * a.kernel_w), a.kernel_h, a.kernel_w,
                                   a.stride_h};
            p.why_not = fmt::format("the input patch of 32 output pixels is {} bytes at best: the X box takes 4096",
                                    narrowest.bytes());
            return p;
        }
        const u64 w = s.width;
        p.x_map = dense({w, u64(s.height), cin, b}, w,
                        {u32(box->patch_w()), u32(box->patch_h()), u32(box->channels), 1}, unswizzled);
        p.x_map.strides[2] = x_image_bytes;
        if (ow % 4 == 0) {  // else the kernel stores y itself: TMA cannot write rows of OW floats
            p.y_map = dense({u64(ow), u64(oh), cout, b}, u64(ow), {u32(box->box_w), u32(box->rows()), u32(bn), 1},
                            unswizzled);
            p.y_map.strides[1] = 4ULL * y_row_stride;  // channel planes are y's rows
            p.y_map.strides[2] = y_image_bytes;
        }
        ints({s.batch, s.c_in, s.height, s.width, s.c_out, a.groups, oh, ow, a.kernel_h, a.kernel_w, a.stride_h,
              a.pad_h, box->box_w, 0, box->channels, 0, y_row_stride});
        p.y_pointer = p.y_by_tma_arg = true;
    } else {  // whole rows, flattened
        const auto box = detail::rows_box(a, s, oh, ow);
        if (!box) {
            p.why_not = fmt::format("the {} input rows of {} floats that 32 output pixels reach do not fit one TMA box",
                                    detail::rows_box_rows(a, oh, ow), s.width);
            return p;
        }
        const u64 plane = 1ULL * s.height * s.width;
        if (box->planes_apart) {
            p.x_map = dense({cin * plane, b}, cin * plane, {u32(box->extent()), 1}, unswizzled);
            p.x_map.strides[0] = x_image_bytes;
        } else {
            p.x_map = dense({plane, cin, b}, plane, {u32(box->extent()), u32(box->channels), 1}, unswizzled);
            p.x_map.strides[1] = x_image_bytes;
        }
        if (1LL * oh * ow % 4 == 0) {  // else the kernel stores y itself
            p.y_map = dense({u64(oh) * ow, cout, b}, u64(y_row_stride), {32, u32(bn), 1}, swizzle_128);
            p.y_map.strides[1] = y_image_bytes;
        }
        ints({s.batch, s.c_in, s.height, s.width, s.c_out, a.groups, oh, ow, a.kernel_h, a.kernel_w, a.stride_h,
              a.pad_h, 0, box->rows, box->channels, box->planes_apart, y_row_stride});
        p.y_pointer = p.y_by_tma_arg = true;
    }
    return p;
}

/// The plan of a call, its pointers filled in and checked.
CallPlan plan(const Conv2dAttrs& a, const Sm90Tiles& t, bool gathers, const OpCall& call) {
    require(call.params.size() == 3, "conv2d_bn_silu takes 3 parameters (weight, bn_scale, bn_shift), {} given",
            call.params.size());
    CallPlan p;
    if (detail::is_pointwise(a) && !gathers) {
        const auto c = detail::resolve_pointwise_call(call);
        const int h = static_cast<int>(call.inputs[0].shape[2]), w = static_cast<int>(call.inputs[0].shape[3]);
        p = plan(a, t, gathers, {c.batch, c.c_in, h, w, c.c_out}, h, w, c.y_row_stride, detail::image_strides(call));
    } else {
        const auto c = detail::resolve_conv_call(a, call);
        p = plan(a, t, gathers, c.shape, c.oh, c.ow, call.output_row_stride, detail::image_strides(call));
    }
    p.x = detail::non_null(call.inputs[0].data, "input x");
    p.w = detail::non_null(call.params[0], "parameter weight");
    p.y = detail::non_null(call.output, "output y");
    // The implicit GEMM stores y itself where TMA cannot write it through a map (a padded row
    // stride, an unaligned y).
    if (p.y_by_tma_arg && !p.y_map.unsupported_reason(p.y).empty()) p.y_map = {};
    // A fused residual add is made by the consumers' own stores.
    if (call.residual && p.y_by_tma_arg) p.y_map = {};
    p.residual = call.residual;
    if (p.why_not.empty())
        for (const auto& [map, base, what] : {std::tuple{&p.x_map, static_cast<const void*>(p.x), "input x"},
                                              {&p.w_map, p.w, "weight"},
                                              {&p.y_map, p.y, "output y"}})
            if (auto why = map->unsupported_reason(base); !why.empty()) {
                p.why_not = fmt::format("TMA cannot reach {} through a tensor map: {}", what, why);
                break;
            }
    return p;
}

}  // namespace

class TmaConvOp::MapCache : public detail::TensorMapCache<CallPlan> {};

// ---- the ops ----------------------------------------------------------------------------------

Kernel detail::sm90_kernel(std::string name, std::vector<Param> signature, const Sm90Tiles& t,
                           const DeviceTraits& device) {
    require(device.hopper(), "the TMA + wgmma conv kernels run on 9.0 devices (sm_90a) only; this one is {}",
            device.arch.name());
    t.validate(device.max_shared_bytes);
    KernelSpec spec{std::move(name),
                    {{"BLOCK_M", std::int64_t{t.block_m}},
                     {"BLOCK_N", std::int64_t{t.block_n}},
                     {"STAGES", std::int64_t{t.stages}},
                     {"GROUP_M", std::int64_t{t.group_m}}},
                    std::move(signature),
                    t.threads()};
    spec.min_blocks_per_multiprocessor = 1;  // caps registers, so setmaxnreg can move them
    spec.only_for = Arch(9, 0, 'a');
    spec.waits_in_body = true;  // gemm_sm90.cuh waits after its barrier and table setup
    return Kernel(std::move(spec));
}

namespace {

/// The gathering kernel's X has no group offset: it takes ungrouped layers only.
std::string ungrouped_reason(const Conv2dAttrs& a) {
    return a.groups == 1
               ? ""
               : fmt::format("the gathering TMA kernel takes ungrouped layers, this one has {} groups", a.groups);
}

std::string general_attrs_reason(const Conv2dAttrs& a) {
    if (a.stride_h != a.stride_w || a.pad_h != a.pad_w || a.dilation_h != 1 || a.dilation_w != 1)
        return "the TMA kernels take one stride and one padding for both axes, dilation 1";
    if (a.kernel_h * a.kernel_w > 64)
        return fmt::format("a {}x{} kernel has {} taps: the TMA kernel takes at most 64", a.kernel_h, a.kernel_w,
                           a.kernel_h * a.kernel_w);
    return {};
}

}  // namespace

GemmTiles TmaConvOp::fallback_for(int max_shared_bytes) {
    // A device too small for them still takes a narrow TMA pipeline (64x32 in 3 stages: 46 KB).
    if (fallback_tiles.shared_bytes() <= static_cast<unsigned>(max_shared_bytes)) return fallback_tiles;
    std::optional<GemmTiles> largest;
    for (const GemmTiles& t : GemmTiles::configurations())
        if (t.shared_bytes() <= static_cast<unsigned>(max_shared_bytes) &&
            (!largest || t.block_m * t.block_n > largest->block_m * largest->block_n))
            largest = t;
    require(largest.has_value(), "no sm80 GEMM configuration fits {} bytes of shared memory", max_shared_bytes);
    return *largest;
}

TmaConvOp::TmaConvOp(std::string kernel_name, std::vector<Param> signature, const Sm90Tiles& tiles,
                     const Conv2dAttrs& attrs, const DeviceTraits& device, unsigned policy_bytes, bool gathers)
    : Conv2dOp(detail::sm90_kernel(std::move(kernel_name), std::move(signature), tiles, device), attrs),
      tiles_(tiles),
      policy_bytes_(policy_bytes),
      gathers_(gathers),
      multiprocessors_(device.multiprocessors),
      maps_(std::make_unique<MapCache>()),
      fallback_(detail::make_gemm_conv(attrs, fallback_for(device.max_shared_bytes), device.max_shared_bytes, 1)) {
    require(shared_bytes_for_launch(0) <= static_cast<unsigned>(device.max_shared_bytes),
            "tiles {}x{} with {} stages and a {}-byte tap table need {} bytes of shared memory: the device allows {}",
            tiles.block_m, tiles.block_n, tiles.stages, policy_bytes, shared_bytes_for_launch(0),
            device.max_shared_bytes);
}

TmaConvOp::~TmaConvOp() = default;

void detail::round_to_tf32(std::span<float> values) {
    for (float& v : values) {
        auto bits = std::bit_cast<std::uint32_t>(v);
        // Half of TF32's last place added to the magnitude, the 13 bits below it dropped;
        // infinities and NaN (exponent all ones) kept as they are.
        if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & 0xffffe000u;
        v = std::bit_cast<float>(bits);
    }
}

void TmaConvOp::prepare_param(std::size_t index, std::span<float> values) const {
    if (index == weight_slot) detail::round_to_tf32(values);
}

const RuntimeOp& TmaConvOp::op_for(const OpCall& call) const {
    if (const auto p = plan(attrs(), tiles_, gathers_, call); !p.why_not.empty()) {
        detail::debug(fmt::format("{}: the sm80 kernel {} runs this call", p.why_not, fallback_->kernel().id()));
        return *fallback_;
    }
    return *this;
}

void TmaConvOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    const CallPlan p = plan(attrs(), tiles_, gathers_, call);
    if (!p.why_not.empty())
        throw UsageError(p.why_not + "; run this layer with the sm80 kernel (a configuration without TMA=1)");
    const auto& maps = maps_->get(p, [](const CallPlan& q) {
        return detail::CallMaps<CallPlan>{q, q.x_map.encode(q.x), q.w_map.encode(q.w), q.y_map.encode(q.y)};
    });
    if (gathers_) visitor.visit_ptr(const_cast<void*>(p.x));  // the kernel's `const float* x`
    else visitor.visit_tensor_map(maps.x);
    visitor.visit_tensor_map(maps.w);
    if (gathers_) visitor.visit_ptr(p.y);
    else visitor.visit_tensor_map(maps.y);
    if (p.y_pointer) visitor.visit_ptr(p.y);
    visitor.visit_ptr(detail::non_null(call.params[1], "parameter bn_scale"));
    visitor.visit_ptr(detail::non_null(call.params[2], "parameter bn_shift"));
    for (std::size_t i = 0; i < p.n_ints; ++i) visitor.visit_i32(p.ints[i]);
    if (p.y_by_tma_arg) visitor.visit_i32(p.y_map.rank != 0);
    visitor.visit_i64(p.x_image_stride);
    visitor.visit_i64(p.y_image_stride);
    visitor.visit_ptr(const_cast<void*>(p.residual));
}

Dims detail::sm90_grid(const Sm90Tiles& t, std::size_t boxes, std::size_t n, int multiprocessors) {
    // How many clusters of one-block SMs fit at once depends on how the device's SMs group: the
    // hardware fills them as they free.
    const std::size_t tiles = geometry(t).column_tiles(boxes) * ceil_div<std::size_t>(n, t.block_n);
    const auto split = static_cast<std::size_t>(t.split_k);
    const std::size_t blocks = split > 1 ? std::max<std::size_t>(tiles, 1) * split
                                         : std::clamp<std::size_t>(tiles, 1, multiprocessors);
    require(blocks <= INT32_MAX, "{} tiles of {} blocks exceed the grid's limits: split the batch", tiles, split);
    return {static_cast<unsigned>(blocks), 1, 1};
}

Dims TmaConvOp::grid(ShapeView y) const {
    detail::check_rank4(y, "output y");
    const auto oh = static_cast<int>(y[2]), ow = static_cast<int>(y[3]);
    const std::size_t per_image = y[0] * ceil_div<std::size_t>(y[2] * y[3], Sm90Geometry::box);
    std::size_t boxes = per_image;
    if (gathers_) {
        boxes = ceil_div<std::size_t>(y[0] * y[2] * y[3], Sm90Geometry::box);  // columns run across images
    } else if (detail::is_pointwise(attrs())) {
        // Whole-image boxes, where C_IN allows them: two per group of images.
        if (const std::size_t m = y[2] * y[3]; m > 0 && m <= 64)
            boxes = std::max(per_image, 2 * ImageBox{static_cast<int>(m), 8}.groups(y[0]));
    } else {
        if (const auto box = detail::tap_box(attrs(), oh, ow))
            boxes = std::max(per_image, box->boxes<std::size_t>(y[0], y[2], y[3]));
    }
    return detail::sm90_grid(tiles_, boxes, y[1], multiprocessors_);
}

Dims TmaConvOp::grid_for_launch(std::size_t, std::span<const ShapeView> inputs, ShapeView y) const {
    detail::check_rank4(y, "output y");
    require(inputs.size() == 1, "conv2d_bn_silu takes 1 input, {} given", inputs.size());
    detail::check_rank4(inputs[0], "input x");
    const auto& x = inputs[0];
    const Conv2dShape s{detail::as_i32(x[0], "B"), detail::as_i32(x[1], "C_IN"), detail::as_i32(x[2], "H"),
                        detail::as_i32(x[3], "W"), detail::as_i32(y[1], "C_OUT")};
    return detail::sm90_grid(tiles_, static_cast<std::size_t>(detail::sm90_boxes(attrs(), s, gathers_)), y[1],
                             multiprocessors_);
}

Conv2dBnSiluGemmTmaForward::Conv2dBnSiluGemmTmaForward(const Sm90Tiles& tiles, const DeviceTraits& device, float bn_eps)
    : TmaConvOp("conv2d_bn_silu_gemm_tma_forward", KernelType::signature(), tiles, {.bn_eps = bn_eps}, device) {}

namespace {
const Conv2dAttrs& checked_general(const Conv2dAttrs& a) {
    if (auto why = general_attrs_reason(a); !why.empty()) throw UsageError(why);
    return a;
}
const Conv2dAttrs& checked_ungrouped(const Conv2dAttrs& a) {
    if (auto why = ungrouped_reason(a); !why.empty()) throw UsageError(why);
    return checked_general(a);
}
}  // namespace

Conv2dBnSiluTmaForward::Conv2dBnSiluTmaForward(const Sm90Tiles& tiles, const Conv2dAttrs& attrs,
                                               const DeviceTraits& device)
    : TmaConvOp("conv2d_bn_silu_tma_forward", KernelType::signature(), tiles, checked_general(attrs), device,
                detail::tma_policy_bytes(attrs)) {}

Conv2dBnSiluGatherTmaForward::Conv2dBnSiluGatherTmaForward(const Sm90Tiles& tiles, const Conv2dAttrs& attrs,
                                                           const DeviceTraits& device)
    : TmaConvOp("conv2d_bn_silu_gather_tma_forward", KernelType::signature(), tiles, checked_ungrouped(attrs), device,
                detail::tma_policy_bytes(attrs, true), true) {}

unsigned detail::tma_policy_bytes(const Conv2dAttrs& a, bool gathers) {
    if (is_pointwise(a) && !gathers) return 0;
    const TapTable table{a.kernel_h * a.kernel_w};
    return static_cast<unsigned>(table.bytes() + (gathers ? 0 : TapTable::rows_loader_bytes));
}

std::unique_ptr<TmaConvOp> detail::make_tma_conv(const Conv2dAttrs& a, const Sm90Tiles& t, const DeviceTraits& device,
                                                 bool gathers) {
    if (gathers) return std::make_unique<Conv2dBnSiluGatherTmaForward>(t, a, device);
    if (is_pointwise(a)) return std::make_unique<Conv2dBnSiluGemmTmaForward>(t, device, a.bn_eps);
    return std::make_unique<Conv2dBnSiluTmaForward>(t, a, device);
}

namespace {
std::string hopper_reason(const DeviceTraits& device) {
    return device.hopper() ? "" : fmt::format("TMA + wgmma needs a 9.0 device, this is {}", device.arch.name());
}
/// TMA reads W's rows of C_IN·KH·KW floats (a group's C_IN): 16-byte multiples.
std::string weight_rows_reason(const Conv2dAttrs& a, const Conv2dShape& s) {
    const long long k = 1LL * s.c_in / a.groups * a.kernel_h * a.kernel_w;
    return k % 4 ? fmt::format("TMA needs C_IN*KH*KW a multiple of 4 (16-byte weight rows), this layer has {}", k) : "";
}
}  // namespace

std::string conv2d_tma_unsupported_reason(const Conv2dAttrs& a, const Conv2dShape& s, const DeviceTraits& device) {
    if (auto why = hopper_reason(device); !why.empty()) return why;
    if (!detail::is_pointwise(a)) {
        for (auto why : {general_attrs_reason(a), groups_reason(a, s)})
            if (!why.empty()) return why;
        if (const long long plane = 1LL * s.height * s.width; s.width % 4 && plane % 4 && s.c_in * plane % 4)
            return fmt::format(
                "TMA needs W, H*W or C_IN*H*W a multiple of 4 (16-byte input rows, planes or images), this layer "
                "has W = {}, H*W = {}, C_IN*H*W = {}",
                s.width, plane, s.c_in * plane);
        if (auto why = weight_rows_reason(a, s); !why.empty()) return why;
        // Grouped: tiles whose channels lie in one group.
        int block_n = 128;
        while (block_n > 32 && !detail::tiles_within_groups(block_n, s.c_out, a.groups)) block_n /= 2;
        if (!detail::tiles_within_groups(block_n, s.c_out, a.groups))
            return fmt::format("the TMA tiles take groups of a multiple of 32 output channels; this layer's have {}",
                               s.c_out / a.groups);
        const auto [oh, ow] = conv2d_output_size(a, s);
        const auto p = plan(a, Sm90Tiles{128, block_n, 4, 8}, false, s, oh, ow, oh * ow);
        if (!p.why_not.empty()) return p.why_not;
        for (const auto* m : {&p.x_map, &p.w_map, &p.y_map})
            if (auto why = m->unsupported_reason(nullptr); !why.empty()) return "TMA: " + why;
        return {};
    }
    if (s.height * s.width % 4 && !detail::image_box(a, s))
        return fmt::format(
            "TMA needs OH*OW a multiple of 4 (16-byte rows), or images of at most 64 pixels with C_IN*OH*OW a "
            "multiple of 8 (of 4 up to 32 pixels); this layer has OH*OW = {}, C_IN*OH*OW = {}",
            s.height * s.width, 1LL * s.c_in * s.height * s.width);
    if (s.c_in % 4)
        return fmt::format("TMA needs C_IN a multiple of 4 (16-byte weight rows), this layer has {}", s.c_in);
    return {};
}

std::string conv2d_gather_unsupported_reason(const Conv2dAttrs& a, const Conv2dShape& s, const DeviceTraits& device) {
    for (auto why : {hopper_reason(device), ungrouped_reason(a), general_attrs_reason(a), weight_rows_reason(a, s)})
        if (!why.empty()) return why;
    const auto [oh, ow] = conv2d_output_size(a, s);
    if (1LL * s.batch * oh * ow >= (1LL << 31) || 1LL * s.batch * s.c_in * s.height * s.width >= (1LL << 31))
        return "the gathering kernel indexes x and its output pixels with 32-bit integers: this layer has 2^31 or more";
    const auto p = plan(a, Sm90Tiles{128, 128, 4, 8}, true, s, oh, ow, oh * ow);
    if (auto why = p.w_map.unsupported_reason(nullptr); !why.empty()) return "TMA: " + why;
    return {};
}

}  // namespace kjit
