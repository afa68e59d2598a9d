// The attention mainloop on Hopper (sm_90a), FlashAttention-3's structure. A producer warpgroup
// (one thread; it gives its registers to the others) copies Q once and K and V tile by tile with
// TMA into 128-byte-swizzled tiles, through a ring of STAGES stages whose "full" barriers the
// copies complete and whose "empty" barriers the consumers arrive on once their wgmma are done
// with a tile. Each consumer warpgroup owns 64 query rows (a warp 16 of them, as in the sm80
// mainloop, so the online softmax and the epilogue are shared) and computes S = Q·Kᵀ (both in
// shared memory) and O += P·V (P from registers, V read N-major) on wgmma. Within a warpgroup
// the next tile's S and this tile's P·V are issued together and the softmax of the next tile
// runs while P·V is in flight: O is rescaled only once P·V has landed. Across warpgroups, they
// take turns issuing (ping-pong): while one's matmuls hold the tensor cores the others run their
// softmax. A warpgroup whose rows see fewer of the block's key tiles (under the causal mask, or
// rows past the queries' end) computes only those, and leaves the tensor cores to the others.
#pragma once
#include "kjit/attention/online_softmax.cuh"
#include "kjit/attention/tile_scheduler.cuh"
#include "kjit/attention/tiles.cuh"
#include "kjit/attention/wgmma_16bit.cuh"
#include "kjit/ptx_sm90.cuh"
#include "kjit/register_split.cuh"

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the Hopper attention mainloop uses TMA, wgmma and setmaxnreg: compile it for sm_90a"
#endif

namespace attention {

/// Q, K and V as TMA maps over {D, S, H, B}, innermost first.
struct TensorMaps {
    const kjit::TensorMap &q, &k, &v;
};

/// ROWS rows of HEAD_DIM 16-bit values as HEAD_DIM/64 column blocks of ROWS × 128 bytes, 16-byte
/// chunk c of row r stored at chunk c ^ (r % 8): TMA's 128-byte swizzle, which wgmma reads (each
/// 8 rows an atom; the tile starts on a 1024-byte boundary).
template <int ROWS, int HEAD_DIM>
struct SwizzledTile {
    static constexpr int BYTES = HEAD_DIM / 64 * ROWS * 128;
    static_assert(HEAD_DIM % 64 == 0, "whole 128-byte column blocks");

    /// Rows row0 … row0 + ROWS − 1 of head `head` of batch `batch`, a box per column block,
    /// completing on `bar`; TMA zero-fills rows past the tensor's.
    static __device__ __forceinline__ void load(unsigned tile, const kjit::TensorMap& map, int row0, int head,
                                                int batch, unsigned bar)
    {
        for (int b = 0; b < HEAD_DIM / 64; ++b)
            kjit::tma_load(tile + b * ROWS * 128, map, b * 64, row0, head, batch, bar);
    }
};

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
struct MainloopSm90 {
    static constexpr int CONSUMERS = BLOCK_M / 64, THREADS = 128 * (CONSUMERS + 1), N8 = BLOCK_N / 8, STAGES = 2;
    /// Registers a thread (kjit/register_split.cuh): the producer keeps 24.
    static constexpr kjit::RegisterSplit REGISTERS{CONSUMERS, 24};
    using QTile = SwizzledTile<BLOCK_M, HEAD_DIM>;
    using KVTile = SwizzledTile<BLOCK_N, HEAD_DIM>;
    /// Shared memory (src/ops/attention/attention_op.cpp's shared_bytes() adds it up): slack to
    /// align the tiles to 1024 bytes, Q, the stages of K and of V, and the barriers — Q full; K,
    /// V full and empty a stage.
    static_assert(BLOCK_M * (HEAD_DIM + 8) * 2 <= 2 * STAGES * KVTile::BYTES,
                  "the epilogue stages O in K's and V's tiles");

    unsigned q_tile, k_tiles, v_tiles, barriers;

    __device__ __forceinline__ explicit MainloopSm90(unsigned shared)
        : q_tile((shared + 1023) & ~1023u),
          k_tiles(q_tile + QTile::BYTES),
          v_tiles(k_tiles + STAGES * KVTile::BYTES),
          barriers(v_tiles + STAGES * KVTile::BYTES)
    {
    }

    __device__ __forceinline__ unsigned q_full() const { return barriers; }
    __device__ __forceinline__ unsigned k_full(int stage) const { return barriers + 8 * (1 + stage); }
    __device__ __forceinline__ unsigned v_full(int stage) const { return barriers + 8 * (1 + STAGES + stage); }
    __device__ __forceinline__ unsigned k_empty(int stage) const { return barriers + 8 * (1 + 2 * STAGES + stage); }
    __device__ __forceinline__ unsigned v_empty(int stage) const { return barriers + 8 * (1 + 3 * STAGES + stage); }
    __device__ __forceinline__ unsigned k_tile(int stage) const { return k_tiles + stage * KVTile::BYTES; }
    __device__ __forceinline__ unsigned v_tile(int stage) const { return v_tiles + stage * KVTile::BYTES; }

    /// The i-th key tile of a block's pass in the ring: its stage, and the parity of that
    /// stage's phase.
    struct Slot {
        int stage;
        unsigned phase;
        __device__ __forceinline__ explicit Slot(int i) : stage(i % STAGES), phase(i / STAGES % 2) {}
    };

    /// The producer's thread: Q, then K and V of each key tile once the consumers freed the stage
    /// (a fresh barrier's "previous" phase counts as complete, so the first pass does not wait).
    __device__ __forceinline__ void produce(const TensorMaps& in, const Work& w, int seq, int kv_seq) const
    {
        const KeyTiles tiles = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq);
        if (tiles.count() == 0) return;
        kjit::mbarrier_arrive_expect_tx(q_full(), QTile::BYTES);
        QTile::load(q_tile, in.q, w.m0, w.head, w.batch, q_full());
        for (int i = 0; i < tiles.count(); ++i) {
            const Slot slot(i);
            const int n0 = (tiles.begin + i) * BLOCK_N;
            kjit::mbarrier_wait(k_empty(slot.stage), slot.phase ^ 1);
            kjit::mbarrier_arrive_expect_tx(k_full(slot.stage), KVTile::BYTES);
            KVTile::load(k_tile(slot.stage), in.k, n0, w.kv_head, w.batch, k_full(slot.stage));
            kjit::mbarrier_wait(v_empty(slot.stage), slot.phase ^ 1);
            kjit::mbarrier_arrive_expect_tx(v_full(slot.stage), KVTile::BYTES);
            KVTile::load(v_tile(slot.stage), in.v, n0, w.kv_head, w.batch, v_full(slot.stage));
        }
    }

    /// Issues S = Q · K for the pass's i-th key tile and this warpgroup's 64 rows once it is in:
    /// k steps of 16 walk 32 bytes along a swizzled row, then on to the next column block.
    __device__ __forceinline__ void issue_scores(float (&s)[N8][4], int i) const
    {
        const Slot slot(i);
        const unsigned q = q_tile + threadIdx.x / 128 * 64 * 128, k = k_tile(slot.stage);
        for (int nt = 0; nt < N8; ++nt)
            for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
        kjit::mbarrier_wait(k_full(slot.stage), slot.phase);
        kjit::wgmma_fence();
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
            const unsigned step = kk / 4, within = kk % 4 * 32;
            wgmma_ss<T, BLOCK_N>(reinterpret_cast<float(&)[BLOCK_N / 2]>(s),
                                 kjit::wgmma_descriptor_swizzle128(q + step * BLOCK_M * 128 + within),
                                 kjit::wgmma_descriptor_swizzle128(k + step * BLOCK_N * 128 + within));
        }
        kjit::wgmma_commit();
    }

    /// Issues O += P · V for the pass's i-th key tile once its V is in: V's 16 rows a k step are
    /// two swizzle atoms along K (1024 bytes apart), its column blocks of 64 along N (a tile's
    /// rows × 128 bytes apart).
    __device__ __forceinline__ void issue_values(Accumulator<HEAD_DIM>& acc, const unsigned (&p)[BLOCK_N / 16][4],
                                                 int i) const
    {
        const Slot slot(i);
        kjit::mbarrier_wait(v_full(slot.stage), slot.phase);
        kjit::wgmma_fence();
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            const unsigned long long v =
                kjit::wgmma_descriptor(v_tile(slot.stage) + kk * 16 * 128, BLOCK_N * 128, 1024) | 1ull << 62;
            wgmma_rs_n_major<T, HEAD_DIM>(reinterpret_cast<float(&)[HEAD_DIM / 2]>(acc.o), p[kk], v);
        }
        kjit::wgmma_commit();
    }

    /// One arrival a consumer warp on `bar`: its warpgroup's wgmma are done with that tile.
    __device__ __forceinline__ void release(unsigned bar) const
    {
        if (threadIdx.x % 32 == 0) kjit::mbarrier_arrive(bar);
    }

    /// The consumers' turns at issuing matmuls, round robin: warpgroup i waits on barrier
    /// FIRST_TURN + i, which the one before it arrives on once it has issued. Each takes a pass's
    /// count of turns (a tile's scores, then a tile's scores and the one before's values, the last
    /// values: the block's tiles + 1) whatever its own rows see; the last starts the round (an
    /// arrival the first's first turn takes) and makes no arrival after its last turn, so every
    /// barrier's arrivals match its waits. Barrier 1 closes the pass.
    struct Turns {
        static constexpr int FIRST_TURN = 2;
        int consumer, left;
        __device__ __forceinline__ void begin_round() const
        {
            if (CONSUMERS > 1 && consumer == CONSUMERS - 1) kjit::named_barrier_arrive(FIRST_TURN, 256);
        }
        __device__ __forceinline__ void wait() const
        {
            if (CONSUMERS > 1) kjit::named_barrier_sync(FIRST_TURN + consumer, 256);
        }
        __device__ __forceinline__ void pass()
        {
            --left;
            if (CONSUMERS > 1 && !(left == 0 && consumer == CONSUMERS - 1))
                kjit::named_barrier_arrive(FIRST_TURN + (consumer + 1) % CONSUMERS, 256);
        }
    };

    /// A consumer warpgroup's pass over the key tiles its rows see, S_i the pass's i-th tile's
    /// scores (key tile begin + i); then the block's tiles its rows do not see (causal, or rows
    /// past the queries' end), each only waited for and released, so that the producer's
    /// barriers and the others' turns count the same.
    __device__ __forceinline__ void consume(Accumulator<HEAD_DIM>& acc, const Work& w, int seq, int kv_seq,
                                            float c) const
    {
        const int consumer = threadIdx.x / 128, row0 = w.m0 + threadIdx.x / 32 * 16 + threadIdx.x % 32 / 4;
        const int n = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq).count();
        const KeyTiles tiles = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq, w.m0 + 64 * consumer, 64);
        acc.clear();
        if (n == 0) return;
        Turns turns{consumer, n + 1};
        turns.begin_round();
        const int seen = tiles.count();
        if (seen > 0) attend(acc, tiles, turns, row0, kv_seq, c);
        for (int i = seen; i < n; ++i) {
            turns.wait();
            turns.pass();
            const Slot slot(i);
            kjit::mbarrier_wait(k_full(slot.stage), slot.phase);
            release(k_empty(slot.stage));
            kjit::mbarrier_wait(v_full(slot.stage), slot.phase);
            release(v_empty(slot.stage));
        }
        if (turns.left > 0) turns.wait(), turns.pass();  // rows that see no tile: n tiles, n + 1 turns
    }

    /// The matmuls and the softmax of the tiles a consumer's rows see, `tiles.count()` + 1 turns.
    __device__ __forceinline__ void attend(Accumulator<HEAD_DIM>& acc, const KeyTiles& tiles, Turns& turns, int row0,
                                           int kv_seq, float c) const
    {
        const int n = tiles.count();
        float s[N8][4], rescale[2];
        unsigned p[BLOCK_N / 16][4];
        // S_i to P_i in the registers p: masked where a row sees a key it must not.
        auto softmax = [&](int i) {
            const int j = tiles.begin + i;
            if (j >= tiles.first_masked) mask_scores<CAUSAL>(s, j * BLOCK_N, row0, kv_seq);
            softmax_rows(acc, s, c, rescale);
        };
        auto to_fragments = [&] {
            for (int kk = 0; kk < BLOCK_N / 16; ++kk) p_fragment<T>(p[kk], s, kk);
        };
        kjit::mbarrier_wait(q_full(), 0);
        turns.wait();
        issue_scores(s, 0);
        turns.pass();
        kjit::wgmma_wait<0>();
        fence_registers(s);
        release(k_empty(0));
        softmax(0);  // O is still 0: nothing to rescale
        to_fragments();
        for (int i = 1; i < n; ++i) {
            turns.wait();
            issue_scores(s, i);
            issue_values(acc, p, i - 1);
            turns.pass();
            kjit::wgmma_wait<1>();  // S_i is in; P_{i−1}·V_{i−1} may still run
            fence_registers(s);
            release(k_empty(Slot(i).stage));
            softmax(i);
            kjit::wgmma_wait<0>();
            fence_registers(acc.o);
            release(v_empty(Slot(i - 1).stage));
            acc.rescale(rescale);
            to_fragments();
        }
        turns.wait();
        issue_values(acc, p, n - 1);
        turns.pass();
        kjit::wgmma_wait<0>();
        fence_registers(acc.o);
        release(v_empty(Slot(n - 1).stage));
    }

    /// The whole pass for the block's query rows w.m0 … w.m0 + BLOCK_M − 1 of one head. Consumer
    /// threads return true with their rows' O, m and l; the producer's return false.
    __device__ __forceinline__ bool run(Accumulator<HEAD_DIM>& acc, const TensorMaps& in, const Work& w, int seq,
                                        int kv_seq, float c) const
    {
        if (threadIdx.x == 0) {
            kjit::mbarrier_init(q_full(), 1);
            for (int s = 0; s < STAGES; ++s) {
                kjit::mbarrier_init(k_full(s), 1);  // the producer's expect_tx
                kjit::mbarrier_init(v_full(s), 1);
                kjit::mbarrier_init(k_empty(s), 4 * CONSUMERS);  // one per consumer warp
                kjit::mbarrier_init(v_empty(s), 4 * CONSUMERS);
            }
            kjit::fence_barrier_init();
        }
        __syncthreads();
        if (threadIdx.x / 128 == CONSUMERS) {
            if constexpr (CONSUMERS > 1) kjit::setmaxnreg_dec<REGISTERS.producer>();
            if (threadIdx.x == 128 * CONSUMERS) {
                kjit::prefetch_tensor_map(in.k);
                kjit::prefetch_tensor_map(in.v);
                produce(in, w, seq, kv_seq);
            }
            return false;
        }
        if constexpr (CONSUMERS > 1) kjit::setmaxnreg_inc<REGISTERS.consumer()>();
        consume(acc, w, seq, kv_seq, c);
        // Every consumer's wgmma are done before the epilogue stages O over K's and V's tiles;
        // every copy the producer issued has landed (each was waited for).
        kjit::named_barrier_sync(1, 128 * CONSUMERS);
        return true;
    }

    /// Where the epilogue stages O (padded rows, BLOCK_M × (HEAD_DIM + 8) values): K's and V's
    /// tiles, free after the pass.
    __device__ __forceinline__ unsigned staging() const { return k_tiles; }
};

}  // namespace attention
