// The sm90 mainloop (sm_90a): acc += W · X over K with TF32 wgmma, fed by TMA through an
// mbarrier pipeline. wgmma wants both shared operands K-major; X's tiles are pixel-major, so a
// consumer warpgroup computes Yᵀ = Xᵀ · Wᵀ: A = Xᵀ (64 pixels × 8 of K) is read from the X boxes
// into registers, B = W (BLOCK_N channels × 8 of K) is read by the tensor cores through a
// descriptor. Every operand lands in 128-byte-swizzled rows of 32 floats:
//   W stage: BLOCK_N rows (channels) × 32 of K — one TMA box, 128-byte-swizzled rows of 32 floats
//   X stage: BLOCK_M/32 slots of 4 KB, each a box of 32 pixels × 32 of K (or a consumer
//            warpgroup's two slots one box of whole images), laid out as the Columns policy says
//            (it also says where each A element of a box lives)
// A policy may instead lay its X boxes out K-major (a_from_shared: channels-last x, each box row
// one pixel's 32 channels), and the tensor cores then read A through a descriptor as they read
// W (the "SS" form): Yᵀ = Xᵀ · Wᵀ still, with no fragments in registers.
// One producer warp issues the copies; the consumers wait on a stage's "full" barrier and hand
// it back through its "empty" barrier once their wgmma on it are done.
#pragma once
#include "kjit/gemm/tile_scheduler.cuh"
#include "kjit/gemm_geometry.cuh"
#include "kjit/ptx.cuh"
#include "kjit/ptx_sm90.cuh"

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the sm90 mainloop uses TMA, wgmma and setmaxnreg: compile it for sm_90a"
#endif

namespace gemm::sm90 {

using Geometry = kjit::Sm90Geometry;

/// Byte offset of element (row, col) in 128-byte-swizzled rows of 32 floats (the layout TMA's
/// SWIZZLE_128B writes into a 1024-byte-aligned box): 16-byte chunk index XOR row % 8.
__device__ __forceinline__ unsigned swizzled(int row, int col)
{
    return row * 128 + ((col / 4 ^ row % 8) * 16) + col % 4 * 4;
}

/// Where wgmma row r = 16·warp + 8·half + g of a warpgroup's 64 lives: box `box` of its two,
/// pixel `pixel` of the box. Chosen so a warp's A-fragment loads (8 rows g × 4 of K) and its
/// epilogue writes spread over the swizzled chunks instead of piling onto 8 banks.
struct RowPixel {
    int box;
    int pixel;
};
__device__ __forceinline__ RowPixel row_pixel(int warp, int half, int g)
{
    return {warp / 2, 4 * (2 * (warp % 2) + half) + 16 * (g / 4) + g % 4};
}

/// What a Columns policy may say, with the defaults of one that says nothing: `a_from_shared`
/// (its X boxes are K-major rows the tensor cores read through a descriptor; default: A is read
/// into registers), `loads_w` (its Loader copies each K step's W box itself, `load_w`; default:
/// the box at K offset 32·kt of a {K, N} map).
template <class Columns, class = void>
struct AFromShared {
    static constexpr bool value = false;
};
template <class Columns>
struct AFromShared<Columns, decltype(void(Columns::a_from_shared))> {
    static constexpr bool value = Columns::a_from_shared;
};
template <class Columns, class = void>
struct LoadsW {
    static constexpr bool value = false;
};
template <class Columns>
struct LoadsW<Columns, decltype(void(Columns::loads_w))> {
    static constexpr bool value = Columns::loads_w;
};
template <class Columns>
constexpr bool a_from_shared = AFromShared<Columns>::value;
template <class Columns>
constexpr bool loads_w = LoadsW<Columns>::value;

/// Where accumulator row r = 16·warp + 8·half + g of a consumer lands in its two output boxes:
/// where its A row was read (row_pixel), or, where the tensor cores read A from an X box in
/// order, pixel r.
template <class Columns>
__device__ __forceinline__ RowPixel output_row_pixel(int warp, int half, int g)
{
    if constexpr (a_from_shared<Columns>) return {warp / 2, 16 * (warp % 2) + 8 * half + g};
    else return row_pixel(warp, half, g);
}

/// The shared-memory plan of one block: STAGES × (W box, X boxes), the output boxes, barriers.
template <int BLOCK_M, int BLOCK_N, int STAGES>
struct Shared {
    static constexpr Geometry G{BLOCK_M, BLOCK_N, STAGES};
    unsigned base;  // 1024-aligned shared address

    __device__ explicit Shared(const void* dynamic) : base((kjit::shared_address(dynamic) + 1023) & ~1023u) {}
    __device__ unsigned w(int stage) const { return base + stage * G.stage_bytes(); }
    __device__ unsigned x(int stage, int box) const { return w(stage) + G.w_bytes() + box * G.x_box_bytes(); }
    __device__ unsigned y(int box) const { return base + STAGES * G.stage_bytes() + box * G.y_box_bytes(); }
    __device__ unsigned full(int stage) const { return base + G.barriers_offset() + stage * 8; }
    __device__ unsigned empty(int stage) const { return full(STAGES) + stage * 8; }
    /// Split-K (gemm/split_k_sm90.cuh): consumer warpgroup c's "parked" barrier (in block 0:
    /// every other block's partial tile is parked) and its "read" barrier (in the others: block
    /// 0 has read this block's partial).
    __device__ unsigned parked(int consumer) const { return empty(STAGES) + consumer * 8; }
    __device__ unsigned read(int consumer) const { return parked(G.consumers()) + consumer * 8; }
    /// The Columns policy's own shared memory, after the barriers.
    __device__ unsigned policy() const { return read(G.consumers()); }
};

/// A stage index and the parity of its barriers' current phase, advanced in lockstep by the
/// producer and every consumer.
template <int STAGES>
struct PipelineState {
    int stage = 0;
    unsigned phase = 0;
    __device__ void advance()
    {
        if (++stage == STAGES) stage = 0, phase ^= 1;
    }
};

/// Which of the producer warpgroup's threads feed the pipeline: one issues every TMA copy, or
/// all 128 gather X (Columns::gathers) while the first also issues W's copy.
template <class Columns>
constexpr int producer_threads = Columns::gathers ? 128 : 1;

/// Arrivals that complete a stage's "full" barrier: the W copy's expect_tx, and one per gathering
/// thread, made when its copies have landed.
template <class Columns>
constexpr unsigned full_arrivals = 1 + (Columns::gathers ? producer_threads<Columns> : 0);

/// The producer's side: for each K step of `k` (all of K, or a split-K block's share), wait until the consumers released the stage, then
/// fill it — W's box by TMA, X as the Columns policy's loader says (TMA boxes, counted in the
/// expected bytes: the whole boxes, zero-filled where they leave the tensor; or gathered copies
/// that arrive on the barrier themselves).
template <int BLOCK_M, int BLOCK_N, int STAGES, class Columns>
__device__ __forceinline__ void produce_tile(const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, const Columns& columns,
                                             const kjit::TensorMap& w_map, int tile_m, int row0, KRange k,
                                             PipelineState<STAGES>& pipe)
{
    constexpr Geometry G{BLOCK_M, BLOCK_N, STAGES};
    const auto loader = columns.loader(tile_m, row0, shared.policy());
    for (int kt = k.begin; kt < k.begin + k.count; ++kt, pipe.advance()) {
        kjit::mbarrier_wait(shared.empty(pipe.stage), pipe.phase ^ 1);  // a fresh barrier's "previous" phase is done
        const unsigned full = shared.full(pipe.stage);
        if (threadIdx.x == 0) {
            kjit::mbarrier_arrive_expect_tx(full, G.w_bytes() + loader.x_tx_bytes());
            if constexpr (loads_w<Columns>) loader.load_w(shared.w(pipe.stage), w_map, kt, row0, full);
            else kjit::tma_load(shared.w(pipe.stage), w_map, kt * G.block_k, row0, full);
        }
        loader.load(shared.x(pipe.stage, 0), G.x_box_bytes(), kt, full);
        if constexpr (Columns::gathers) kjit::copy_async_arrive(full);
    }
}

/// The pixels of its X box that this thread's two A rows (g and g + 8 of its warp's 16) are: a
/// Columns policy's `fragments` works out once per tile where they read.
struct ThreadPixels {
    int pixel[2];
};
__device__ __forceinline__ ThreadPixels thread_pixels()
{
    const int warp = threadIdx.x / 32 % 4, g = threadIdx.x % 32 / 4;
    return {{row_pixel(warp, 0, g).pixel, row_pixel(warp, 1, g).pixel}};
}

/// A's elements where X boxes are 128-byte-swizzled rows of 32 pixels, one per k of the step
/// (the 1×1 kernel's TMA boxes, the gathered boxes): X[k][pixel] of a box.
struct PixelMajorFragments {
    ThreadPixels rows;
    __device__ static int step(int) { return 0; }
    __device__ static int k_entry(int, int k) { return k; }
    __device__ float at(unsigned box, int k, int half) const
    {
        return kjit::load_shared(box + swizzled(k, rows.pixel[half]));
    }
};

/// One thread's accumulators in the wgmma layout: d[v0 + 2·v1 + 4·j] is row 16w + g + 8·v1
/// (a pixel, row_pixel) and column 8·j + 2·t + v0 (a channel) of its warpgroup's 64 × BLOCK_N.
template <int BLOCK_N>
using Accumulators = float[BLOCK_N / 2];

/// This thread's X box of a consumer warpgroup's two: its rows' pixels share one.
__device__ __forceinline__ int a_box(int consumer) { return 2 * consumer + row_pixel(threadIdx.x / 32 % 4, 0, 0).box; }

/// The A fragments of K step `kt` (32 of K: 4 wgmma k8) for this thread, tf32-rounded, from its
/// X box in the stage, read where the Columns policy's `fragments` (for this tile) place them:
/// `step` once per K step, `k_entry` once per k, `at` per (k, row half).
template <int BLOCK_M, int BLOCK_N, int STAGES, class Fragments>
__device__ __forceinline__ void load_a(unsigned (&a)[4][4], const Shared<BLOCK_M, BLOCK_N, STAGES>& shared,
                                       const Fragments& fragments, int stage, int consumer, int kt)
{
    const int t = threadIdx.x % 4;
    const unsigned box = shared.x(stage, a_box(consumer));
    const auto step = fragments.step(kt);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
        const int k = 8 * s + t;
        const auto k_lo = fragments.k_entry(step, k), k_hi = fragments.k_entry(step, k + 4);
        a[s][0] = kjit::to_tf32(fragments.at(box, k_lo, 0));
        a[s][1] = kjit::to_tf32(fragments.at(box, k_lo, 1));
        a[s][2] = kjit::to_tf32(fragments.at(box, k_hi, 0));
        a[s][3] = kjit::to_tf32(fragments.at(box, k_hi, 1));
    }
}

/// One K step's wgmma for this warpgroup: acc += Aᵀ_step · W_step, 4 wgmma k8 in one group.
template <int BLOCK_M, int BLOCK_N, int STAGES>
__device__ __forceinline__ void issue_wgmma(Accumulators<BLOCK_N>& acc, const unsigned (&a)[4][4],
                                            const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, int stage)
{
    kjit::wgmma_fence();  // the A fragments and the accumulators, before wgmma reads them
#pragma unroll
    for (int s = 0; s < 4; ++s)
        kjit::wgmma_tf32<BLOCK_N>(acc, a[s], kjit::wgmma_descriptor_swizzle128(shared.w(stage) + 32 * s));
    kjit::wgmma_commit();
}

/// The consumers' side for one tile: acc = Σ over the K steps of `k` of Xᵀ_step · Wᵀ_step for this
/// warpgroup's 64 pixels. With two A-fragment buffers (Geometry::a_buffers) the next step's
/// fragments are read from its stage into the other buffer while this step's wgmma run, so a
/// consumer's shared-memory reads overlap its own tensor work and not only the other
/// consumer's; with one, a step's wgmma retire before the next step's fragments are read. ptxas
/// serialises every wgmma (C7513) once a register an in-flight wgmma reads is written, the RS
/// form's rule: the buffers are distinct registers (the loop is unrolled by two steps). A stage
/// goes back to the producer as soon as its wgmma are done.
template <int BLOCK_M, int BLOCK_N, int STAGES, class Columns>
__device__ __forceinline__ void consume_tile_rs(Accumulators<BLOCK_N>& acc,
                                                const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, const Columns& columns,
                                                int consumer, int tile_m, KRange k, PipelineState<STAGES>& pipe)
{
    constexpr int buffers = Geometry{BLOCK_M, BLOCK_N, STAGES}.a_buffers();
    const auto fragments = columns.fragments(tile_m, a_box(consumer), shared.policy(), thread_pixels());
    const bool releases = threadIdx.x % 32 == 0;  // one arrival per consumer warp
    const int end = k.begin + k.count;
#pragma unroll
    for (int i = 0; i < BLOCK_N / 2; ++i) acc[i] = 0.0f;
    // The current stage's A fragments, once it is full.
    auto fetch = [&](unsigned(&a)[4][4], int kt) {
        kjit::mbarrier_wait(shared.full(pipe.stage), pipe.phase);
        load_a(a, shared, fragments, pipe.stage, consumer, kt);
    };
    auto retire = [&](int stage) {
        kjit::wgmma_wait<0>();
        if (releases) kjit::mbarrier_arrive(shared.empty(stage));
    };
    if constexpr (buffers == 1) {
        for (int kt = k.begin; kt < end; ++kt, pipe.advance()) {
            unsigned a[4][4];
            fetch(a, kt);
            issue_wgmma(acc, a, shared, pipe.stage);
            retire(pipe.stage);
        }
    } else {
        if (k.count == 0) return;  // a split-K block past the end of K
        unsigned a[2][4][4];
        // Step kt: its wgmma from buffer `now` while the next step's fragments go into `next`;
        // false once K is done.
        auto step = [&](int kt, const unsigned(&now)[4][4], unsigned(&next)[4][4]) {
            issue_wgmma(acc, now, shared, pipe.stage);
            const int issued = pipe.stage;
            pipe.advance();
            const bool more = kt + 1 < end;
            if (more) fetch(next, kt + 1);
            retire(issued);
            return more;
        };
        fetch(a[0], k.begin);
        for (int kt = k.begin; step(kt, a[0], a[1]) && step(kt + 1, a[1], a[0]); kt += 2) {}
    }
}

/// The consumers' side for one tile where both operands are in shared memory (a_from_shared):
/// a K step is 4 wgmma k8 on this warpgroup's 64 X rows and the stage's W box, and one step's
/// group stays in flight while the next is issued — a stage goes back to the producer once the
/// group after it was issued and its own has retired.
template <int BLOCK_M, int BLOCK_N, int STAGES>
__device__ __forceinline__ void consume_tile_ss(Accumulators<BLOCK_N>& acc,
                                                const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, int consumer, KRange k,
                                                PipelineState<STAGES>& pipe)
{
    const bool releases = threadIdx.x % 32 == 0;  // one arrival per consumer warp
#pragma unroll
    for (int i = 0; i < BLOCK_N / 2; ++i) acc[i] = 0.0f;
    int retiring = -1;  // the stage whose group is still in flight
    for (int kt = k.begin; kt < k.begin + k.count; ++kt, pipe.advance()) {
        kjit::mbarrier_wait(shared.full(pipe.stage), pipe.phase);
        const unsigned x = shared.x(pipe.stage, 2 * consumer), w = shared.w(pipe.stage);
        kjit::wgmma_fence();
#pragma unroll
        for (int s = 0; s < 4; ++s)
            kjit::wgmma_tf32_ss<BLOCK_N>(acc, kjit::wgmma_descriptor_swizzle128(x + 32 * s),
                                         kjit::wgmma_descriptor_swizzle128(w + 32 * s));
        kjit::wgmma_commit();
        kjit::wgmma_wait<1>();
        if (retiring >= 0 && releases) kjit::mbarrier_arrive(shared.empty(retiring));
        retiring = pipe.stage;
    }
    kjit::wgmma_wait<0>();
    if (retiring >= 0 && releases) kjit::mbarrier_arrive(shared.empty(retiring));
}

/// The consumers' side for one tile, in the form the policy's X boxes allow: SS where they are
/// K-major, else RS.
template <int BLOCK_M, int BLOCK_N, int STAGES, class Columns>
__device__ __forceinline__ void consume_tile(Accumulators<BLOCK_N>& acc, const Shared<BLOCK_M, BLOCK_N, STAGES>& shared,
                                             const Columns& columns, int consumer, int tile_m, KRange k,
                                             PipelineState<STAGES>& pipe)
{
    if constexpr (a_from_shared<Columns>) consume_tile_ss(acc, shared, consumer, k, pipe);
    else consume_tile_rs(acc, shared, columns, consumer, tile_m, k, pipe);
}

}  // namespace gemm::sm90
