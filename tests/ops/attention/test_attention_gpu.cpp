// The attention kernels on a GPU against the float64 reference: every shipped configuration the
// device runs (both mainloops on a 9.0 device; both dtypes, head dims 64, 96 and 128, causal and
// not), each whole and with its keys split in 3 shares (split-KV and its combine), ragged
// lengths, grouped heads, one query, no keys, both layouts; outputs NaN-poisoned with a guard
// past their end.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include <kjit/attention.hpp>
#include <kjit/registry.hpp>

#include "support.hpp"

using namespace kjit;

namespace {

/// Random values rounded to the dtype, as floats: what the kernel and the reference both read.
std::vector<float> random_16bit(std::size_t n, Scalar dtype, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = from_16bit(to_16bit(normal(rng), dtype), dtype);
    return v;
}

struct Outcome {
    AttentionCheck check;
    bool guard_intact = true;  // nothing written past o's and lse's ends
};

/// Runs `op` on fresh random tensors of `s` and compares with the reference.
Outcome run_and_check(const AttentionForwardOp& op, const AttentionShape& s, const Device& device, const Stream& stream,
                      std::mt19937& rng) {
    const int B = s.batch, H = s.heads, HK = s.kv_heads, S = s.seq, SK = s.kv_seq, D = s.head_dim;
    const AttentionLayout layout = op.layout();
    const auto q = random_16bit(std::size_t(B) * H * S * D, s.dtype, rng);
    const auto k = random_16bit(std::size_t(B) * HK * SK * D, s.dtype, rng);
    const auto v = random_16bit(std::size_t(B) * HK * SK * D, s.dtype, rng);
    const auto ref = attention_reference(s, q, k, v);

    constexpr std::size_t guard = 64;  // elements past o's and lse's end that must stay poisoned
    const auto upload = [&](const std::vector<std::uint16_t>& host) {
        DeviceBuffer d(device, std::max<std::size_t>(16, host.size() * 2));
        if (!host.empty()) d.upload(std::span<const std::uint16_t>(host));
        return d;
    };
    DeviceBuffer dq = upload(to_attention_layout(q, H, S, D, layout, s.dtype));
    DeviceBuffer dk = upload(to_attention_layout(k, HK, SK, D, layout, s.dtype));
    DeviceBuffer dv = upload(to_attention_layout(v, HK, SK, D, layout, s.dtype));
    DeviceBuffer dout(device, (q.size() + guard) * 2), dlse(device, (std::size_t(B) * H * S + guard) * 4);
    dout.fill(0xff);  // NaN in f16 and bf16
    dlse.fill(0xff);  // NaN
    const Shape q_shape = layout == AttentionLayout::bhsd
                              ? Shape{std::size_t(B), std::size_t(H), std::size_t(S), std::size_t(D)}
                              : Shape{std::size_t(B), std::size_t(S), std::size_t(H), std::size_t(D)};
    const Shape kv_shape = layout == AttentionLayout::bhsd
                               ? Shape{std::size_t(B), std::size_t(HK), std::size_t(SK), std::size_t(D)}
                               : Shape{std::size_t(B), std::size_t(SK), std::size_t(HK), std::size_t(D)};
    const Tensor in[] = {{dq.as<void>(), q_shape}, {dk.as<void>(), kv_shape}, {dv.as<void>(), kv_shape}};
    const ShapeView shapes[] = {q_shape, kv_shape, kv_shape};
    const std::vector<Shape> slots = op.param_shapes(shapes, q_shape);
    DeviceBuffer partials(device, slots.size() > 1 ? element_count(slots[1]) * 4 : 16);  // split-KV's workspace
    partials.fill(0xff);
    void* const params[] = {dlse.as<void>(), partials.as<void>()};
    op.forward(Runtime::global(), stream, {in, std::span(params).first(slots.size()), dout.as<void>(), q_shape, D});
    stream.synchronize();

    std::vector<std::uint16_t> o(q.size() + guard);
    std::vector<float> lse(std::size_t(B) * H * S + guard);
    dout.download(std::span<std::uint16_t>(o));
    dlse.download(std::span<float>(lse));
    Outcome r;
    const auto got = from_attention_layout(std::span(o).first(q.size()), H, S, D, layout, s.dtype);
    r.check = check_attention(s, got, std::span(lse).first(std::size_t(B) * H * S), ref);
    for (std::size_t i = q.size(); i < o.size(); ++i) r.guard_intact = r.guard_intact && o[i] == 0xffff;
    for (std::size_t i = std::size_t(B) * H * S; i < lse.size(); ++i)
        r.guard_intact = r.guard_intact && std::isnan(lse[i]);
    return r;
}

}  // namespace

TEST_CASE("flash_attention2_forward matches float64 on every configuration: ragged, grouped, causal, one query") {
    const auto device = Device::get(0);
    const DeviceTraits traits = DeviceTraits::of(device);
    if (traits.arch.number() < 80) {
        MESSAGE("skipped: the attention kernel needs sm_80 or newer, this device is " << traits.arch.name());
        return;
    }
    Stream stream(device);
    std::mt19937 rng{std::random_device{}()};
    struct Case {
        int batch, heads, kv_heads, seq, kv_seq;
    };
    // Without a causal mask the grouped heads run packed (AttentionShape::as_run): 4 heads of one
    // query in either layout, 3 of 5 queries in [B, H, S, D], 8 of 33 across query tiles.
    const Case cases[] = {{1, 1, 1, 1, 1},    {2, 4, 2, 77, 77}, {1, 2, 1, 130, 200}, {1, 3, 3, 200, 65},
                          {2, 8, 1, 33, 129}, {1, 2, 2, 1, 300}, {1, 2, 1, 40, 0},    {1, 2, 1, 700, 700},
                          {2, 8, 2, 1, 300},  {1, 6, 2, 5, 150}};
    int ran = 0, index = 0;
    for (const Scalar dtype : {Scalar::f16, Scalar::bf16})
        for (const int d : {64, 96, 128})
            for (const bool causal : {false, true})
                for (const AttentionTiles& tiles : test::configurations_to_test(AttentionTiles::configurations())) {
                    try {  // the tiles this device runs at this head dim (the Hopper ones on a 9.0 device)
                        tiles.validate(d, traits);
                    } catch (const UsageError&) {
                        continue;
                    }
                    const auto layout = index % 2 ? AttentionLayout::bshd : AttentionLayout::bhsd;
                    // Hopper tiles: a persistent grid of 3 blocks, each taking many query tiles, or the device's.
                    const int multiprocessors = index++ / 2 % 2 ? 3 : traits.multiprocessors;
                    for (const int splits : {1, 3}) {  // whole, and the keys in 3 shares (split-KV)
                        AttentionTiles split = tiles;
                        split.kv_splits = splits;
                        const AttentionForwardOp op(dtype, d, causal, split, layout, 0, multiprocessors);
                        for (const Case& c : cases) {
                            const AttentionShape s{c.batch, c.heads, c.kv_heads, c.seq, c.kv_seq, d, causal, dtype};
                            CAPTURE(op.kernel().id());
                            CAPTURE(attention_config(split));
                            CAPTURE(s.key());
                            CAPTURE(layout == AttentionLayout::bshd);
                            const Outcome r = run_and_check(op, s, device, stream, rng);
                            CHECK(r.check.unwritten == 0);
                            CHECK(r.guard_intact);
                            CHECK(r.check.error <= r.check.tolerance);
                            CHECK(r.check.lse_error <= AttentionCheck::lse_tolerance);  // −∞ where a row saw no key
                            ++ran;
                        }
                    }
                }
    CHECK(ran >= 2 * 7);
}

TEST_CASE("attention with no keys: O is 0 and the log-sum-exp is minus infinity, every row written") {
    const auto device = Device::get(0);
    const DeviceTraits traits = DeviceTraits::of(device);
    if (traits.arch.number() < 80) return;
    Stream stream(device);
    std::mt19937 rng{std::random_device{}()};
    for (const AttentionTiles tiles : {AttentionTiles{64, 64}, AttentionTiles{128, 128, true},
                                       AttentionTiles{64, 64, false, 2}, AttentionTiles{128, 128, true, 2}}) {
        if (tiles.sm90 && !traits.hopper()) continue;
        CAPTURE(attention_config(tiles));
        const AttentionForwardOp op(Scalar::bf16, 128, true, tiles, AttentionLayout::bhsd, 0, 3);  // 3 blocks
        const Outcome r = run_and_check(
            op, {.batch = 2, .heads = 4, .kv_heads = 2, .seq = 70, .kv_seq = 0, .head_dim = 128, .causal = true},
            device, stream, rng);
        CHECK(r.check.unwritten == 0);
        CHECK(r.check.lse_error == 0.0);  // every row −∞
        CHECK(r.guard_intact);
        CHECK(r.check.error == 0.0);
    }
}
