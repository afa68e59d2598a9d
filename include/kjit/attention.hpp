// kjit/attention.hpp — fused attention forward (FlashAttention-2's algorithm): O =
// softmax(Q·Kᵀ·scale [+ causal mask])·V and the rows' log-sum-exp, tile by tile with the online
// softmax, never forming the score matrix. f16 or bf16 tensors, fp32 accumulation; head dim
// 64, 96 or 128; grouped-query attention; any sequence lengths. The kernel, its RuntimeOp, the
// dispatch between tile configurations, and a float64 reference.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kjit/cache.hpp>
#include <kjit/device_traits.hpp>
#include <kjit/runtime_op.hpp>

namespace kjit {

class DeviceSpan;  // kjit/driver.hpp

/// How a tensor's dimensions lie in memory: [B, H, S, D] or [B, S, H, D], dense.
enum class AttentionLayout { bhsd, bshd };

/// One attention problem: q [batch, heads, seq, head_dim], k and v [batch, kv_heads, kv_seq,
/// head_dim], o like q, lse [batch, heads, seq]. Query i sees keys j < kv_seq, and only j ≤ i
/// when causal (torch's is_causal: the mask's diagonal starts at the first key, whatever the
/// lengths). Query head h reads key/value head h / (heads / kv_heads).
struct AttentionShape {
    int batch = 1, heads = 1, kv_heads = 1, seq = 1, kv_seq = 1, head_dim = 64;
    bool causal = false;
    Scalar dtype = Scalar::bf16;  ///< f16 or bf16

    /// Throws UsageError naming what no kernel supports (sizes ≥ 1, kv_seq ≥ 0 — no keys gives
    /// O = 0 and LSE = −∞ — head_dim 64, 96 or 128, kv_heads dividing heads, dtype f16 or bf16).
    void validate() const;
    /// Floating-point operations of the two matmuls: 4·B·H·S·SK·D, over the pairs a causal
    /// mask keeps.
    [[nodiscard]] double flops() const;
    /// Query tiles of `block_m` rows over every head and batch entry: the blocks of a grid of a
    /// block a tile, before split-KV's shares.
    [[nodiscard]] long long query_tiles(int block_m) const;
    /// Key tiles of `block_n` keys the longest query row sees (causal: row i sees keys 0 … i):
    /// what split-KV shares out.
    [[nodiscard]] int key_tiles(int block_n) const;
    /// Canonical text (the key of a tuned winner): "b2_h16_hk4_s1024_sk1024_d128_bf16_causal".
    [[nodiscard]] std::string key() const;
    /// The problem as the kernels run it with tensors in `layout`. Without a causal mask, the
    /// heads / kv_heads query heads that read one key/value head run as one head of their
    /// (heads / kv_heads) · seq rows where those rows lie evenly apart ([B, H, S, D], or one query
    /// a head): a block then reads each key tile once for the whole group, not once a query head,
    /// which is what grouped-query decoding costs. Otherwise the problem itself.
    [[nodiscard]] AttentionShape as_run(AttentionLayout layout) const;
    friend bool operator==(const AttentionShape&, const AttentionShape&) = default;
};

/// Element strides of a tensor's batch, head and row (its head dim is contiguous).
struct AttentionStrides {
    std::int64_t batch, head, row;
    /// Those of a dense tensor of `heads` × `seq` rows of `head_dim` in `layout`.
    [[nodiscard]] static AttentionStrides of(AttentionLayout layout, int heads, int seq, int head_dim);
};

/// The problem q, k and v of these shapes (in `layout`'s order) make; UsageError where they do
/// not fit together or no kernel takes them (AttentionShape::validate).
[[nodiscard]] AttentionShape attention_shape(std::span<const ShapeView> qkv, AttentionLayout layout, Scalar dtype,
                                             bool causal);

/// Tile constants of the attention kernels (kernels_src/kjit/attention/): BLOCK_M query rows per
/// block, BLOCK_N keys per step of the pass, and the mainloop: mma.sync (sm_80 and later, 16 rows
/// a warp; flash_attention2_forward) or, with `sm90`, TMA and warpgroup MMAs (sm_90a only, 64
/// rows a consumer warpgroup and a producer warpgroup, head dims 64 and 128;
/// flash_attention2_forward_sm90).
struct AttentionTiles {
    int block_m, block_n;
    bool sm90 = false;
    /// Split-KV: each query tile's keys in this many shares, run by as many blocks, which a
    /// second kernel (flash_attention2_combine) adds up; for problems of few, short query tiles
    /// and many keys (decoding), which would leave most multiprocessors idle. 1 to 16.
    int kv_splits = 1;

    /// Every configuration warm-up, tuning and the across-configuration tests iterate.
    [[nodiscard]] static std::span<const AttentionTiles> configurations();
    [[nodiscard]] unsigned threads() const;
    /// Q, and K and V double-buffered: rows padded by 16 bytes (sm80), or 128-byte-swizzled
    /// tiles aligned to 1024 bytes and the pipeline's mbarriers (sm90).
    [[nodiscard]] unsigned shared_bytes(int head_dim) const;
    /// Why no kernel of these tiles exists at `head_dim` (sm80: multiples of 16, 16 ≤ block_m ≤
    /// 128, block_n ≤ 128; sm90: block_m 64, 128 or 192 — one to three consumer warpgroups —,
    /// block_n 64 or 128, head dim 64 or 128, and not 192 × 128 at 128), or "" where one does.
    [[nodiscard]] std::string unsupported_reason(int head_dim) const;
    /// Throws UsageError with unsupported_reason(), or where shared memory is over `max_shared_bytes`.
    void validate(int head_dim, int max_shared_bytes) const;
    /// The same against a device: also that it runs the mainloop (sm90 tiles need a 9.0 one).
    void validate(int head_dim, const DeviceTraits& device) const;
    friend bool operator==(const AttentionTiles&, const AttentionTiles&) = default;
};

/// How many key shares (AttentionTiles::kv_splits) `tiles` should run `shape` (tensors in
/// `layout`) in on a device with `traits`: 1 where the query tiles (of shape.as_run(layout)) give
/// half the multiprocessors a block or more; else enough blocks for one wave, at most 16, and at
/// most one share per key tile where a head's queries do not fill a query tile (decoding), one
/// per 16 key tiles where they do.
[[nodiscard]] int attention_kv_splits(const AttentionShape& shape, const AttentionTiles& tiles,
                                      const DeviceTraits& traits, AttentionLayout layout = AttentionLayout::bhsd);

/// The attention forward as an op: activations q, k, v in `layout` (shapes in that layout's
/// order), output o in it too, and the log-sum-exp in parameter slot "lse" [B, H, S] (f32).
/// Compiled for one dtype, head dim, causality and tile shape (kernels_src/
/// flash_attention2_forward.cu, or flash_attention2_forward_sm90.cu for sm90 tiles); the sizes
/// come with each call, and the kernel runs the problem as AttentionShape::as_run says (grouped
/// query heads packed into one head's rows). Tiles with kv_splits > 1 make it two launches — the shares, then
/// flash_attention2_combine.cu — and give it a second slot, "partials" [kv_splits, B·H·S,
/// head_dim + 1] (f32), the workspace between them.
class AttentionForwardOp final : public RuntimeOp {
public:
    /// `scale` ≤ 0 means 1/√head_dim. `multiprocessors`, the device's (DeviceTraits::
    /// multiprocessors): sm90 tiles launch a persistent grid of at most that many blocks, each
    /// taking every gridDim-th query tile and loading the next one's Q and keys while it finishes
    /// this one; 0 launches a block a query tile (as sm80 tiles always do). Throws UsageError for
    /// constants no kernel has.
    AttentionForwardOp(Scalar dtype, int head_dim, bool causal, AttentionTiles tiles,
                       AttentionLayout layout = AttentionLayout::bhsd, float scale = 0, int multiprocessors = 0);
    ~AttentionForwardOp() override;

    [[nodiscard]] const Kernel& kernel() const noexcept { return kernel_; }
    [[nodiscard]] Scalar dtype() const noexcept { return dtype_; }
    [[nodiscard]] int head_dim() const noexcept { return head_dim_; }
    [[nodiscard]] bool causal() const noexcept { return causal_; }
    [[nodiscard]] const AttentionTiles& tiles() const noexcept { return tiles_; }
    [[nodiscard]] AttentionLayout layout() const noexcept { return layout_; }
    [[nodiscard]] float scale() const noexcept { return scale_; }
    [[nodiscard]] int multiprocessors() const noexcept { return multiprocessors_; }
    /// The same op — dtype, head dim, causality, layout, scale, multiprocessors — in other tiles
    /// (a tuned winner's).
    [[nodiscard]] std::unique_ptr<AttentionForwardOp> with_tiles(const AttentionTiles& tiles) const;
    /// The problem a call's input shapes make (UsageError where they do not fit this op).
    [[nodiscard]] AttentionShape shape_of(std::span<const ShapeView> input_shapes) const;

    [[nodiscard]] std::size_t n_activation_inputs() const override { return 3; }
    [[nodiscard]] const Kernel& kernel_for_launch(std::size_t launch) const override;
    void pack_args(const OpCall& call, ArgVisitor& visitor) const override;
    /// Throws: the grid depends on k's heads too (grouped query heads are packed); see
    /// grid_for_launch.
    [[nodiscard]] Dims grid(ShapeView output_shape) const override;
    [[nodiscard]] std::size_t n_launches() const override { return tiles_.kv_splits > 1 ? 2 : 1; }
    void pack_args_for_launch(std::size_t launch, const OpCall& call, ArgVisitor& visitor) const override;
    [[nodiscard]] Dims grid_for_launch(std::size_t launch, std::span<const ShapeView> input_shapes,
                                       ShapeView output_shape) const override;
    [[nodiscard]] unsigned shared_bytes_for_launch(std::size_t launch) const override;
    [[nodiscard]] std::vector<Shape> param_shapes(std::span<const ShapeView> input_shapes,
                                                  ShapeView output_shape) const override;
    [[nodiscard]] std::span<const std::string_view> param_names() const override;
    /// lse and partials are the op's to write: no weights file holds them.
    [[nodiscard]] bool param_is_weight(std::size_t) const override { return false; }
    [[nodiscard]] Shape compute_concrete_output_shape(std::span<const ShapeView> input_shapes,
                                                      ShapeView resolved) const override;

private:
    Scalar dtype_;
    int head_dim_;
    bool causal_;
    AttentionTiles tiles_;
    AttentionLayout layout_;
    float scale_;
    int multiprocessors_;
    Kernel kernel_;
    std::optional<Kernel> combine_;  // split-KV's second launch (tiles with kv_splits > 1)
    class MapCache;                  // the Hopper kernel's TMA maps, per call's tensors
    std::unique_ptr<MapCache> maps_;
};

/// The tiles dispatch picks for `shape`, its tensors in `layout`, on a device with `traits`,
/// and why, in a sentence.
[[nodiscard]] AttentionTiles dispatch_attention(const AttentionShape& shape, const DeviceTraits& traits,
                                                AttentionLayout layout = AttentionLayout::bhsd);
[[nodiscard]] std::string attention_dispatch_reason(const AttentionShape& shape, const DeviceTraits& traits,
                                                    AttentionLayout layout = AttentionLayout::bhsd);
/// The key `kjit tune flash_attention2` stores a winner for `shape` in `layout` under:
/// shape.key(), with "_bshd" appended where [B, S, H, D] runs the problem otherwise than [B, H, S,
/// D] does (grouped heads of several queries, which only [B, H, S, D] packs: AttentionShape::as_run).
[[nodiscard]] std::string attention_tuning_key(const AttentionShape& shape, AttentionLayout layout);
/// The tiles that run `shape` on a device named `device_name` under driver `driver`: the winner
/// `kjit tune flash_attention2` stored in `cache` for it (attention_tuning_key) where one holds (timed on this kernel
/// source, fitting the device), else dispatch's. `tuned` says which.
struct AttentionPick {
    AttentionTiles tiles;
    bool tuned = false;
};
[[nodiscard]] AttentionPick pick_attention(const AttentionShape& shape, const DeviceTraits& traits,
                                           const std::string& device_name, const std::string& driver, Cache& cache,
                                           AttentionLayout layout = AttentionLayout::bhsd);
/// "BLOCK_M=128 BLOCK_N=64" (sm80) or "SM90=1 BLOCK_M=128 BLOCK_N=128", with " KV_SPLITS=8"
/// where the keys are split, what `kjit run --config` and tuned winners hold; and back
/// (UsageError for other text).
[[nodiscard]] std::string attention_config(const AttentionTiles& tiles);
[[nodiscard]] AttentionTiles parse_attention_config(std::string_view text);

/// The kernel family's name in tuned winners (both mainloops), and the Hopper kernel's.
inline constexpr std::string_view attention_family = "flash_attention2_forward";
inline constexpr std::string_view attention_sm90_family = "flash_attention2_forward_sm90";
inline constexpr std::string_view attention_combine_family = "flash_attention2_combine";
/// Split-KV's combine kernel for one dtype and head dim (UsageError for others).
[[nodiscard]] Kernel attention_combine_kernel(Scalar dtype, int head_dim);

/// float64 reference of one problem: q, k, v dense [B, H, S, D] as floats (the 16-bit values
/// widened); o [B, H, S, D] and lse [B, H, S] out. scale ≤ 0 means 1/√head_dim. `rows`: the
/// query rows to compute, as (b·H + h)·S + i, o and lse then holding those rows in that order
/// (a check of a large problem samples); empty: every row.
struct AttentionReference {
    std::vector<double> o, lse;
};
[[nodiscard]] AttentionReference attention_reference(const AttentionShape& shape, std::span<const float> q,
                                                     std::span<const float> k, std::span<const float> v,
                                                     float scale = 0, std::span<const std::size_t> rows = {});

/// A forward's outputs against the float64 reference: ‖o − ref‖/‖ref‖ over the rows the
/// reference holds, the largest log-sum-exp error (a row that saw no key must hold −∞), and the
/// outputs never written (the caller NaN-poisons them before the run), over the whole output.
struct AttentionCheck {
    double error = 0, lse_error = 0;
    double tolerance = 0;                          ///< on `error`: attention_tolerance(dtype)
    std::size_t rows = 0;                          ///< rows compared
    std::size_t unwritten = 0;                     ///< O elements not finite, LSE elements NaN
    static constexpr double lse_tolerance = 2e-4;  ///< absolute: the log of an fp32 sum
    [[nodiscard]] bool passed() const noexcept {
        return unwritten == 0 && error <= tolerance && lse_error <= lse_tolerance;
    }
    /// What is wrong, in words ("" where nothing is).
    [[nodiscard]] std::string faults() const;
};
/// The error a 16-bit O may have against float64: 2e-3 (f16), 8e-3 (bf16).
[[nodiscard]] double attention_tolerance(Scalar dtype);
/// `o` ([B, H, S, D] floats, widened from the dtype) and `lse` ([B, H, S]) as a forward wrote
/// them, against `ref` as attention_reference computed it for `rows` (empty: every row).
[[nodiscard]] AttentionCheck check_attention(const AttentionShape& shape, std::span<const float> o,
                                             std::span<const float> lse, const AttentionReference& ref,
                                             std::span<const std::size_t> rows = {});

/// A [B, H, S, D] tensor of floats (`heads` × `seq` rows of `head_dim` per batch entry) as the
/// 16-bit values a device tensor in `layout` holds, and back: how hosts fill and read them.
[[nodiscard]] std::vector<std::uint16_t> to_attention_layout(std::span<const float> bhsd, int heads, int seq,
                                                             int head_dim, AttentionLayout layout, Scalar dtype);
[[nodiscard]] std::vector<float> from_attention_layout(std::span<const std::uint16_t> stored, int heads, int seq,
                                                       int head_dim, AttentionLayout layout, Scalar dtype);

/// f32 ↔ 16-bit storage (round to nearest even), how hosts fill and read f16 / bf16 tensors.
[[nodiscard]] std::uint16_t to_16bit(float x, Scalar dtype);
[[nodiscard]] float from_16bit(std::uint16_t bits, Scalar dtype);
/// `host.size()` values of `type` (f32, f16 or bf16) from the start of `from`, as floats; 16-bit
/// ones land in `host` and are widened there (no temporary). UsageError for other types.
void download_as_f32(const DeviceSpan& from, Scalar type, std::span<float> host);

}  // namespace kjit
