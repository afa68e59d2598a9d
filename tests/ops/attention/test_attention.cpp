// The attention op without a GPU: the problem's checks, tiles, dispatch, how a call's tensors
// become the kernel's arguments, the float64 reference on cases worked by hand, the host's
// 16-bit conversions, which key tiles a block and a Hopper consumer warpgroup visit
// (kjit/attention/key_tiles.cuh, the kernels' own definition), which query tiles a persistent
// block takes (kjit/attention/persistent_schedule.cuh, likewise), and every shipped configuration
// through NVRTC.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <kjit/attention.hpp>
#include <kjit/compile.hpp>
#include <kjit/registry.hpp>
#include <kjit/tuning.hpp>

#include "kjit/attention/key_tiles.cuh"
#include "kjit/attention/persistent_schedule.cuh"
#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::error_of;
using test::fake;

namespace {
bool says(const std::string& message, std::string_view part) {
    CAPTURE(message);
    return message.find(part) != std::string::npos;
}
const DeviceTraits h100{132, 232448, Arch(9, 0)};
const DeviceTraits a6000{84, 101376, Arch(8, 6)};
const DeviceTraits a100{108, 166912, Arch(8, 0)};
}  // namespace

TEST_CASE("an attention problem says what no kernel supports, and counts its work") {
    AttentionShape s{.batch = 2, .heads = 8, .kv_heads = 2, .seq = 100, .kv_seq = 300, .head_dim = 128};
    CHECK_NOTHROW(s.validate());
    CHECK(s.key() == "b2_h8_hk2_s100_sk300_d128_bf16");
    CHECK(s.flops() == doctest::Approx(4.0 * 2 * 8 * 100 * 300 * 128));
    CHECK(s.key_tiles(128) == 3);           // 300 keys
    CHECK(s.query_tiles(64) == 2 * 8 * 2);  // 100 rows: 2 tiles a head
    s.causal = true;                        // row i sees min(i + 1, 300) keys: 1 + 2 + … + 100
    CHECK(s.key() == "b2_h8_hk2_s100_sk300_d128_bf16_causal");
    CHECK(s.flops() == doctest::Approx(4.0 * 2 * 8 * 5050 * 128));
    CHECK(s.key_tiles(64) == 2);  // the last row sees 100 keys
    s.seq = 5, s.kv_seq = 3;      // rows 0, 1, 2 see 1, 2, 3 keys; rows 3 and 4 all 3
    CHECK(s.flops() == doctest::Approx(4.0 * 2 * 8 * (6 + 6) * 128));

    CHECK(says(error_of([&] { AttentionShape{.heads = 6, .kv_heads = 4}.validate(); }),
               "kv_heads 4 must divide heads 6"));
    CHECK(says(error_of([&] { AttentionShape{.head_dim = 80}.validate(); }),
               "head_dim 80 has no kernel: use 64, 96 or 128"));
    CHECK(says(error_of([&] { AttentionShape{.dtype = Scalar::f32}.validate(); }), "f16 or bf16 tensors, not f32"));
    CHECK(says(error_of([&] { AttentionShape{.seq = 0}.validate(); }), "must be positive"));
    CHECK(says(error_of([&] { AttentionShape{.batch = 70000}.validate(); }), "at most 65535"));
    CHECK_NOTHROW(AttentionShape{.kv_seq = 0}.validate());  // no keys: O = 0, LSE = −∞
}

TEST_CASE("attention tiles: shared memory, the limits they are checked against, configurations as text") {
    CHECK(AttentionTiles{128, 64}.threads() == 256);
    CHECK(AttentionTiles{64, 128}.threads() == 128);
    CHECK(AttentionTiles{128, 64}.shared_bytes(128) == (128 + 4 * 64) * 136 * 2);
    CHECK(AttentionTiles{128, 128, true}.threads() == 384);  // two consumer warpgroups and the producer
    CHECK(AttentionTiles{64, 128, true}.threads() == 256);
    // Two Q tiles (the next query tile's loads), two stages of K and of V, 12 barriers, alignment slack.
    CHECK(AttentionTiles{128, 128, true}.shared_bytes(128) == (2 * 128 + 4 * 128) * 128 * 2 + 1024 + 96);
    CHECK(AttentionTiles{192, 128, true}.threads() == 512);
    for (const auto& t : AttentionTiles::configurations())
        for (int d : {64, 96, 128})
            if (t.unsupported_reason(d).empty()) CHECK_NOTHROW(t.validate(d, h100.max_shared_bytes));
    CHECK(says(error_of([] {
                   AttentionTiles{192, 128, true}.validate(128, 1 << 20);
               }),
               "too few registers for 128 keys a step at this head dim; use BLOCK_N=64, or BLOCK_M=128"));
    CHECK_NOTHROW(AttentionTiles{192, 128, true}.validate(64, 1 << 20));
    CHECK(says(error_of([] {
                   AttentionTiles{128, 128, true}.validate(96, 1 << 20);
               }),
               "head_dim 64 or 128 (the sm80 tiles take head_dim 96)"));
    CHECK(says(error_of([] {
                   AttentionTiles{256, 64, true}.validate(64, 1 << 20);
               }),
               "BLOCK_M must be 64, 128 or 192, BLOCK_N 64 or 128"));
    CHECK(says(error_of([] {
                   AttentionTiles{128, 32, true}.validate(128, 1 << 20);
               }),
               "BLOCK_M must be 64, 128 or 192, BLOCK_N 64 or 128"));
    CHECK(says(error_of([] {
                   AttentionTiles{128, 128}.validate(128, a6000.max_shared_bytes);
               }),
               "BLOCK_M=128 BLOCK_N=128 at head_dim 128 need 174080 bytes of shared memory, over the device's 101376"));
    CHECK(says(error_of([] { AttentionTiles{48, 40}.validate(64, 1 << 20); }), "multiples of 16 from 16 to 128"));
    CHECK(says(error_of([] { AttentionTiles{256, 64}.validate(64, 1 << 20); }), "multiples of 16 from 16 to 128"));

    CHECK(attention_config({128, 64}) == "BLOCK_M=128 BLOCK_N=64");
    CHECK(parse_attention_config("BLOCK_M=64 BLOCK_N=128") == AttentionTiles{64, 128});
    CHECK(attention_config({128, 128, true}) == "SM90=1 BLOCK_M=128 BLOCK_N=128");
    CHECK(parse_attention_config("SM90=1 BLOCK_M=128 BLOCK_N=64") == AttentionTiles{128, 64, true});
    for (const char* bad :
         {"", "BLOCK_M=64", "BLOCK_M=64 BLOCK_N=128 extra", "BLOCK_N=64 BLOCK_M=128", "SM90=0 BLOCK_M=64 BLOCK_N=64"})
        CHECK(says(error_of([&] { (void)parse_attention_config(bad); }),
                   "is not '[SM90=1] BLOCK_M=<rows> BLOCK_N=<keys> [KV_SPLITS=<shares>]'"));
}

TEST_CASE("attention dispatch: whole multiprocessors busy, tiles that fit the device, sm_80 or newer") {
    const AttentionShape big{.batch = 4, .heads = 16, .kv_heads = 16, .seq = 4096, .kv_seq = 4096, .head_dim = 128};
    // A 9.0 device: the wgmma mainloop where the head dim is 64 or 128; the sm80 one at 96.
    CHECK(dispatch_attention(big, h100) == AttentionTiles{128, 128, true});
    AttentionShape narrow = big, odd = big;
    narrow.head_dim = 64;
    odd.head_dim = 96;
    // Head dim 64: three consumer warpgroups (192 rows) while 22 tiles × 16 heads × 4 fill 132 SMs.
    CHECK(dispatch_attention(narrow, h100) == AttentionTiles{192, 128, true});
    const AttentionShape narrow_small{
        .batch = 1, .heads = 8, .kv_heads = 8, .seq = 1024, .kv_seq = 1024, .head_dim = 64};
    // 48 blocks of 192 rows would not fill it; 64 of 128 fill half. Full query tiles: no split.
    CHECK(dispatch_attention(narrow_small, h100) == AttentionTiles{128, 128, true});
    CHECK(dispatch_attention(odd, h100) == AttentionTiles{128, 128});
    CHECK(says(attention_dispatch_reason(odd, h100), "the wgmma mainloop takes head dims 64 and 128 only"));
    CHECK(says(attention_dispatch_reason(big, h100), "TMA + wgmma mainloop (sm_90a), 128 query rows a query tile"));
    // Elsewhere the sm80 mainloop, 128 keys a step where shared memory holds them.
    CHECK(dispatch_attention(big, a100) == AttentionTiles{128, 64});
    CHECK(dispatch_attention(big, a6000) == AttentionTiles{128, 32});  // 99 KB of shared memory
    // 4 query tiles × 8 heads = 32 blocks of 128 rows would leave most of 108 SMs idle.
    const AttentionShape small{.batch = 1, .heads = 8, .kv_heads = 8, .seq = 512, .kv_seq = 512, .head_dim = 128};
    CHECK(dispatch_attention(small, a100).block_m == 64);
    // Every pick fits the device it was made for.
    for (const DeviceTraits& t : {h100, a100, a6000})
        for (int d : {64, 96, 128})
            for (int seq : {1, 77, 1024, 8192}) {
                const AttentionShape s{.batch = 2, .heads = 8, .kv_heads = 8, .seq = seq, .kv_seq = seq, .head_dim = d};
                CHECK(dispatch_attention(s, t).shared_bytes(d) <= static_cast<unsigned>(t.max_shared_bytes));
            }
    CHECK(says(attention_dispatch_reason(small, a100), "64 query rows a block (64 blocks for 108 multiprocessors)"));
    // Decoding: one query a head leaves most multiprocessors idle; the keys split to fill a wave.
    const AttentionShape decode{.batch = 1, .heads = 8, .kv_heads = 8, .seq = 1, .kv_seq = 5000, .head_dim = 128};
    CHECK(dispatch_attention(decode, h100) == AttentionTiles{128, 128, true, 16});  // 132 / 8, at most 16
    CHECK(dispatch_attention(decode, a100) == AttentionTiles{64, 128, false, 13});  // 108 / 8
    CHECK(says(attention_dispatch_reason(decode, h100), "the keys split in 16 shares"));
    AttentionShape few_keys = decode;
    few_keys.kv_seq = 300;  // 3 key tiles of 128: 3 shares
    CHECK(attention_kv_splits(few_keys, {128, 128, true}, h100) == 3);
    few_keys.causal = true;  // the one query sees one key
    CHECK(attention_kv_splits(few_keys, {128, 128, true}, h100) == 1);
    few_keys.kv_seq = 0;
    CHECK(attention_kv_splits(few_keys, {128, 128, true}, h100) == 1);
    // A few heads of full query tiles: split only where each share keeps 16 key tiles or more.
    AttentionShape prefill{
        .batch = 1, .heads = 8, .kv_heads = 8, .seq = 512, .kv_seq = 512, .head_dim = 128, .causal = true};
    CHECK(attention_kv_splits(prefill, {128, 128, true}, h100) == 1);  // 4 key tiles
    prefill.kv_seq = 100000;  // 512 queries against a long cache: 32 blocks, 4 fill a wave
    prefill.causal = false;
    CHECK(attention_kv_splits(prefill, {128, 128, true}, h100) == 4);
    prefill.kv_seq = 6000;  // 47 key tiles: 2 shares of 16 or more
    CHECK(attention_kv_splits(prefill, {128, 128, true}, h100) == 2);
    prefill.causal = true;  // the last row sees 512 keys: 4 tiles
    CHECK(attention_kv_splits(prefill, {128, 128, true}, h100) == 1);
    AttentionShape short_chunk = prefill;
    short_chunk.seq = 100;  // one query tile a head, not full
    short_chunk.kv_seq = 512;
    short_chunk.causal = false;
    CHECK(attention_kv_splits(short_chunk, {128, 128, true}, h100) == 4);  // 4 key tiles
    CHECK(dispatch_attention(big, h100).kv_splits == 1);
    CHECK(dispatch_attention(small, a100).kv_splits == 1);  // 64 blocks: more than half a wave
    CHECK(says(error_of([&] {
                   (void)dispatch_attention(small, DeviceTraits{40, 65536, Arch(7, 5)});
               }),
               "needs sm_80 or newer"));
}

TEST_CASE("the attention op packs q, k, v, o, lse, the sizes and each tensor's strides, in either layout") {
    const AttentionForwardOp op(Scalar::f16, 64, true, {128, 64});
    CHECK(op.kernel().id() == "flash_attention2_forward__f16__f32__f16__128__64__64__true");
    CHECK(op.kernel().max_threads_per_block() == 256);
    CHECK(op.shared_bytes_for_launch(0) == (128 + 256) * 72 * 2);
    const Shape q{2, 8, 300, 64}, kv{2, 2, 500, 64};
    const std::array<Tensor, 3> in{Tensor{fake(0x1000), q}, Tensor{fake(0x2000), kv}, Tensor{fake(0x3000), kv}};
    const std::array<ShapeView, 3> shapes{q, kv, kv};
    CHECK(op.compute_concrete_output_shape(shapes, {}) == q);
    CHECK(op.param_shapes(shapes, q) == std::vector<Shape>{{2, 8, 300}});
    CHECK(op.param_names().front() == "lse");
    CHECK(op.grid_for_launch(0, shapes, q) == Dims{3, 8, 2});  // causal: the grouped heads run one by one
    void* lse = fake(0x5000);
    test::Recorder r;
    op.pack_args({in, std::span(&lse, 1), fake(0x4000), q, 64}, r);
    REQUIRE(r.args.size() == 6 + 5 + 1 + 12);
    CHECK(r.p(0) == fake(0x1000));
    CHECK(r.p(3) == fake(0x4000));
    CHECK(r.p(4) == fake(0x5000));
    CHECK(r.p(5) == nullptr);  // partials: the keys are not split
    CHECK(r.i(6) == 8);        // heads
    CHECK(r.i(7) == 2);        // kv_heads
    CHECK(r.i(8) == 300);      // seq
    CHECK(r.i(9) == 500);      // kv_seq
    CHECK(r.i(10) == 1);       // kv_splits
    CHECK(std::get<double>(r.args[11]) == doctest::Approx(0.125));
    CHECK(r.i(12) == 8 * 300 * 64);  // q: batch, head, row strides of [B, H, S, D]
    CHECK(r.i(13) == 300 * 64);
    CHECK(r.i(14) == 64);
    CHECK(r.i(15) == 2 * 500 * 64);  // k
    CHECK(r.i(16) == 500 * 64);
    CHECK(op.n_launches() == 1);

    // [B, S, H, D]: the same problem, other strides.
    const AttentionForwardOp bshd(Scalar::bf16, 128, false, {64, 64}, AttentionLayout::bshd, 0.5f);
    const Shape q2{2, 300, 8, 128}, kv2{2, 500, 2, 128};
    const std::array<Tensor, 3> in2{Tensor{fake(0x1000), q2}, Tensor{fake(0x2000), kv2}, Tensor{fake(0x3000), kv2}};
    const std::array<ShapeView, 3> shapes2{q2, kv2, kv2};
    CHECK(bshd.shape_of(shapes2) ==
          AttentionShape{.batch = 2, .heads = 8, .kv_heads = 2, .seq = 300, .kv_seq = 500, .head_dim = 128});
    CHECK(bshd.grid_for_launch(0, shapes2, q2) == Dims{5, 8, 2});  // a group's rows are not evenly apart
    test::Recorder r2;
    bshd.pack_args({in2, std::span(&lse, 1), fake(0x4000), q2, 128}, r2);
    CHECK(std::get<double>(r2.args[11]) == doctest::Approx(0.5));
    CHECK(r2.i(12) == 300 * 8 * 128);
    CHECK(r2.i(13) == 128);
    CHECK(r2.i(14) == 8 * 128);
    CHECK(r2.i(21) == 300 * 8 * 128);  // o like q
    CHECK(r2.i(22) == 128);
    CHECK(r2.i(23) == 8 * 128);
}

TEST_CASE("the Hopper attention op launches a persistent grid: at most a block a multiprocessor") {
    const Shape q{2, 8, 1000, 128}, kv{2, 8, 1000, 128};  // 8 query tiles of 128 rows a head: 128 in all
    const std::array<ShapeView, 3> shapes{q, kv, kv};
    CHECK(AttentionForwardOp(Scalar::bf16, 128, false, {128, 128, true}, AttentionLayout::bhsd, 0, 132)
              .grid_for_launch(0, shapes, q) == Dims{128, 1, 1});  // fewer tiles than multiprocessors
    CHECK(AttentionForwardOp(Scalar::bf16, 128, false, {128, 128, true}, AttentionLayout::bhsd, 0, 100)
              .grid_for_launch(0, shapes, q) == Dims{100, 1, 1});
    CHECK(AttentionForwardOp(Scalar::bf16, 128, false, {128, 128, true, 3}, AttentionLayout::bhsd, 0, 1000)
              .grid_for_launch(0, shapes, q) == Dims{384, 1, 1});  // every tile in 3 key shares
    const AttentionForwardOp unbounded(Scalar::bf16, 128, false, {128, 128, true});
    CHECK(unbounded.multiprocessors() == 0);
    CHECK(unbounded.grid_for_launch(0, shapes, q) == Dims{128, 1, 1});  // 0: a block a query tile
    CHECK(unbounded.with_tiles({64, 128, true})->grid_for_launch(0, shapes, q) == Dims{256, 1, 1});
    CHECK(AttentionForwardOp(Scalar::bf16, 128, false, {128, 128, true}, AttentionLayout::bhsd, 0, 7)
              .with_tiles({64, 128, true})
              ->multiprocessors() == 7);
    CHECK(says(error_of([] {
                   AttentionForwardOp(Scalar::bf16, 128, false, {128, 128, true}, AttentionLayout::bhsd, 0, -1);
               }),
               "must be the device's count"));
    // sm80 tiles keep a block a query tile, whatever the count.
    CHECK(AttentionForwardOp(Scalar::bf16, 128, false, {128, 64}, AttentionLayout::bhsd, 0, 100)
              .grid_for_launch(0, shapes, q) == Dims{8, 8, 2});
}

namespace {
/// What PersistentSchedule<BLOCK_M, CAUSAL> gives a grid of `blocks`: "" where every query tile
/// goes to exactly one block with its own key/value head, else the last fault found; and the
/// busiest block's key tiles (key_tiles.cuh's count) over the mean.
template <int BLOCK_M, int BLOCK_N, bool CAUSAL>
std::pair<std::string, double> persistent_run(int batch, int heads, int kv_heads, int seq, int splits, int blocks) {
    const auto schedule = attention::PersistentSchedule<BLOCK_M, CAUSAL>::of(batch, heads, kv_heads, seq, splits,
                                                                             blocks);
    std::map<std::tuple<int, int, int, int>, int> taken;  // (first row, head, batch, share): how often
    std::vector<long long> keys(blocks);
    std::string wrong;
    for (int b = 0; b < blocks; ++b)
        schedule.for_each(b, [&](attention::TileIndex t) {
            const attention::Work w = schedule.work(t);
            ++taken[{w.m0, w.head, w.batch, w.split}];
            if (w.kv_head != w.head / (heads / kv_heads) || w.splits != splits)
                wrong = fmt::format("tile at row {} of head {} has key/value head {}", w.m0, w.head, w.kv_head);
            keys[b] += attention::key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, seq).count();
        });
    for (int m0 = 0; m0 < seq; m0 += BLOCK_M)
        for (int h = 0; h < heads; ++h)
            for (int z = 0; z < batch; ++z)
                for (int share = 0; share < splits; ++share)
                    if (const auto it = taken.find({m0, h, z, share}); it == taken.end() || it->second != 1)
                        wrong = fmt::format("tile at row {} of head {}, batch {}, share {} taken {} times", m0, h, z,
                                            share, it == taken.end() ? 0 : it->second);
    if (taken.size() != static_cast<std::size_t>(kjit::ceil_div(seq, BLOCK_M) * heads * batch * splits))
        wrong = fmt::format("{} tiles taken", taken.size());
    long long most = 0, all = 0;
    for (const long long k : keys) most = std::max(most, k), all += k;
    return {wrong, all ? static_cast<double>(most) * blocks / all : 1.0};
}
}  // namespace

TEST_CASE("a persistent grid takes every query tile once, and causal work about evenly whatever its size") {
    for (const int seq : {1, 100, 192, 193, 700, 1300, 2048})
        for (const auto& [heads, kv_heads] : {std::pair{1, 1}, {3, 1}, {4, 2}, {15, 5}})
            for (const int batch : {1, 2, 3})
                for (const int splits : {1, 3})
                    for (const int blocks : {1, 2, 3, 5, 132}) {
                        CAPTURE(seq);
                        CAPTURE(heads);
                        CAPTURE(batch);
                        CAPTURE(splits);
                        CAPTURE(blocks);
                        CHECK(persistent_run<192, 128, true>(batch, heads, kv_heads, seq, splits, blocks).first == "");
                        CHECK(persistent_run<128, 128, true>(batch, heads, kv_heads, seq, splits, blocks).first == "");
                        CHECK(persistent_run<128, 64, false>(batch, heads, kv_heads, seq, splits, blocks).first == "");
                    }
    // The bench's S = 2k problems on an H100's 132 blocks. Causal D64 has 11 tiles of 192 rows a head:
    // pairs within a head left the middle one alone, and a stride of 132 (a multiple of 6) gave 22
    // blocks only those, the busiest 1.12x the mean.
    CHECK(persistent_run<192, 128, true>(59, 32, 32, 2048, 1, 132).second < 1.01);
    CHECK(persistent_run<128, 128, true>(59, 16, 16, 2048, 1, 132).second < 1.02);
    CHECK(persistent_run<128, 128, false>(30, 16, 16, 2048, 1, 132).second < 1.02);
    CHECK(persistent_run<192, 128, true>(500, 8, 8, 576, 1, 132).second < 1.02);  // 3 tiles a head
}

TEST_CASE("grouped query heads run packed: one head of a group's rows, K and V read once for the group") {
    // [B, H, S, D] without a causal mask: head h = 4·hk + g's row i is row g·S + i of head hk.
    const AttentionShape gqa{.batch = 2, .heads = 8, .kv_heads = 2, .seq = 3, .kv_seq = 700, .head_dim = 128};
    CHECK(gqa.as_run(AttentionLayout::bhsd) ==
          AttentionShape{.batch = 2, .heads = 2, .kv_heads = 2, .seq = 12, .kv_seq = 700, .head_dim = 128});
    CHECK(gqa.as_run(AttentionLayout::bhsd).flops() == gqa.flops());
    CHECK(gqa.as_run(AttentionLayout::bshd) == gqa);  // a group's rows lie two strides apart there
    AttentionShape causal = gqa, one_query = gqa, own_heads = gqa;
    causal.causal = true;  // the mask needs each row's own query index
    CHECK(causal.as_run(AttentionLayout::bhsd) == causal);
    one_query.seq = 1;  // one query a head: a group's rows are a head apart in either layout
    CHECK(one_query.as_run(AttentionLayout::bshd).heads == 2);
    CHECK(one_query.as_run(AttentionLayout::bshd).seq == 4);
    own_heads.kv_heads = 8;
    CHECK(own_heads.as_run(AttentionLayout::bhsd) == own_heads);

    // The op: the grid, the sizes and q's and o's strides of the packed heads; lse and partials
    // keep their [B, H, S] order, which the packed rows share.
    const AttentionForwardOp bhsd(Scalar::bf16, 128, false, {64, 128, false, 2});
    const Shape q{2, 8, 3, 128}, kv{2, 2, 700, 128};
    const std::array<ShapeView, 3> shapes{q, kv, kv};
    CHECK(bhsd.grid_for_launch(0, shapes, q) == Dims{1, 2, 2 * 2});  // 12 rows a packed head: one tile
    CHECK(bhsd.param_shapes(shapes, q) == std::vector<Shape>{{2, 8, 3}, {2, 2 * 8 * 3, 129}});
    CHECK(says(error_of([&] { (void)bhsd.grid(q); }), "call grid_for_launch"));
    const std::array<Tensor, 3> in{Tensor{fake(0x1000), q}, Tensor{fake(0x2000), kv}, Tensor{fake(0x3000), kv}};
    void* params[] = {fake(0x5000), fake(0x6000)};
    test::Recorder forward;
    bhsd.pack_args_for_launch(0, {in, params, fake(0x4000), q, 128}, forward);
    CHECK(forward.i(6) == 2);   // heads: the packed ones
    CHECK(forward.i(7) == 2);   // kv_heads
    CHECK(forward.i(8) == 12);  // seq: 4 heads × 3 queries
    CHECK(forward.i(9) == 700);
    CHECK(forward.i(12) == 8 * 3 * 128);  // q: batch, packed head (4 heads), row
    CHECK(forward.i(13) == 4 * 3 * 128);
    CHECK(forward.i(14) == 128);
    CHECK(forward.i(15) == 2 * 700 * 128);  // k unchanged
    CHECK(forward.i(21) == 8 * 3 * 128);    // o like q
    CHECK(forward.i(22) == 4 * 3 * 128);
    CHECK(forward.i(23) == 128);
    test::Recorder combine;
    bhsd.pack_args_for_launch(1, {in, params, fake(0x4000), q, 128}, combine);
    CHECK(combine.i(3) == 2);            // heads
    CHECK(combine.i(4) == 12);           // seq
    CHECK(combine.i(6) == 2 * 8 * 3);    // rows
    CHECK(combine.i(8) == 4 * 3 * 128);  // o's packed head stride

    // [B, S, H, D] with one query a head: a packed head's rows are q's heads, D apart.
    const AttentionForwardOp bshd(Scalar::f16, 64, false, {128, 128}, AttentionLayout::bshd);
    const Shape q1{3, 1, 32, 64}, kv1{3, 5000, 8, 64};
    const std::array<ShapeView, 3> shapes1{q1, kv1, kv1};
    CHECK(bshd.grid_for_launch(0, shapes1, q1) == Dims{1, 8, 3});
    const std::array<Tensor, 3> in1{Tensor{fake(0x1000), q1}, Tensor{fake(0x2000), kv1}, Tensor{fake(0x3000), kv1}};
    test::Recorder r1;
    bshd.pack_args({in1, std::span(params, 1), fake(0x4000), q1, 64}, r1);
    CHECK(r1.i(6) == 8);         // heads
    CHECK(r1.i(8) == 4);         // seq: the group's 4 heads
    CHECK(r1.i(12) == 32 * 64);  // o: batch, packed head (4 heads of 64), row (a head)
    CHECK(r1.i(13) == 4 * 64);
    CHECK(r1.i(14) == 64);

    // Dispatch sizes the grid and the key shares by the packed blocks: 32 query heads of one
    // query on 8 key/value heads make 8 blocks, split 16 ways (132 / 8) rather than 4 (132 / 32).
    const AttentionShape decode{.batch = 1, .heads = 32, .kv_heads = 8, .seq = 1, .kv_seq = 8192, .head_dim = 128};
    CHECK(dispatch_attention(decode, h100) == AttentionTiles{128, 128, true, 16});
    CHECK(says(attention_dispatch_reason(decode, h100, AttentionLayout::bshd),
               "(8 query tiles for 132 multiprocessors, at most one persistent block each, the 4 query heads of each "
               "key/value head packed into one head of 4 rows)"));
    AttentionShape causal_decode = decode;
    causal_decode.causal = true;  // unpacked: 32 blocks; the one query sees one key
    CHECK(dispatch_attention(causal_decode, h100).kv_splits == 1);
    CHECK(attention_kv_splits(decode, {128, 128, true}, h100, AttentionLayout::bshd) == 16);
}

TEST_CASE("tuned attention winners are keyed by what the kernels run: [B, S, H, D] apart where it does not pack") {
    const AttentionShape chunk{.batch = 1, .heads = 32, .kv_heads = 8, .seq = 4, .kv_seq = 4096, .head_dim = 128};
    CHECK(attention_tuning_key(chunk, AttentionLayout::bhsd) == chunk.key());
    CHECK(attention_tuning_key(chunk, AttentionLayout::bshd) == chunk.key() + "_bshd");  // run unpacked there
    AttentionShape one_query = chunk, causal = chunk;
    one_query.seq = 1;  // packed in either layout: one key
    CHECK(attention_tuning_key(one_query, AttentionLayout::bshd) == one_query.key());
    causal.causal = true;  // packed in neither
    CHECK(attention_tuning_key(causal, AttentionLayout::bshd) == causal.key());

    // pick_attention finds a winner under its layout's key only.
    test::TempDir dir;
    Cache cache(dir.path());
    const AttentionTiles stored{64, 128, false, 4};
    const AttentionForwardOp op(chunk.dtype, chunk.head_dim, chunk.causal, stored, AttentionLayout::bshd);
    store_tuned(cache, {std::string(attention_family), attention_tuning_key(chunk, AttentionLayout::bshd),
                        "NVIDIA H100", "sm_90", "580", op.kernel().source_hash(), attention_config(stored), 30.0});
    const AttentionPick bshd = pick_attention(chunk, h100, "NVIDIA H100", "580", cache, AttentionLayout::bshd);
    CHECK(bshd.tuned);
    CHECK(bshd.tiles == stored);
    const AttentionPick bhsd = pick_attention(chunk, h100, "NVIDIA H100", "580", cache, AttentionLayout::bhsd);
    CHECK_FALSE(bhsd.tuned);
    CHECK(bhsd.tiles == dispatch_attention(chunk, h100, AttentionLayout::bhsd));
}

namespace {
/// key_tiles<BLOCK_M, BLOCK_N, CAUSAL> against the rows and keys themselves, for every query tile
/// and share of `cases`: the shares split the tiles some row of the block sees, in order; the
/// tiles before first_masked hold no key any row must not see, and the one at it does; a range of
/// 64 rows (a Hopper consumer's) starts where its block's share does and ends after the last
/// tile of it that one of its rows sees — never before it starts. Returns the first violation.
template <int BLOCK_M, int BLOCK_N, bool CAUSAL>
std::string key_tiles_violation() {
    using attention::key_tiles;
    for (const int seq : {1, 5, 63, 64, 65, 130, 200, 333, 700})
        for (const int kv_seq : {0, 1, 63, 64, 100, 129, 300, 900})
            for (const int splits : {1, 2, 3, 5, 8})
                for (int m0 = 0; m0 < seq; m0 += BLOCK_M) {
                    const auto seen = [&](int row) { return CAUSAL ? std::min(kv_seq, row + 1) : kv_seq; };
                    const auto tiles_seen = [&](int row) { return kjit::ceil_div(seen(row), BLOCK_N); };
                    // A range's tiles all seen by each of its rows, and the tiles one of its rows sees.
                    const auto unmasked = [&](int first, int last, int tile) {
                        for (int r = first; r <= last; ++r)
                            if ((tile + 1) * BLOCK_N > seen(r)) return false;
                        return true;
                    };
                    const auto most_seen = [&](int first, int last) {
                        int most = 0;
                        for (int r = first; r <= last; ++r) most = std::max(most, tiles_seen(r));
                        return most;
                    };
                    const int last_row = std::min(seq, m0 + BLOCK_M) - 1;
                    const std::string at = fmt::format(
                        "BLOCK_M={} BLOCK_N={} causal={} seq={} kv_seq={} splits={} m0={}", BLOCK_M, BLOCK_N, CAUSAL,
                        seq, kv_seq, splits, m0);
                    int next = 0;
                    for (int split = 0; split < splits; ++split) {
                        const attention::Work w{m0, 0, 0, 0, split, splits};
                        const attention::KeyTiles block = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq);
                        const std::string here = fmt::format("{} split={}: [{}, {}) masked from {}", at, split,
                                                             block.begin, block.end, block.first_masked);
                        if (block.begin != next || block.end < block.begin) return here + ": not the next share";
                        next = block.end;
                        for (int t = block.begin; t < std::min(block.end, block.first_masked); ++t)
                            if (!unmasked(m0, last_row, t)) return here + fmt::format(": tile {} needs the mask", t);
                        if (block.first_masked >= block.begin && block.first_masked < block.end &&
                            unmasked(m0, last_row, block.first_masked))
                            return here + ": masked from a tile every row sees whole";
                        for (int row0 = m0; BLOCK_M % 64 == 0 && row0 < m0 + BLOCK_M; row0 += 64) {
                            const attention::KeyTiles rows = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq, row0,
                                                                                                 64);
                            const int last = std::min(seq, row0 + 64) - 1;
                            const int want = last < row0 ? block.begin
                                                         : std::clamp(most_seen(row0, last), block.begin, block.end);
                            const std::string range = fmt::format("{}, rows from {}: [{}, {}) masked from {}", here,
                                                                  row0, rows.begin, rows.end, rows.first_masked);
                            if (rows.begin != block.begin || rows.end != want)
                                return range + fmt::format(": should be [{}, {})", block.begin, want);
                            for (int t = rows.begin; last >= row0 && t < std::min(rows.end, rows.first_masked); ++t)
                                if (!unmasked(row0, last, t)) return range + fmt::format(": tile {} needs the mask", t);
                        }
                    }
                    if (next != most_seen(m0, last_row)) return at + fmt::format(": the shares end at {}", next);
                }
    return {};
}
}  // namespace

TEST_CASE("key tiles: a block's shares, where its mask starts, and the part a Hopper consumer's rows see") {
    CHECK(key_tiles_violation<64, 32, false>() == "");
    CHECK(key_tiles_violation<64, 64, true>() == "");
    CHECK(key_tiles_violation<64, 128, true>() == "");
    CHECK(key_tiles_violation<128, 32, true>() == "");
    CHECK(key_tiles_violation<128, 64, false>() == "");
    CHECK(key_tiles_violation<128, 64, true>() == "");
    CHECK(key_tiles_violation<128, 128, false>() == "");
    CHECK(key_tiles_violation<128, 128, true>() == "");
    CHECK(key_tiles_violation<192, 64, false>() == "");
    CHECK(key_tiles_violation<192, 64, true>() == "");
    CHECK(key_tiles_violation<192, 128, false>() == "");
    CHECK(key_tiles_violation<192, 128, true>() == "");
}

TEST_CASE("split-KV: the shares' workspace slot, a second launch that adds them up, the grid over shares") {
    const AttentionForwardOp op(Scalar::bf16, 128, false, {64, 128, false, 3}, AttentionLayout::bshd);
    const Shape q{2, 5, 8, 128}, kv{2, 700, 2, 128};  // [B, S, H, D]
    const std::array<ShapeView, 3> shapes{q, kv, kv};
    CHECK(op.n_launches() == 2);
    CHECK(op.kernel_for_launch(1).name() == "flash_attention2_combine");
    CHECK(op.kernel_for_launch(1).id() == attention_combine_kernel(Scalar::bf16, 128).id());
    CHECK(std::ranges::equal(op.param_names(), std::vector<std::string_view>{"lse", "partials"}));
    CHECK(op.param_shapes(shapes, q) == std::vector<Shape>{{2, 8, 5}, {3, 2 * 8 * 5, 129}});
    CHECK(op.grid_for_launch(0, shapes, q) == Dims{1, 8, 2 * 3});         // z: batch × shares
    CHECK(op.grid_for_launch(1, shapes, q) == Dims{(80 + 3) / 4, 1, 1});  // a warp a row, 4 warps a block
    CHECK(op.shared_bytes_for_launch(1) == 0);
    const std::array<Tensor, 3> in{Tensor{fake(0x1000), q}, Tensor{fake(0x2000), kv}, Tensor{fake(0x3000), kv}};
    void* params[] = {fake(0x5000), fake(0x6000)};
    test::Recorder forward;
    op.pack_args_for_launch(0, {in, params, fake(0x4000), q, 128}, forward);
    CHECK(forward.p(5) == fake(0x6000));
    CHECK(forward.i(10) == 3);
    test::Recorder combine;
    op.pack_args_for_launch(1, {in, params, fake(0x4000), q, 128}, combine);
    REQUIRE(combine.args.size() == 3 + 3 + 4);
    CHECK(combine.p(0) == fake(0x6000));  // partials
    CHECK(combine.p(1) == fake(0x4000));  // o
    CHECK(combine.p(2) == fake(0x5000));  // lse
    CHECK(combine.i(3) == 8);             // heads
    CHECK(combine.i(4) == 5);             // seq
    CHECK(combine.i(5) == 3);             // kv_splits
    CHECK(combine.i(6) == 2 * 8 * 5);     // rows
    CHECK(combine.i(7) == 5 * 8 * 128);   // o's strides, [B, S, H, D]
    CHECK(combine.i(8) == 128);
    CHECK(combine.i(9) == 8 * 128);
    test::Recorder refused;
    CHECK(says(error_of([&] {
                   op.pack_args({in, std::span(params, 1), fake(0x4000), q, 128}, refused);
               }),
               "take 2 parameter slots (lse, partials), 1 given"));

    CHECK(attention_config({64, 128, false, 3}) == "BLOCK_M=64 BLOCK_N=128 KV_SPLITS=3");
    CHECK(parse_attention_config("SM90=1 BLOCK_M=128 BLOCK_N=128 KV_SPLITS=16") == AttentionTiles{128, 128, true, 16});
    CHECK(says(error_of([] { (void)parse_attention_config("BLOCK_M=64 BLOCK_N=64 KV_SPLITS=1"); }),
               "[KV_SPLITS=<shares>]"));
    CHECK(says(error_of([] {
                   AttentionTiles{64, 64, false, 17}.validate(64, 1 << 20);
               }),
               "KV_SPLITS=17: the keys split into 1 to 16 shares"));
}

TEST_CASE("the attention op refuses tensors its kernel cannot take, saying what to change") {
    const AttentionForwardOp op(Scalar::bf16, 64, false, {64, 64});
    const Shape q{1, 4, 10, 64}, kv{1, 2, 12, 64};
    void* lse = fake(0x5000);
    const auto pack = [&](std::array<Tensor, 3> in, void* out, Shape out_shape, int row_stride = 64) {
        test::Recorder r;
        op.pack_args({in, std::span(&lse, 1), out, out_shape, row_stride}, r);
    };
    const Tensor k{fake(0x2000), kv}, v{fake(0x3000), kv};
    CHECK(says(error_of([&] { pack({Tensor{fake(0x1008), q}, k, v}, fake(0x4000), q); }), "q must be 16-byte aligned"));
    CHECK(says(error_of([&] { pack({Tensor{fake(0x1000), q}, k, v}, nullptr, q); }), "o is a null pointer"));
    CHECK(says(error_of([&] {
                   pack({Tensor{fake(0x1000), q}, k, v}, fake(0x4000), q, 72);
               }),
               "dense rows of head_dim 64"));
    CHECK(says(error_of([&] {
                   pack({Tensor{fake(0x1000), q}, k, v}, fake(0x4000), {1, 4, 11, 64});
               }),
               "must have q's shape"));
    const Shape other{1, 2, 13, 64}, wide{1, 4, 10, 128}, three{4, 10, 64}, odd_heads{1, 3, 12, 64};
    CHECK(says(error_of([&] {
                   pack({Tensor{fake(0x1000), q}, k, Tensor{fake(0x3000), other}}, fake(0x4000), q);
               }),
               "k and v must have one shape"));
    CHECK(says(error_of([&] {
                   pack({Tensor{fake(0x1000), wide}, k, v}, fake(0x4000), wide, 128);
               }),
               "must agree on batch and head dim"));
    CHECK(says(error_of([&] {
                   pack({Tensor{fake(0x1000), three}, k, v}, fake(0x4000), three);
               }),
               "input q must be [B, H, S, D]"));
    CHECK(says(error_of([&] {
                   pack({Tensor{fake(0x1000), q}, Tensor{fake(0x2000), odd_heads}, Tensor{fake(0x3000), odd_heads}},
                        fake(0x4000), q);
               }),
               "kv_heads 3 must divide heads 4"));
    CHECK(says(error_of([&] { pack({Tensor{fake(0x1000), q, 99999}, k, v}, fake(0x4000), q); }), "must be dense"));
    CHECK(says(error_of([] { AttentionForwardOp(Scalar::f16, 80, false, {64, 64}); }), "head_dim 80 has no kernel"));
    CHECK(says(error_of([] { AttentionForwardOp(Scalar::f16, 64, false, {64, 24}); }), "multiples of 16"));
}

TEST_CASE("the attention reference on cases worked by hand") {
    // One key: every row's output is that key's value, LSE = scale · q·k.
    const AttentionShape one{.seq = 2, .kv_seq = 1, .head_dim = 64};
    std::vector<float> q(2 * 64), k(64), v(64);
    for (int e = 0; e < 64; ++e) q[e] = 0.5f, q[64 + e] = -0.25f, k[e] = 1.0f, v[e] = float(e);
    const auto r = attention_reference(one, q, k, v);
    for (int e = 0; e < 64; ++e) {
        CHECK(r.o[e] == doctest::Approx(e));
        CHECK(r.o[64 + e] == doctest::Approx(e));
    }
    CHECK(r.lse[0] == doctest::Approx(0.5 * 64 / 8));
    CHECK(r.lse[1] == doctest::Approx(-0.25 * 64 / 8));

    // Equal scores: the mean of the values seen — all of them, or under the causal mask those up
    // to the row. LSE = ln(keys seen) (scores 0).
    AttentionShape flat{.seq = 3, .kv_seq = 4, .head_dim = 64};
    std::vector<float> zeros(3 * 64, 0.0f), keys(4 * 64, 1.0f), values(4 * 64);
    for (int j = 0; j < 4; ++j)
        for (int e = 0; e < 64; ++e) values[j * 64 + e] = float(j);
    auto mean = attention_reference(flat, zeros, keys, values);
    CHECK(mean.o[0] == doctest::Approx(1.5));
    CHECK(mean.lse[2] == doctest::Approx(std::log(4.0)));
    flat.causal = true;
    mean = attention_reference(flat, zeros, keys, values);
    CHECK(mean.o[0] == doctest::Approx(0.0));
    CHECK(mean.o[64] == doctest::Approx(0.5));
    CHECK(mean.o[128] == doctest::Approx(1.0));
    CHECK(mean.lse[1] == doctest::Approx(std::log(2.0)));

    // Chosen rows only, in the order asked: the same values as the whole computation's.
    const std::size_t rows[] = {2, 0};
    const auto some = attention_reference(flat, zeros, keys, values, 0, rows);
    REQUIRE(some.o.size() == 2 * 64);
    CHECK(some.o[0] == doctest::Approx(1.0));
    CHECK(some.o[64] == doctest::Approx(0.0));
    CHECK(some.lse[0] == doctest::Approx(std::log(3.0)));
    const std::size_t past[] = {3};
    CHECK(says(error_of([&] { (void)attention_reference(flat, zeros, keys, values, 0, past); }), "past the problem"));

    // No keys: O = 0, LSE = −∞.
    const AttentionShape none{.seq = 2, .kv_seq = 0, .head_dim = 64};
    const auto empty = attention_reference(none, std::vector<float>(128, 1.0f), {}, {});
    CHECK(std::ranges::all_of(empty.o, [](double x) { return x == 0.0; }));
    CHECK(empty.lse[0] == -std::numeric_limits<double>::infinity());
    CHECK(says(error_of([&] { (void)attention_reference(one, q, q, v); }), "sizes do not match"));
}

TEST_CASE("a forward's outputs against the reference: the error, the log-sum-exp, what was never written") {
    // Two heads of 3 queries sharing a head of 2 keys.
    const AttentionShape s{.heads = 2, .seq = 3, .kv_seq = 2, .head_dim = 64, .dtype = Scalar::f16};
    std::vector<float> q(2 * 3 * 64), k(2 * 64), v(2 * 64);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = float(i % 7) / 7;
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = float(i % 5) / 5, v[i] = float(i % 3) - 1;
    const AttentionReference ref = attention_reference(s, q, k, v);
    std::vector<float> o(ref.o.begin(), ref.o.end()), lse(ref.lse.begin(), ref.lse.end());
    AttentionCheck c = check_attention(s, o, lse, ref);
    CHECK(c.passed());
    CHECK(c.rows == 6);
    CHECK(c.error < 1e-7);
    CHECK(c.tolerance == 2e-3);
    CHECK(c.faults().empty());

    o[5] = std::numeric_limits<float>::quiet_NaN();  // never written
    lse[4] = std::numeric_limits<float>::quiet_NaN();
    c = check_attention(s, o, lse, ref);
    CHECK(c.unwritten == 2);
    CHECK_FALSE(c.passed());
    CHECK(says(c.faults(), "2 outputs never written (still NaN)"));
    o[5] = float(ref.o[5]), lse[4] = float(ref.lse[4]);

    for (auto& x : std::span(o).subspan(64, 64)) x += 0.5f;  // one row wrong
    c = check_attention(s, o, lse, ref);
    CHECK(c.error > c.tolerance);
    CHECK(says(c.faults(), "over the tolerance 2e-03"));
    o.assign(ref.o.begin(), ref.o.end());

    // A row with no key must say −∞; rows chosen are read where they lie in o.
    const AttentionShape none{.seq = 2, .kv_seq = 0, .head_dim = 64};
    const auto empty = attention_reference(none, std::vector<float>(128, 1.0f), {}, {});
    std::vector<float> zeros(128, 0.0f), finite{0.0f, -std::numeric_limits<float>::infinity()};
    c = check_attention(none, zeros, finite, empty);
    CHECK(c.lse_error == std::numeric_limits<double>::infinity());
    CHECK(says(c.faults(), "a row with no key must be -inf"));
    finite[0] = -std::numeric_limits<float>::infinity();
    CHECK(check_attention(none, zeros, finite, empty).passed());
    const std::size_t rows[] = {5, 1};
    const auto some = attention_reference(s, q, k, v, 0, rows);
    c = check_attention(s, o, lse, some, rows);
    CHECK(c.passed());
    CHECK(c.rows == 2);
    CHECK(says(error_of([&] { (void)check_attention(s, o, lse, some); }), "do not match the shape and rows"));
}

TEST_CASE("f32 to f16 and bf16 and back: round to nearest even, subnormals, infinities, NaN") {
    for (Scalar t : {Scalar::f16, Scalar::bf16})
        for (float x : {0.0f, 1.0f, -2.5f, 0.333251953125f, 1024.0f, -0.0009765625f})
            CHECK(from_16bit(to_16bit(x, t), t) == doctest::Approx(x).epsilon(t == Scalar::f16 ? 1e-3 : 8e-3));
    CHECK(to_16bit(1.0f, Scalar::f16) == 0x3c00);
    CHECK(to_16bit(1.0f, Scalar::bf16) == 0x3f80);
    CHECK(to_16bit(1.0f + 1.0f / 2048, Scalar::f16) == 0x3c00);      // a tie: to the even 1.0
    CHECK(to_16bit(1.0f + 3.0f / 2048, Scalar::f16) == 0x3c02);      // a tie: to the even 0x3c02
    CHECK(to_16bit(1.0f + 1.0f / 256, Scalar::bf16) == 0x3f80);      // a tie: to the even 1.0
    CHECK(to_16bit(5.960464477539063e-08f, Scalar::f16) == 0x0001);  // the smallest subnormal
    CHECK(from_16bit(0x0001, Scalar::f16) == doctest::Approx(5.960464477539063e-08));
    CHECK(to_16bit(70000.0f, Scalar::f16) == 0x7c00);
    CHECK(to_16bit(-70000.0f, Scalar::f16) == 0xfc00);
    CHECK(from_16bit(0x7bff, Scalar::f16) == 65504.0f);
    CHECK(std::isnan(from_16bit(to_16bit(std::nanf(""), Scalar::f16), Scalar::f16)));
    CHECK(std::isnan(from_16bit(to_16bit(std::nanf(""), Scalar::bf16), Scalar::bf16)));
    CHECK(std::isinf(from_16bit(to_16bit(INFINITY, Scalar::bf16), Scalar::bf16)));
}

TEST_CASE("attention tensors to and from [B, S, H, D] on the host: element (b, h, s, e) where the strides say") {
    // B = 2, H = 3, S = 4, D = 64: value = the element's [B, H, S, D] index.
    std::vector<float> bhsd(2 * 3 * 4 * 64);
    for (std::size_t i = 0; i < bhsd.size(); ++i) bhsd[i] = static_cast<float>(i % 256);  // exact in f16 and bf16
    const auto bshd = to_attention_layout(bhsd, 3, 4, 64, AttentionLayout::bshd, Scalar::f16);
    const auto strides = AttentionStrides::of(AttentionLayout::bshd, 3, 4, 64);
    CHECK(strides.row == 3 * 64);
    const std::size_t b = 1, h = 2, s = 3, e = 5;
    CHECK(from_16bit(bshd[b * strides.batch + h * strides.head + s * strides.row + e], Scalar::f16) ==
          bhsd[((b * 3 + h) * 4 + s) * 64 + e]);
    CHECK(from_attention_layout(bshd, 3, 4, 64, AttentionLayout::bshd, Scalar::f16) == bhsd);
    CHECK(from_attention_layout(to_attention_layout(bhsd, 3, 4, 64, AttentionLayout::bhsd, Scalar::bf16), 3, 4, 64,
                                AttentionLayout::bhsd, Scalar::bf16) == bhsd);
}

TEST_CASE(
    "every shipped attention configuration compiles with no spills: sm80 ones for sm_80, Hopper ones for sm_90a") {
    std::vector<Kernel> sm80, sm90, combine;
    for (const auto& family : shipped_kernels()) {
        if (family.name == attention_family) sm80 = family.configurations();
        if (family.name == attention_sm90_family) sm90 = family.configurations();
        if (family.name == attention_combine_family) combine = family.configurations();
    }
    REQUIRE(combine.size() == 2 * 3);  // dtypes × head dims
    const auto count = [](bool hopper, int head_dim) {
        return std::ranges::count_if(AttentionTiles::configurations(), [&](const auto& t) {
            return t.sm90 == hopper && t.unsupported_reason(head_dim).empty();
        });
    };
    REQUIRE(count(false, 96) == 5);
    REQUIRE(count(true, 96) == 0);
    REQUIRE(count(true, 64) == 4);
    REQUIRE(count(true, 128) == 3);  // not BLOCK_M=192 BLOCK_N=128
    // dtypes × causality × head dims.
    REQUIRE(sm80.size() == static_cast<std::size_t>(2 * 2 * (count(false, 64) + count(false, 96) + count(false, 128))));
    REQUIRE(sm90.size() == static_cast<std::size_t>(2 * 2 * (count(true, 64) + count(true, 128))));
    std::vector<test::CompileJob> jobs;
    for (const auto& k : sm80) {
        jobs.push_back({&k, "sm_80"});
        if (k.id().find("__128__128__128__") != std::string::npos) jobs.push_back({&k, "sm_90"});
    }
    for (const auto& k : sm90) {
        CHECK(k.only_for() == Arch::parse("sm_90a"));
        jobs.push_back({&k, "sm_90a"});
    }
    for (const auto& k : combine) jobs.push_back({&k, "sm_80"});
    test::compile_each(jobs, [](const test::CompileJob& job, const Compiled& c) {
        const Kernel& k = *job.kernel;
        CAPTURE(k.id());
        CAPTURE(std::string(job.arch));
        CHECK(c.resources.spill_store_bytes == 0);
        CHECK(c.resources.registers <= 255);
        const std::string type = k.id().find("__bf16__") != std::string::npos ? "bf16" : "f16";
        if (k.name() == attention_combine_family) {
            CHECK(c.ptx.find("cvt.rn." + type + "x2.f32") != std::string::npos);  // O rounded to the dtype
        } else if (k.name() == attention_sm90_family) {
            CHECK(c.ptx.find(".f32." + type + "." + type) != std::string::npos);
            CHECK(c.ptx.find("wgmma.mma_async.sync.aligned.m64n") != std::string::npos);
            CHECK(c.log.find("serialized") == std::string::npos);  // ptxas kept the wgmma asynchronous
            CHECK(c.ptx.find("cp.async.bulk.tensor.4d.shared::cluster.global") != std::string::npos);  // TMA
            // Two or three consumer warpgroups (168 or 128 registers at launch) take the producer's.
            if (k.max_threads_per_block() > 256)
                CHECK(c.ptx.find(k.max_threads_per_block() == 384
                                     ? "setmaxnreg.inc.sync.aligned.u32 240"
                                     : "setmaxnreg.inc.sync.aligned.u32 160") != std::string::npos);
            else CHECK(c.ptx.find("setmaxnreg") == std::string::npos);
            CHECK(c.resources.registers <= 65536 / k.max_threads_per_block());
        } else {
            CHECK(c.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type + ".f32") !=
                  std::string::npos);
            CHECK(c.ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") != std::string::npos);
            CHECK(c.ptx.find("cp.async.cg.shared.global") != std::string::npos);
        }
    });
}
