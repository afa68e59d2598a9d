// The FlashAttention-2 mainloop for sm_80 and later (mma.sync m16n8k16): one pass over the key
// tiles with the online softmax (kjit/attention/online_softmax.cuh). Each warp owns 16 query
// rows and the whole head dimension; the next K and V tiles load (cp.async) while this one is used.
#pragma once
#include "kjit/attention/online_softmax.cuh"
#include "kjit/attention/tile_scheduler.cuh"
#include "kjit/attention/tiles.cuh"

namespace attention {

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
struct MainloopSm80 {
    using Tl = Tiles<BLOCK_M, BLOCK_N, HEAD_DIM>;
    static constexpr int N8 = BLOCK_N / 8, D8 = HEAD_DIM / 8, K16 = HEAD_DIM / 16;

    unsigned q_tile, k_tiles, v_tiles;  // shared addresses: Q, K[2], V[2]
    int lane;

    __device__ __forceinline__ explicit MainloopSm80(unsigned shared)
        : q_tile(shared),
          k_tiles(shared + Tl::Q_BYTES),
          v_tiles(shared + Tl::Q_BYTES + 2 * Tl::KV_BYTES),
          lane(threadIdx.x % 32)
    {
    }

    /// The warp's 16 rows of Q as A fragments, kept in registers for the whole pass.
    __device__ __forceinline__ void load_q(unsigned (&q)[K16][4], int warp) const
    {
        for (int kk = 0; kk < K16; ++kk)
            ldmatrix_x4(q[kk], Tl::at(q_tile, warp * 16 + lane % 16, kk * 16 + lane / 16 * 8));
    }

    /// S = Q · Kᵀ for the warp's rows and the tile's keys; a pair of 8-key tiles per ldmatrix.
    __device__ __forceinline__ void scores(float (&s)[N8][4], const unsigned (&q)[K16][4], unsigned k_tile) const
    {
        for (int nt = 0; nt < N8; ++nt)
            for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
        for (int kk = 0; kk < K16; ++kk)
            for (int np = 0; np < N8 / 2; ++np) {
                unsigned kf[4];
                ldmatrix_x4(kf, Tl::at(k_tile, np * 16 + lane % 8 + lane / 16 * 8, kk * 16 + lane / 8 % 2 * 8));
                mma<T>(s[2 * np], q[kk], kf[0], kf[1]);
                mma<T>(s[2 * np + 1], q[kk], kf[2], kf[3]);
            }
    }

    /// O += P · V, P's fragments made from the accumulator tiles.
    __device__ __forceinline__ void accumulate(Accumulator<HEAD_DIM>& acc, const float (&p)[N8][4],
                                               unsigned v_tile) const
    {
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            unsigned pf[4];
            p_fragment<T>(pf, p, kk);
            for (int dp = 0; dp < D8 / 2; ++dp) {
                unsigned vf[4];
                ldmatrix_x4_trans(vf, Tl::at(v_tile, kk * 16 + lane % 8 + lane / 8 % 2 * 8, dp * 16 + lane / 16 * 8));
                mma<T>(acc.o[2 * dp], pf, vf[0], vf[1]);
                mma<T>(acc.o[2 * dp + 1], pf, vf[2], vf[3]);
            }
        }
    }

    /// The whole pass for the block's query rows w.m0 … w.m0 + BLOCK_M − 1 of one head; every
    /// thread holds output rows.
    __device__ __forceinline__ void run(Accumulator<HEAD_DIM>& acc, const Pointers<T>& in, const Work& w, int seq,
                                        int kv_seq, float c) const
    {
        const int m0 = w.m0, warp = threadIdx.x / 32, row0 = m0 + warp * 16 + lane / 4;
        const T* q = in.q + w.batch * in.qs.batch + w.head * in.qs.head;
        const T* k = in.k + w.batch * in.ks.batch + w.kv_head * in.ks.head;
        const T* v = in.v + w.batch * in.vs.batch + w.kv_head * in.vs.head;
        const long long q_row = in.qs.row, k_row = in.ks.row, v_row = in.vs.row;
        const KeyTiles tiles = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(w, seq, kv_seq);
        acc.clear();

        // Q first, in a group of its own: its fragments are read once, before the pass.
        Tl::template load<BLOCK_M>(q_tile, q, q_row, m0, seq);
        kjit::copy_commit();
        if (tiles.count() > 0) {  // key tile j goes to buffer j % 2
            const unsigned first = tiles.begin % 2 * Tl::KV_BYTES;
            Tl::template load<BLOCK_N>(k_tiles + first, k, k_row, tiles.begin * BLOCK_N, kv_seq);
            Tl::template load<BLOCK_N>(v_tiles + first, v, v_row, tiles.begin * BLOCK_N, kv_seq);
        }
        kjit::copy_commit();
        kjit::copy_wait<1>();
        __syncthreads();
        unsigned q_frag[K16][4];
        load_q(q_frag, warp);

        for (int j = tiles.begin; j < tiles.end; ++j) {
            const int n0 = j * BLOCK_N, buffer = j % 2;
            if (j + 1 < tiles.end) {  // the next tile's loads fly while this one is used
                Tl::template load<BLOCK_N>(k_tiles + (1 - buffer) * Tl::KV_BYTES, k, k_row, n0 + BLOCK_N, kv_seq);
                Tl::template load<BLOCK_N>(v_tiles + (1 - buffer) * Tl::KV_BYTES, v, v_row, n0 + BLOCK_N, kv_seq);
            }
            kjit::copy_commit();
            kjit::copy_wait<1>();
            __syncthreads();

            float s[N8][4];
            scores(s, q_frag, k_tiles + buffer * Tl::KV_BYTES);
            if (j >= tiles.first_masked) mask_scores<CAUSAL>(s, n0, row0, kv_seq);
            online_softmax(acc, s, c);
            accumulate(acc, s, v_tiles + buffer * Tl::KV_BYTES);
            __syncthreads();  // this buffer is loaded again two tiles on
        }
        // With no key tile, Q's copies (every thread's, into every warp's rows) may still be in
        // flight: the epilogue stages O in those rows.
        kjit::copy_wait<0>();
        __syncthreads();
    }

    /// Where the epilogue stages O (padded rows): the warp's own rows of the Q tile.
    __device__ __forceinline__ unsigned staging() const { return q_tile; }
};

}  // namespace attention
