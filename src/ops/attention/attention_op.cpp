// The attention forward as a RuntimeOp (kjit/attention.hpp): the problem, the tile
// configurations, and how a call's tensors become kernels_src/flash_attention2_forward.cu's
// arguments.
#include <kjit/attention.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/op_checks.hpp"
#include "ops/tensor_map_cache.hpp"

namespace kjit {

using detail::as_i32;
using detail::non_null;
using detail::require;

namespace {
bool is_16bit(Scalar s) { return s == Scalar::f16 || s == Scalar::bf16; }
bool supported_head_dim(int d) { return d == 64 || d == 96 || d == 128; }
constexpr int max_grid_yz = 65535;  // heads and batch × key shares are the grid's y and z
constexpr int max_kv_splits = 16;
}  // namespace

// ---- the problem ------------------------------------------------------------------------------------

void AttentionShape::validate() const {
    require(batch >= 1 && heads >= 1 && kv_heads >= 1 && seq >= 1 && kv_seq >= 0,
            "attention sizes must be positive (kv_seq may be 0): batch {} heads {} kv_heads {} seq {} kv_seq {}", batch,
            heads, kv_heads, seq, kv_seq);
    require(heads % kv_heads == 0,
            "kv_heads {} must divide heads {}: each key/value head serves heads / kv_heads query heads", kv_heads,
            heads);
    require(supported_head_dim(head_dim), "head_dim {} has no kernel: use 64, 96 or 128", head_dim);
    require(is_16bit(dtype), "attention takes f16 or bf16 tensors, not {}", short_name(dtype));
    require(heads <= max_grid_yz && batch <= max_grid_yz, "heads {} and batch {} must each be at most {}", heads, batch,
            max_grid_yz);
}

double AttentionShape::flops() const {
    double pairs = static_cast<double>(seq) * kv_seq;  // (query, key) pairs computed
    if (causal) {                                      // query i sees min(i + 1, kv_seq) keys
        const double full = std::min(seq, kv_seq);
        pairs = full * (full + 1) / 2 + static_cast<double>(std::max(0, seq - kv_seq)) * kv_seq;
    }
    return 4.0 * batch * heads * pairs * head_dim;
}

long long AttentionShape::query_tiles(int block_m) const { return ceil_div<long long>(seq, block_m) * heads * batch; }

int AttentionShape::key_tiles(int block_n) const {
    const int keys = causal ? std::min(seq, kv_seq) : kv_seq;  // the last row's, which sees the most
    return ceil_div(keys, block_n);
}

std::string AttentionShape::key() const {
    return fmt::format("b{}_h{}_hk{}_s{}_sk{}_d{}_{}{}", batch, heads, kv_heads, seq, kv_seq, head_dim,
                       short_name(dtype), causal ? "_causal" : "");
}

AttentionShape AttentionShape::as_run(AttentionLayout layout) const {
    const int group = heads / kv_heads;
    // Not packed: under a causal mask (it needs each row's own query index), where a group's rows
    // g·S + i do not lie a row apart ([B, S, H, D] with several queries), or past an int of rows.
    const bool rows_even = seq == 1 || layout == AttentionLayout::bhsd;
    if (causal || group == 1 || !rows_even || std::int64_t{group} * seq > std::numeric_limits<int>::max()) return *this;
    AttentionShape run = *this;
    run.heads = kv_heads;
    run.seq = group * seq;
    return run;
}

AttentionStrides AttentionStrides::of(AttentionLayout layout, int heads, int seq, int head_dim) {
    const std::int64_t h = heads, s = seq, d = head_dim;
    if (layout == AttentionLayout::bshd) return {s * h * d, d, h * d};
    return {h * s * d, s * d, d};
}

// ---- tiles ---------------------------------------------------------------------------------------------

std::span<const AttentionTiles> AttentionTiles::configurations() {
    static constexpr AttentionTiles all[] = {{64, 64},         {64, 128},       {128, 32},
                                             {128, 64},        {128, 128},      {128, 64, true},
                                             {128, 128, true}, {192, 64, true}, {192, 128, true}};
    return all;
}

unsigned AttentionTiles::threads() const {
    // sm90: a consumer warpgroup per 64 rows and the producer; sm80: a warp per 16 rows.
    return static_cast<unsigned>(sm90 ? (block_m / 64 + 1) * 128 : block_m / 16 * 32);
}

unsigned AttentionTiles::shared_bytes(int head_dim) const {
    // sm90 (kjit/attention/mainloop_sm90.cuh): alignment slack, two Q tiles, 12 mbarriers of 8 bytes.
    if (sm90) return static_cast<unsigned>(1024 + (2 * block_m + 4 * block_n) * head_dim * 2 + 8 * 12);
    return static_cast<unsigned>((block_m + 4 * block_n) * (head_dim + 8) * 2);
}

std::string AttentionTiles::unsupported_reason(int head_dim) const {
    if (!supported_head_dim(head_dim)) return fmt::format("head_dim {} has no kernel: use 64, 96 or 128", head_dim);
    if (kv_splits < 1 || kv_splits > max_kv_splits)
        return fmt::format("KV_SPLITS={}: the keys split into 1 to {} shares", kv_splits, max_kv_splits);
    if (!sm90) {
        if (block_m % 16 == 0 && block_n % 16 == 0 && block_m >= 16 && block_n >= 16 && block_m <= 128 &&
            block_n <= 128)
            return {};
        return fmt::format("attention tiles BLOCK_M={} BLOCK_N={}: both must be multiples of 16 from 16 to 128",
                           block_m, block_n);
    }
    if ((block_m != 64 && block_m != 128 && block_m != 192) || (block_n != 64 && block_n != 128) || head_dim % 64 != 0)
        return fmt::format(
            "Hopper attention tiles {} at head_dim {}: BLOCK_M must be 64, 128 or 192, BLOCK_N 64 or 128 and "
            "head_dim 64 or 128 (the sm80 tiles take head_dim 96)",
            attention_config(*this), head_dim);
    // Three consumer warpgroups have 160 registers a thread: O, S and P of 128 × 128 do not fit.
    if (block_m == 192 && block_n == 128 && head_dim == 128)
        return fmt::format(
            "Hopper attention tiles {} at head_dim 128: three consumer warpgroups have too few registers for 128 "
            "keys a step at this head dim; use BLOCK_N=64, or BLOCK_M=128",
            attention_config(*this));
    return {};
}

void AttentionTiles::validate(int head_dim, int max_shared_bytes) const {
    if (auto why = unsupported_reason(head_dim); !why.empty()) throw UsageError(why);
    require(shared_bytes(head_dim) <= static_cast<unsigned>(max_shared_bytes),
            "attention tiles {} at head_dim {} need {} bytes of shared memory, over the device's {}: use smaller tiles",
            attention_config(*this), head_dim, shared_bytes(head_dim), max_shared_bytes);
}

void AttentionTiles::validate(int head_dim, const DeviceTraits& device) const {
    require(!sm90 || device.hopper(),
            "attention tiles {} run the wgmma mainloop, which needs a 9.0 device (sm_90a); "
            "this one is {}: use tiles without SM90=1",
            attention_config(*this), device.arch.name());
    validate(head_dim, device.max_shared_bytes);
}

std::string attention_config(const AttentionTiles& t) {
    return fmt::format("{}BLOCK_M={} BLOCK_N={}{}", t.sm90 ? "SM90=1 " : "", t.block_m, t.block_n,
                       t.kv_splits != 1 ? fmt::format(" KV_SPLITS={}", t.kv_splits) : "");
}

AttentionTiles parse_attention_config(std::string_view text) {
    const bool sm90 = text.starts_with("SM90=1 ");
    const std::string rest(sm90 ? text.substr(7) : text);
    AttentionTiles t{0, 0, sm90};
    const int read = std::sscanf(rest.c_str(), "BLOCK_M=%d BLOCK_N=%d KV_SPLITS=%d", &t.block_m, &t.block_n,
                                 &t.kv_splits);
    if (read < 2 || attention_config(t) != text)
        throw UsageError(fmt::format(
            "attention configuration '{}' is not '[SM90=1] BLOCK_M=<rows> BLOCK_N=<keys> [KV_SPLITS=<shares>]' "
            "(e.g. {}, or {} on Hopper)",
            text, attention_config({128, 64}), attention_config({128, 128, true})));
    return t;
}

// ---- the op --------------------------------------------------------------------------------------------

namespace {
/// The kernel of these constants; UsageError for constants no kernel has. The sm80 kernel reads
/// q, k and v through pointers and strides, the sm90 one through TMA maps.
Kernel attention_kernel(Scalar dtype, int head_dim, bool causal, AttentionTiles tiles) {
    AttentionShape{.head_dim = head_dim, .dtype = dtype}.validate();
    tiles.validate(head_dim, std::numeric_limits<int>::max());  // the device's limit is checked at dispatch
    const ParamType t{dtype, true};
    std::vector<Param> params;
    const auto strides_of = [&](const char* tensor) {
        for (const char* dim : {"batch", "head", "row"})
            params.push_back({fmt::format("{}_{}", tensor, dim), {Scalar::i64}});
    };
    if (tiles.sm90)
        params = {{"q_map", {Scalar::tensor_map}}, {"k_map", {Scalar::tensor_map}}, {"v_map", {Scalar::tensor_map}}};
    else params = {{"q", t}, {"k", t}, {"v", t}};
    params.push_back({"o", t});
    params.push_back({"lse", {Scalar::f32, true}});
    params.push_back({"partials", {Scalar::f32, true}});
    if (tiles.sm90) params.push_back({"batch", {Scalar::i32}});
    for (const char* n : {"heads", "kv_heads", "seq", "kv_seq", "kv_splits"}) params.push_back({n, {Scalar::i32}});
    params.push_back({"scale", {Scalar::f32}});
    if (!tiles.sm90)
        for (const char* tensor : {"q", "k", "v"}) strides_of(tensor);
    strides_of("o");
    KernelSpec spec{std::string(tiles.sm90 ? attention_sm90_family : attention_family),
                    {{"DTYPE", dtype},
                     {"BLOCK_M", std::int64_t{tiles.block_m}},
                     {"BLOCK_N", std::int64_t{tiles.block_n}},
                     {"HEAD_DIM", std::int64_t{head_dim}},
                     {"CAUSAL", causal}},
                    std::move(params),
                    tiles.threads()};
    // One block a multiprocessor, promised: ptxas then caps registers at a block's share (what
    // setmaxnreg moves on Hopper) and no lower — without it, it held some sm80 tiles to 128 a
    // thread and spilled.
    spec.min_blocks_per_multiprocessor = 1;
    if (tiles.sm90) spec.only_for = Arch::parse("sm_90a");  // TMA, wgmma, setmaxnreg
    return Kernel(std::move(spec));
}

}  // namespace

Kernel attention_combine_kernel(Scalar dtype, int head_dim) {
    AttentionShape{.head_dim = head_dim, .dtype = dtype}.validate();
    const ParamType t{dtype, true};
    std::vector<Param> params{{"partials", {Scalar::f32, true}}, {"o", t}, {"lse", {Scalar::f32, true}}};
    for (const char* n : {"heads", "seq", "kv_splits"}) params.push_back({n, {Scalar::i32}});
    for (const char* n : {"rows", "o_batch", "o_head", "o_row"}) params.push_back({n, {Scalar::i64}});
    return Kernel(KernelSpec{std::string(attention_combine_family),
                             {{"DTYPE", dtype}, {"HEAD_DIM", std::int64_t{head_dim}}},
                             std::move(params)});
}

namespace {
/// What a Hopper call's maps depend on: the tensors and the problem.
struct MapPlan {
    const void *q, *k, *v;
    AttentionShape shape;
    [[nodiscard]] bool same_maps(const MapPlan& o) const {
        return q == o.q && k == o.k && v == o.v && shape == o.shape;
    }
};

/// A map over `heads` × `rows` rows of one tensor, strided as `e` says: dims {D, rows, heads,
/// batch}, boxes of 64 columns (one 128-byte swizzled row) × `box_rows`.
TensorMap attention_map(const void* base, const AttentionShape& s, int heads, int rows, unsigned box_rows,
                        const AttentionStrides& e) {
    const std::uint64_t dims[] = {static_cast<std::uint64_t>(s.head_dim),
                                  static_cast<std::uint64_t>(std::max(rows, 1)),  // no keys: never read
                                  static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(s.batch)};
    const std::uint64_t strides[] = {static_cast<std::uint64_t>(e.row) * 2, static_cast<std::uint64_t>(e.head) * 2,
                                     static_cast<std::uint64_t>(e.batch) * 2};
    const std::uint32_t box[] = {64, box_rows, 1, 1};
    return TiledTensorMap{base,
                          dims,
                          strides,
                          box,
                          TensorMapSwizzle::bytes_128,
                          s.dtype == Scalar::f16 ? TensorMapElement::f16 : TensorMapElement::bf16}
        .encode();
}

struct CallMaps {
    MapPlan plan;
    TensorMap q, k, v;
};

/// q's (and o's) strides as the kernel reads them for `run` = s.as_run(layout): a packed group's
/// rows g·S + i lie a row apart in [B, H, S, D] (a head is S rows), or a head apart with one query.
AttentionStrides run_strides(const AttentionShape& s, const AttentionShape& run, AttentionLayout layout) {
    const AttentionStrides q = AttentionStrides::of(layout, s.heads, s.seq, s.head_dim);
    if (run.heads == s.heads) return q;
    const std::int64_t group = s.heads / s.kv_heads;
    return {q.batch, group * q.head, s.seq == 1 ? q.head : q.row};
}
}  // namespace

class AttentionForwardOp::MapCache : public detail::TensorMapCache<MapPlan, CallMaps> {};

AttentionForwardOp::AttentionForwardOp(Scalar dtype, int head_dim, bool causal, AttentionTiles tiles,
                                       AttentionLayout layout, float scale, int multiprocessors)
    : dtype_(dtype),
      head_dim_(head_dim),
      causal_(causal),
      tiles_(tiles),
      layout_(layout),
      scale_(scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim))),
      multiprocessors_(multiprocessors),
      kernel_(attention_kernel(dtype, head_dim, causal, tiles)),
      combine_(tiles.kv_splits > 1 ? std::optional(attention_combine_kernel(dtype, head_dim)) : std::nullopt),
      maps_(std::make_unique<MapCache>()) {
    require(multiprocessors >= 0,
            "attention's multiprocessors {} must be the device's count (DeviceTraits::multiprocessors), or 0 for a "
            "block a query tile",
            multiprocessors);
}

AttentionForwardOp::~AttentionForwardOp() = default;

std::unique_ptr<AttentionForwardOp> AttentionForwardOp::with_tiles(const AttentionTiles& tiles) const {
    return std::make_unique<AttentionForwardOp>(dtype_, head_dim_, causal_, tiles, layout_, scale_, multiprocessors_);
}

AttentionShape attention_shape(std::span<const ShapeView> in, AttentionLayout layout, Scalar dtype, bool causal) {
    require(in.size() == 3, "attention takes 3 inputs (q, k, v), {} given", in.size());
    const char* order = layout == AttentionLayout::bhsd ? "[B, H, S, D]" : "[B, S, H, D]";
    for (std::size_t i = 0; i < 3; ++i)
        require(in[i].size() == 4, "attention input {} must be {} (4 dimensions), got [{}]", "qkv"[i], order,
                fmt::join(in[i], ", "));
    const auto dims = [&](ShapeView s) {  // batch, heads, seq, head dim
        return layout == AttentionLayout::bhsd ? std::array{s[0], s[1], s[2], s[3]}
                                               : std::array{s[0], s[2], s[1], s[3]};
    };
    const auto q = dims(in[0]), k = dims(in[1]), v = dims(in[2]);
    require(k == v, "attention k and v must have one shape {}: k is [{}], v is [{}]", order, fmt::join(in[1], ", "),
            fmt::join(in[2], ", "));
    require(q[0] == k[0] && q[3] == k[3], "attention q [{}] and k [{}] must agree on batch and head dim ({})",
            fmt::join(in[0], ", "), fmt::join(in[1], ", "), order);
    AttentionShape s{as_i32(q[0], "batch"),
                     as_i32(q[1], "heads"),
                     as_i32(k[1], "kv_heads"),
                     as_i32(q[2], "seq"),
                     as_i32(k[2], "kv_seq"),
                     as_i32(q[3], "head_dim"),
                     causal,
                     dtype};
    s.validate();
    return s;
}

AttentionShape AttentionForwardOp::shape_of(std::span<const ShapeView> in) const {
    const AttentionShape s = attention_shape(in, layout_, dtype_, causal_);
    require(s.head_dim == head_dim_, "this attention op was built for head_dim {}, q has {}", head_dim_, s.head_dim);
    return s;
}

Shape AttentionForwardOp::compute_concrete_output_shape(std::span<const ShapeView> in, ShapeView) const {
    (void)shape_of(in);
    return Shape(in[0].begin(), in[0].end());
}

std::vector<Shape> AttentionForwardOp::param_shapes(std::span<const ShapeView> in, ShapeView) const {
    const AttentionShape s = shape_of(in);
    const auto b = static_cast<std::size_t>(s.batch), h = static_cast<std::size_t>(s.heads),
               q = static_cast<std::size_t>(s.seq);
    std::vector<Shape> shapes{{b, h, q}};
    if (tiles_.kv_splits > 1)
        shapes.push_back(
            {static_cast<std::size_t>(tiles_.kv_splits), b * h * q, static_cast<std::size_t>(head_dim_) + 1});
    return shapes;
}

std::span<const std::string_view> AttentionForwardOp::param_names() const {
    static constexpr std::string_view names[] = {"lse", "partials"};
    return std::span(names).first(tiles_.kv_splits > 1 ? 2 : 1);
}

const Kernel& AttentionForwardOp::kernel_for_launch(std::size_t launch) const {
    require(launch < n_launches(), "attention tiles {} have {} launches, not {}", attention_config(tiles_),
            n_launches(), launch + 1);
    return launch == 0 ? kernel_ : *combine_;
}

Dims AttentionForwardOp::grid(ShapeView) const {
    throw UsageError(
        "the attention grid depends on k's heads as well as o's shape (grouped query heads run packed): call "
        "grid_for_launch(0, input_shapes, output_shape)");
}

Dims AttentionForwardOp::grid_for_launch(std::size_t launch, std::span<const ShapeView> in, ShapeView out) const {
    if (launch == 0) {  // the query tiles of the (packed) heads, batch entries and key shares
        const AttentionShape run = shape_of(in).as_run(layout_);
        if (tiles_.sm90) {  // kjit/attention/tile_scheduler.cuh: every gridDim.x-th query tile a block
            const long long tiles = run.query_tiles(tiles_.block_m) * tiles_.kv_splits;
            require(tiles <= INT32_MAX,
                    "attention of {} query tiles of {} rows is over the kernel's {}: split the batch", tiles,
                    tiles_.block_m, INT32_MAX);
            return {static_cast<unsigned>(multiprocessors_ > 0 ? std::min<long long>(tiles, multiprocessors_) : tiles),
                    1, 1};
        }
        return {static_cast<unsigned>(ceil_div(run.seq, tiles_.block_m)), static_cast<unsigned>(run.heads),
                static_cast<unsigned>(run.batch * tiles_.kv_splits)};
    }
    const std::size_t rows = element_count(out) / static_cast<std::size_t>(head_dim_);  // a warp a row
    return {static_cast<unsigned>(ceil_div<std::size_t>(rows, block()[0] / 32)), 1, 1};
}

unsigned AttentionForwardOp::shared_bytes_for_launch(std::size_t launch) const {
    return launch == 0 ? tiles_.shared_bytes(head_dim_) : 0;
}

void AttentionForwardOp::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    require(call.inputs.size() == 3, "attention takes 3 inputs (q, k, v), {} given", call.inputs.size());
    const std::array<ShapeView, 3> shapes{call.inputs[0].shape, call.inputs[1].shape, call.inputs[2].shape};
    const AttentionShape s = shape_of(shapes);
    require(std::ranges::equal(call.output_shape, shapes[0]), "attention output o [{}] must have q's shape [{}]",
            fmt::join(call.output_shape, ", "), fmt::join(shapes[0], ", "));
    require(call.output_row_stride == head_dim_ && call.output_image_stride == 0,
            "attention writes dense rows of head_dim {}: output_row_stride {} and image stride {} are not", head_dim_,
            call.output_row_stride, call.output_image_stride);
    for (std::size_t i = 0; i < 3; ++i)
        require(
            call.inputs[i].image_stride == 0 || call.inputs[i].image_stride == element_count(shapes[i]) / shapes[i][0],
            "attention input {} must be dense: image stride {} given", "qkv"[i], call.inputs[i].image_stride);
    const std::size_t slots = param_names().size();
    require(call.params.size() == slots, "attention tiles {} take {} parameter slots ({}), {} given",
            attention_config(tiles_), slots, fmt::join(param_names(), ", "), call.params.size());
    require(s.batch * tiles_.kv_splits <= max_grid_yz,
            "attention batch {} × KV_SPLITS={} must be at most {} (the grid's z): use fewer shares", s.batch,
            tiles_.kv_splits, max_grid_yz);
    const auto aligned = [](const void* p, const char* what) {
        require(reinterpret_cast<std::uintptr_t>(non_null(const_cast<void*>(p), what)) % 16 == 0,
                "attention {} must be 16-byte aligned (the kernel moves 16-byte pieces of rows)", what);
    };
    aligned(call.inputs[0].data, "q");
    aligned(call.inputs[1].data, "k");
    aligned(call.inputs[2].data, "v");
    aligned(call.output, "o");
    const AttentionShape run = s.as_run(layout_);
    const AttentionStrides q = run_strides(s, run, layout_);
    const AttentionStrides kv = AttentionStrides::of(layout_, s.kv_heads, s.kv_seq, head_dim_);
    if (tiles_.sm90) {
        const MapPlan plan{call.inputs[0].data, call.inputs[1].data, call.inputs[2].data, s};
        const auto& maps = maps_->get(plan, [&](const MapPlan& p) {
            const auto box_m = static_cast<unsigned>(tiles_.block_m), box_n = static_cast<unsigned>(tiles_.block_n);
            return CallMaps{p, attention_map(p.q, s, run.heads, run.seq, box_m, q),
                            attention_map(p.k, s, s.kv_heads, s.kv_seq, box_n, kv),
                            attention_map(p.v, s, s.kv_heads, s.kv_seq, box_n, kv)};
        });
        visitor.visit_tensor_map(maps.q);
        visitor.visit_tensor_map(maps.k);
        visitor.visit_tensor_map(maps.v);
    } else {
        for (std::size_t i = 0; i < 3; ++i) visitor.visit_ptr(call.inputs[i].data);
    }
    visitor.visit_ptr(call.output);
    visitor.visit_ptr(non_null(call.params[0], "lse"));
    visitor.visit_ptr(tiles_.kv_splits > 1 ? non_null(call.params[1], "partials") : nullptr);
    if (tiles_.sm90) visitor.visit_i32(run.batch);
    for (int v : {run.heads, run.kv_heads, run.seq, run.kv_seq, tiles_.kv_splits}) visitor.visit_i32(v);
    visitor.visit_f32(scale_);
    const auto strides = [&](const AttentionStrides& t) {
        visitor.visit_i64(t.batch);
        visitor.visit_i64(t.head);
        visitor.visit_i64(t.row);
    };
    if (!tiles_.sm90)
        for (const AttentionStrides& t : {q, kv, kv}) strides(t);
    strides(q);  // o
}

void AttentionForwardOp::pack_args_for_launch(std::size_t launch, const OpCall& call, ArgVisitor& visitor) const {
    if (launch == 0) return pack_args(call, visitor);
    // The combine: the shares into o and lse.
    const std::array<ShapeView, 3> shapes{call.inputs[0].shape, call.inputs[1].shape, call.inputs[2].shape};
    const AttentionShape s = shape_of(shapes), run = s.as_run(layout_);
    const AttentionStrides o = run_strides(s, run, layout_);
    visitor.visit_ptr(non_null(call.params[1], "partials"));
    visitor.visit_ptr(call.output);
    visitor.visit_ptr(non_null(call.params[0], "lse"));
    for (int v : {run.heads, run.seq, tiles_.kv_splits}) visitor.visit_i32(v);
    visitor.visit_i64(std::int64_t{s.batch} * s.heads * s.seq);
    visitor.visit_i64(o.batch);
    visitor.visit_i64(o.head);
    visitor.visit_i64(o.row);
}

}  // namespace kjit
