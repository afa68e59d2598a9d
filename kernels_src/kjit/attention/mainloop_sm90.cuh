// The attention mainloop on Hopper (sm_90a), FlashAttention-3's structure, for a persistent block's
// query tiles. A producer warpgroup (one thread; it gives its registers to the others) copies each
// query tile's Q into one of two Q tiles, and its K and V tile by tile, with TMA into
// 128-byte-swizzled tiles, through a ring of STAGES stages whose "full" barriers the copies
// complete and whose "empty" barriers the consumers arrive on once their wgmma are done with a
// tile; so the next query tile's Q and first keys load while the consumers finish this one, and
// each consumer stages its rows' O in its own rows of its query tile's Q tile. Each consumer
// warpgroup owns 64 query rows (a warp 16 of them, as in the sm80 mainloop, so the online softmax
// and the epilogue are shared) and computes S = Q·Kᵀ (both in shared memory) and O += P·V (P from
// registers, V read N-major) on wgmma. Within a warpgroup the next tile's S and this tile's P·V are
// issued together and the softmax of the next tile runs while P·V is in flight: O is rescaled only
// once P·V has landed. Across warpgroups, they take turns issuing (ping-pong), across query tiles
// too: while one's matmuls hold the tensor cores the others run their softmax, or their epilogue. A
// warpgroup whose rows see fewer of the block's key tiles (under the causal mask, or rows past the
// queries' end) computes only those, and leaves the tensor cores to the others.
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

    /// The shared address of element (row, col) of the tile at `tile`.
    static __device__ __forceinline__ unsigned at(unsigned tile, int row, int col)
    {
        return tile + col / 64 * ROWS * 128 + row * 128 + ((col % 64 / 8) ^ (row % 8)) * 16 + col % 8 * 2;
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
    /// align the tiles to 1024 bytes, two Q tiles (the next query tile's loads while this one
    /// runs; each also stages its tile's O for the epilogue), the stages of K and of V, and the
    /// barriers — Q full and empty a Q tile; K, V full and empty a stage.
    static constexpr int Q_TILES = 2;

    unsigned q_tiles, k_tiles, v_tiles, barriers;

    __device__ __forceinline__ explicit MainloopSm90(unsigned shared)
        : q_tiles((shared + 1023) & ~1023u),
          k_tiles(q_tiles + Q_TILES * QTile::BYTES),
          v_tiles(k_tiles + STAGES * KVTile::BYTES),
          barriers(v_tiles + STAGES * KVTile::BYTES)
    {
    }

    __device__ __forceinline__ unsigned q_full(int b) const { return barriers + 8 * b; }
    __device__ __forceinline__ unsigned q_empty(int b) const { return barriers + 8 * (Q_TILES + b); }
    __device__ __forceinline__ unsigned k_full(int stage) const { return barriers + 8 * (2 * Q_TILES + stage); }
    __device__ __forceinline__ unsigned v_full(int stage) const
    {
        return barriers + 8 * (2 * Q_TILES + STAGES + stage);
    }
    __device__ __forceinline__ unsigned k_empty(int stage) const
    {
        return barriers + 8 * (2 * Q_TILES + 2 * STAGES + stage);
    }
    __device__ __forceinline__ unsigned v_empty(int stage) const
    {
        return barriers + 8 * (2 * Q_TILES + 3 * STAGES + stage);
    }
    __device__ __forceinline__ unsigned q_tile(int b) const { return q_tiles + b * QTile::BYTES; }
    __device__ __forceinline__ unsigned k_tile(int stage) const { return k_tiles + stage * KVTile::BYTES; }
    __device__ __forceinline__ unsigned v_tile(int stage) const { return v_tiles + stage * KVTile::BYTES; }

    /// The i-th of the block's key tiles (over all its query tiles) in the ring, or the i-th of
    /// its query tiles among the Q tiles: its buffer, and the parity of that buffer's phase.
    template <int BUFFERS>
    struct Slot {
        int stage;
        unsigned phase;
        __device__ __forceinline__ explicit Slot(int i) : stage(i % BUFFERS), phase(i / BUFFERS % 2) {}
    };
    using KeySlot = Slot<STAGES>;
    using QuerySlot = Slot<Q_TILES>;

    /// How far a thread is through the block's query tiles and key tiles, each counted mod 4 —
    /// all a Slot needs (two buffers, two phases) — in one register.
    struct Progress {
        unsigned bits = 0;  // query tiles in bits 0–1, key tiles in bits 2–3
        __device__ __forceinline__ int queries() const { return bits & 3; }
        __device__ __forceinline__ int keys() const { return bits >> 2; }
        __device__ __forceinline__ void next_query() { bits = (bits & 12u) | ((bits + 1) & 3u); }
        __device__ __forceinline__ void add_keys(int n) { bits = (bits & 3u) | ((bits >> 2) + n & 3u) << 2; }
    };

    /// The producer's thread, over the block's query tiles: Q once the consumers freed its tile
    /// (the epilogue of the query tile two before), then K and V of each key tile once they freed
    /// the stage. A fresh barrier's "previous" phase counts as complete, so the first waits pass.
    /// A query tile with no keys loads nothing: its Q barrier is only arrived on.
    template <class Schedule>
    __device__ __forceinline__ void produce(const TensorMaps& in, const Schedule& schedule, int seq, int kv_seq) const
    {
        Progress p;
        schedule.for_each(blockIdx.x, [&](TileIndex tile) {
            const Work w = schedule.work(tile);
            const KeyTiles tiles = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq);
            const QuerySlot q(p.queries());
            p.next_query();
            kjit::mbarrier_wait(q_empty(q.stage), q.phase ^ 1);
            if (tiles.count() == 0) {
                kjit::mbarrier_arrive(q_full(q.stage));
                return;
            }
            kjit::mbarrier_arrive_expect_tx(q_full(q.stage), QTile::BYTES);
            QTile::load(q_tile(q.stage), in.q, w.m0, w.head, w.batch, q_full(q.stage));
            for (int i = 0; i < tiles.count(); ++i) {
                const KeySlot slot(p.keys() + i);
                const int n0 = (tiles.begin + i) * BLOCK_N;
                kjit::mbarrier_wait(k_empty(slot.stage), slot.phase ^ 1);
                kjit::mbarrier_arrive_expect_tx(k_full(slot.stage), KVTile::BYTES);
                KVTile::load(k_tile(slot.stage), in.k, n0, w.kv_head, w.batch, k_full(slot.stage));
                kjit::mbarrier_wait(v_empty(slot.stage), slot.phase ^ 1);
                kjit::mbarrier_arrive_expect_tx(v_full(slot.stage), KVTile::BYTES);
                KVTile::load(v_tile(slot.stage), in.v, n0, w.kv_head, w.batch, v_full(slot.stage));
            }
            p.add_keys(tiles.count());
        });
    }

    /// S (+)= Q · K over columns 16·kk … 16·kk + 15: 32 bytes along a swizzled row, then on to the
    /// next column block.
    template <bool ACCUMULATE>
    __device__ __forceinline__ void score_step(float (&s)[N8][4], unsigned q, unsigned k, int kk) const
    {
        const unsigned block = kk / 4 * 128, within = kk % 4 * 32;
        wgmma_ss<T, BLOCK_N, ACCUMULATE>(reinterpret_cast<float(&)[BLOCK_N / 2]>(s),
                                         kjit::wgmma_descriptor_swizzle128(q + block * BLOCK_M + within),
                                         kjit::wgmma_descriptor_swizzle128(k + block * BLOCK_N + within));
    }

    /// Issues S = Q · K for the block's i-th key tile and this warpgroup's 64 rows of Q tile
    /// `q_tile` once it is in.
    __device__ __forceinline__ void issue_scores(float (&s)[N8][4], unsigned q_tile, int i) const
    {
        const KeySlot slot(i);
        const unsigned q = q_tile + threadIdx.x / 128 * 64 * 128, k = k_tile(slot.stage);
        kjit::mbarrier_wait(k_full(slot.stage), slot.phase);
        kjit::wgmma_fence();
        score_step<false>(s, q, k, 0);  // S = Q·K over the first 16 columns: the registers' old S is dropped
        for (int kk = 1; kk < HEAD_DIM / 16; ++kk) score_step<true>(s, q, k, kk);
        kjit::wgmma_commit();
    }

    /// Issues O += P · V for the block's i-th key tile once its V is in: V's 16 rows a k step are
    /// two swizzle atoms along K (1024 bytes apart), its column blocks of 64 along N (a tile's
    /// rows × 128 bytes apart).
    __device__ __forceinline__ void issue_values(Accumulator<HEAD_DIM>& acc, const unsigned (&p)[BLOCK_N / 16][4],
                                                 int i) const
    {
        const KeySlot slot(i);
        kjit::mbarrier_wait(v_full(slot.stage), slot.phase);
        kjit::wgmma_fence();
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            const unsigned long long v =
                kjit::wgmma_descriptor(v_tile(slot.stage) + kk * 16 * 128, BLOCK_N * 128, 1024) | 1ull << 62;
            wgmma_rs_n_major<T, HEAD_DIM>(reinterpret_cast<float(&)[HEAD_DIM / 2]>(acc.o), p[kk], v);
        }
        kjit::wgmma_commit();
    }

    /// One arrival a consumer warp on `bar`: its warpgroup is done with that buffer.
    __device__ __forceinline__ void release(unsigned bar) const
    {
        if (threadIdx.x % 32 == 0) kjit::mbarrier_arrive(bar);
    }

    /// The consumers' turns at issuing matmuls, round robin over all the block's query tiles:
    /// warpgroup i waits on barrier FIRST_TURN + i, which the one before it arrives on once it
    /// has issued. Each takes a query tile's count of turns (a tile's scores, then a tile's
    /// scores and the one before's values, the last values: the tile's key tiles + 1) whatever
    /// its own rows see, so the first takes the next query tile's first turn as soon as the last
    /// has issued this one's last values. The last starts the round (an arrival the first's first
    /// turn takes) and the first ends it (taking the last's final arrival), so every barrier's
    /// arrivals match its waits.
    struct Turns {
        static constexpr int FIRST_TURN = 2;
        int consumer;
        __device__ __forceinline__ void begin_round() const
        {
            if (CONSUMERS > 1 && consumer == CONSUMERS - 1) kjit::named_barrier_arrive(FIRST_TURN, 256);
        }
        __device__ __forceinline__ void end_round() const
        {
            if (CONSUMERS > 1 && consumer == 0) kjit::named_barrier_sync(FIRST_TURN, 256);
        }
        __device__ __forceinline__ void wait() const
        {
            if (CONSUMERS > 1) kjit::named_barrier_sync(FIRST_TURN + consumer, 256);
        }
        __device__ __forceinline__ void pass() const
        {
            if (CONSUMERS > 1) kjit::named_barrier_arrive(FIRST_TURN + (consumer + 1) % CONSUMERS, 256);
        }
    };

    /// A consumer warpgroup's pass over the key tiles its rows of query tile `w` see, S_i the
    /// pass's i-th tile's scores (key tile begin + i); then the tile's key tiles its rows do not
    /// see (causal, or rows past the queries' end), each only waited for and released, so that
    /// the producer's barriers and the others' turns count the same. Returns the Q tile, where
    /// the epilogue stages this tile's O.
    __device__ __forceinline__ unsigned consume(Accumulator<HEAD_DIM>& acc, const Work& w, int seq, int kv_seq, float c,
                                                const Turns& turns, Progress& progress) const
    {
        const int consumer = threadIdx.x / 128, row0 = w.m0 + threadIdx.x / 32 * 16 + threadIdx.x % 32 / 4;
        const int n = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq).count();
        const KeyTiles tiles = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq, w.m0 + 64 * consumer, 64);
        // The same in every thread of the warp: redux.sync puts them in uniform registers, where the
        // wgmma descriptors are computed.
        const QuerySlot q(__reduce_max_sync(0xffffffffu, progress.queries()));
        const int first = __reduce_max_sync(0xffffffffu, progress.keys());
        acc.clear();
        kjit::mbarrier_wait(q_full(q.stage), q.phase);  // also where no key is seen: its tile stages O
        if (n == 0) return q_tile(q.stage);
        progress.add_keys(n);
        const int seen = tiles.count();
        if (seen > 0) attend(acc, tiles, turns, q_tile(q.stage), first, row0, kv_seq, c);
        for (int i = seen; i < n; ++i) {
            turns.wait();
            turns.pass();
            const KeySlot slot(first + i);
            kjit::mbarrier_wait(k_full(slot.stage), slot.phase);
            release(k_empty(slot.stage));
            kjit::mbarrier_wait(v_full(slot.stage), slot.phase);
            release(v_empty(slot.stage));
        }
        if (seen == 0) turns.wait(), turns.pass();  // rows that see no tile: n tiles, n + 1 turns
        return q_tile(q.stage);
    }

    /// Once the epilogue has staged and stored this warp's rows of O through the query tile's Q
    /// tile: the producer may load the query tile after next into it.
    __device__ __forceinline__ void finish_query(Progress& progress) const
    {
        kjit::fence_proxy_async();  // this thread's staging accesses before the next TMA copy's
        __syncwarp();               // every lane's, before the warp's one arrival
        release(q_empty(QuerySlot(progress.queries()).stage));
        progress.next_query();
    }

    /// The matmuls and the softmax of the `tiles.count()` key tiles a consumer's rows see, the
    /// block's key tiles `first` on: that many + 1 turns.
    __device__ __forceinline__ void attend(Accumulator<HEAD_DIM>& acc, const KeyTiles& tiles, const Turns& turns,
                                           unsigned q, int first, int row0, int kv_seq, float c) const
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
        turns.wait();
        issue_scores(s, q, first);
        turns.pass();
        kjit::wgmma_wait<0>();
        fence_registers(s);
        release(k_empty(KeySlot(first).stage));
        softmax(0);  // O is still 0: nothing to rescale
        to_fragments();
        for (int i = 1; i < n; ++i) {
            turns.wait();
            issue_scores(s, q, first + i);
            issue_values(acc, p, first + i - 1);
            turns.pass();
            kjit::wgmma_wait<1>();  // S_i is in; P_{i−1}·V_{i−1} may still run
            fence_registers(s);
            release(k_empty(KeySlot(first + i).stage));
            softmax(i);
            kjit::wgmma_wait<0>();
            fence_registers(acc.o);
            release(v_empty(KeySlot(first + i - 1).stage));
            acc.rescale(rescale);
            to_fragments();
        }
        turns.wait();
        issue_values(acc, p, first + n - 1);
        turns.pass();
        kjit::wgmma_wait<0>();
        fence_registers(acc.o);
        release(v_empty(KeySlot(first + n - 1).stage));
    }

    /// Sets the barriers up and splits the block: the producer warpgroup loads for the whole
    /// schedule and returns false; the consumers return true, to run each query tile.
    template <class Schedule>
    __device__ __forceinline__ bool start(const TensorMaps& in, const Schedule& schedule, int seq, int kv_seq) const
    {
        if (threadIdx.x == 0) {
            for (int b = 0; b < Q_TILES; ++b) {
                kjit::mbarrier_init(q_full(b), 1);               // the producer's expect_tx, or arrival
                kjit::mbarrier_init(q_empty(b), 4 * CONSUMERS);  // one per consumer warp
            }
            for (int s = 0; s < STAGES; ++s) {
                kjit::mbarrier_init(k_full(s), 1);
                kjit::mbarrier_init(v_full(s), 1);
                kjit::mbarrier_init(k_empty(s), 4 * CONSUMERS);
                kjit::mbarrier_init(v_empty(s), 4 * CONSUMERS);
            }
            kjit::fence_barrier_init();
        }
        __syncthreads();
        if (threadIdx.x / 128 == CONSUMERS) {
            if constexpr (CONSUMERS > 1) kjit::setmaxnreg_dec<REGISTERS.producer>();
            if (threadIdx.x == 128 * CONSUMERS) {
                kjit::prefetch_tensor_map(in.q);
                kjit::prefetch_tensor_map(in.k);
                kjit::prefetch_tensor_map(in.v);
                produce(in, schedule, seq, kv_seq);
            }
            return false;
        }
        if constexpr (CONSUMERS > 1) kjit::setmaxnreg_inc<REGISTERS.consumer()>();
        return true;
    }
};

}  // namespace attention
