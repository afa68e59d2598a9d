// The Hopper 1×1 conv op: its tile rules, the persistent grid, and the tensor maps it builds
// once per pointer set and shape (what TMA reads x, w and y through).
#include <algorithm>
#include <deque>
#include <mutex>

#include <fmt/format.h>
#include <kjit/conv.hpp>

#include "jit/log.hpp"
#include "kjit/ceil_div.cuh"
#include "kjit/gemm_geometry.cuh"
#include "ops/conv/conv_call.hpp"
#include "ops/conv/gemm_forward.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

// ---- tiles ------------------------------------------------------------------------------------

namespace {
constexpr Sm90Geometry geometry(const Sm90Tiles& t) { return {t.block_m, t.block_n, t.stages}; }
constexpr int deepest_pipeline = 8;
}  // namespace

unsigned Sm90Tiles::threads() const { return static_cast<unsigned>(geometry(*this).threads()); }
unsigned Sm90Tiles::shared_bytes() const { return static_cast<unsigned>(geometry(*this).shared_bytes()); }

int Sm90Tiles::max_stages(int block_m, int block_n, int max_shared_bytes) {
    int stages = deepest_pipeline;
    while (stages > 1 && geometry({block_m, block_n, stages, 1}).shared_bytes() > max_shared_bytes) --stages;
    return stages;
}

void Sm90Tiles::validate(int max_shared_bytes) const {
    require(block_m == 64 || block_m == 128,
            "BLOCK_M = {} must be 64 or 128: each consumer warpgroup owns 64 pixels, at most 2 of them", block_m);
    require(block_n == 64 || block_n == 128, "BLOCK_N = {} must be 64 or 128 (the wgmma N the kernel issues)", block_n);
    require(stages >= 2 && stages <= deepest_pipeline, "STAGES = {} must be between 2 and {}", stages,
            deepest_pipeline);
    require(group_m > 0, "GROUP_M = {} must be positive", group_m);
    require(shared_bytes() <= static_cast<unsigned>(max_shared_bytes),
            "tiles {}x{} with {} stages need {} bytes of shared memory: the device allows {} ({} stages fit)", block_m,
            block_n, stages, shared_bytes(), max_shared_bytes, max_stages(block_m, block_n, max_shared_bytes));
}

std::span<const Sm90Tiles> Sm90Tiles::configurations() {
    static const std::vector<Sm90Tiles> list = [] {
        constexpr int h100_shared = 232448;  // what every 9.0 device allows a block
        std::vector<Sm90Tiles> l;
        for (int m : {64, 128})
            for (int n : {64, 128}) {
                const int deepest = max_stages(m, n, h100_shared);
                for (int s : {4, deepest})
                    if (std::find(l.begin(), l.end(), Sm90Tiles{m, n, s, 8}) == l.end()) l.push_back({m, n, s, 8});
            }
        return l;
    }();
    return list;
}

// ---- tensor maps ------------------------------------------------------------------------------

namespace {

struct MapKey {
    const void* x;
    const void* w;
    const void* y;
    detail::PointwiseCall call;
    friend bool operator==(const MapKey& a, const MapKey& b) {
        return a.x == b.x && a.w == b.w && a.y == b.y && a.call.batch == b.call.batch && a.call.c_in == b.call.c_in &&
               a.call.c_out == b.call.c_out && a.call.m == b.call.m && a.call.y_row_stride == b.call.y_row_stride;
    }
};

struct Maps {
    MapKey key;
    TensorMap x, w, y;
};

using u64 = std::uint64_t;
using u32 = std::uint32_t;

/// The three maps of one call as TMA sees them: x {M, C_IN, B} in boxes of 32 × 32, w
/// {C_IN, C_OUT} in boxes of 32 × BLOCK_N, y {M, C_OUT, B} with y's row stride.
class CallMaps {
public:
    CallMaps(const MapKey& k, const Sm90Tiles& t)
        : x_dims_{u64(k.call.m), u64(k.call.c_in), u64(k.call.batch)},
          x_strides_{4 * x_dims_[0], 4 * x_dims_[0] * x_dims_[1]},
          w_dims_{u64(k.call.c_in), u64(k.call.c_out)},
          w_strides_{4 * w_dims_[0]},
          y_dims_{u64(k.call.m), u64(k.call.c_out), u64(k.call.batch)},
          y_strides_{4 * u64(k.call.y_row_stride), 4 * u64(k.call.y_row_stride) * y_dims_[1]},
          w_box_{32, u32(t.block_n)},
          y_box_{32, u32(t.block_n), 1},
          x_{k.x, x_dims_, x_strides_, x_box_},
          w_{k.w, w_dims_, w_strides_, w_box_},
          y_{k.y, y_dims_, y_strides_, y_box_} {}
    CallMaps(const CallMaps&) = delete;  // the maps point into this object's arrays
    CallMaps& operator=(const CallMaps&) = delete;

    /// The first map TMA cannot take and why, or "".
    [[nodiscard]] std::string unsupported_reason() const {
        for (const auto& [map, what] : {std::pair{&x_, "input x"}, {&w_, "weight"}, {&y_, "output y"}})
            if (auto why = map->unsupported_reason(); !why.empty())
                return fmt::format("the TMA conv kernel cannot reach {} through a tensor map: {}", what, why);
        return {};
    }
    [[nodiscard]] Maps encode(const MapKey& k) const {
        if (auto why = unsupported_reason(); !why.empty())
            throw UsageError(why + "; run this layer with the sm80 kernel (a configuration without TMA=1)");
        return {k, x_.encode(), w_.encode(), y_.encode()};
    }

private:
    u64 x_dims_[3], x_strides_[2], w_dims_[2], w_strides_[1], y_dims_[3], y_strides_[2];
    u32 x_box_[3] = {32, 32, 1}, w_box_[2], y_box_[3];
    TiledTensorMap x_, w_, y_;
};

MapKey map_key(const OpCall& call) {
    require(call.params.size() == 3, "conv2d_bn_silu takes 3 parameters (weight, bn_scale, bn_shift), {} given",
            call.params.size());
    const auto p = detail::resolve_pointwise_call(call);
    return {detail::non_null(call.inputs[0].data, "input x"), detail::non_null(call.params[0], "parameter weight"),
            detail::non_null(call.output, "output y"), p};
}

}  // namespace

/// The maps of the pointer sets and shapes this op was called with, newest last. A graph calls
/// an op with one set; the bound keeps an op called with fresh buffers every time from growing.
class Conv2dBnSiluGemmTmaForward::MapCache {
public:
    const Maps& get(const MapKey& key, const Sm90Tiles& tiles) {
        std::lock_guard lock(mutex_);
        for (const auto& m : maps_)
            if (m->key == key) return *m;
        if (maps_.size() == capacity) maps_.pop_front();
        maps_.push_back(std::make_unique<Maps>(CallMaps(key, tiles).encode(key)));
        return *maps_.back();
    }

private:
    static constexpr std::size_t capacity = 64;
    std::mutex mutex_;
    std::deque<std::unique_ptr<Maps>> maps_;  // stable addresses: packed arguments point into them
};

// ---- the op -----------------------------------------------------------------------------------

namespace {
Kernel tma_kernel(const Sm90Tiles& t, const DeviceTraits& device) {
    require(device.hopper(), "the TMA + wgmma conv kernel runs on 9.0 devices (sm_90a) only; this one is {}",
            device.arch.name());
    t.validate(device.max_shared_bytes);
    KernelSpec spec{"conv2d_bn_silu_gemm_tma_forward",
                    {{"BLOCK_M", std::int64_t{t.block_m}},
                     {"BLOCK_N", std::int64_t{t.block_n}},
                     {"STAGES", std::int64_t{t.stages}},
                     {"GROUP_M", std::int64_t{t.group_m}}},
                    Conv2dBnSiluGemmTmaForward::KernelType::signature(),
                    t.threads()};
    spec.min_blocks_per_multiprocessor = 1;  // caps registers, so setmaxnreg can move them
    spec.only_for = Arch(9, 0, 'a');
    return Kernel(std::move(spec));
}
}  // namespace

Conv2dBnSiluGemmTmaForward::Conv2dBnSiluGemmTmaForward(const Sm90Tiles& tiles, const DeviceTraits& device, float bn_eps)
    : Conv2dOp(tma_kernel(tiles, device), {.bn_eps = bn_eps}),
      tiles_(tiles),
      multiprocessors_(device.multiprocessors),
      maps_(std::make_unique<MapCache>()),
      fallback_(std::make_unique<Conv2dBnSiluGemmForward>(fallback_tiles.block_m, fallback_tiles.block_n,
                                                          fallback_tiles.block_k, fallback_tiles.group_m,
                                                          device.max_shared_bytes, 1, bn_eps)) {}

const RuntimeOp& Conv2dBnSiluGemmTmaForward::op_for(const OpCall& call) const {
    const MapKey key = map_key(call);
    if (const auto why = CallMaps(key, tiles_).unsupported_reason(); !why.empty()) {
        detail::debug(fmt::format("{}: the sm80 kernel {} runs this call", why, fallback_->kernel().id()));
        return *fallback_;
    }
    return *this;
}

Conv2dBnSiluGemmTmaForward::~Conv2dBnSiluGemmTmaForward() = default;

void Conv2dBnSiluGemmTmaForward::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    const MapKey key = map_key(call);
    const auto& p = key.call;
    const Maps& maps = maps_->get(key, tiles_);
    visitor.visit_tensor_map(maps.x);
    visitor.visit_tensor_map(maps.w);
    visitor.visit_tensor_map(maps.y);
    visitor.visit_ptr(detail::non_null(call.params[1], "parameter bn_scale"));
    visitor.visit_ptr(detail::non_null(call.params[2], "parameter bn_shift"));
    visitor.visit_i32(p.batch);
    visitor.visit_i32(p.c_in);
    visitor.visit_i32(p.c_out);
    visitor.visit_i32(p.m);
}

Dims Conv2dBnSiluGemmTmaForward::grid(ShapeView y) const {
    detail::check_rank4(y, "output y");
    const std::size_t tiles = geometry(tiles_).tiles(y[0], y[2] * y[3], y[1]);
    return {static_cast<unsigned>(std::clamp<std::size_t>(tiles, 1, multiprocessors_)), 1, 1};
}

std::string conv2d_tma_unsupported_reason(const Conv2dAttrs& a, const Conv2dShape& s, const DeviceTraits& device) {
    if (!device.hopper()) return fmt::format("TMA + wgmma needs a 9.0 device, this is {}", device.arch.name());
    if (!detail::is_pointwise(a)) return "the TMA kernel takes 1x1 stride-1 unpadded ungrouped layers";
    if (s.height * s.width % 4)
        return fmt::format("TMA needs OH*OW a multiple of 4 (16-byte rows), this layer has {}", s.height * s.width);
    if (s.c_in % 4)
        return fmt::format("TMA needs C_IN a multiple of 4 (16-byte weight rows), this layer has {}", s.c_in);
    return {};
}

}  // namespace kjit
