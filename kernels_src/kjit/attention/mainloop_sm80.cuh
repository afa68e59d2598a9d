// The FlashAttention-2 mainloop for sm_80 and later (mma.sync m16n8k16): one pass over the key
// tiles with the online softmax. Each warp owns 16 query rows and the whole head dimension; the
// next K and V tiles load (cp.async) while this one is used.
//   S = Q·Kᵀ (fp32) → masked → m = max(m, rowmax S·c), P = 2^(S·c − m), l = l·2^(m_old − m) + ΣP,
//   O = O·2^(m_old − m) + P·V   with c = scale · log2 e.
#pragma once
#include "kjit/attention/fragments.cuh"
#include "kjit/attention/tile_scheduler.cuh"
#include "kjit/attention/tiles.cuh"

namespace attention {

/// One warp's 16 rows, this thread's share: rows g and g + 8 of the warp (g = lane / 4), O's
/// columns 8d + 2t and the next (t = lane % 4) for every d.
template <int HEAD_DIM>
struct Accumulator {
    float o[HEAD_DIM / 8][4];
    float row_max[2];  // m, in units of S·c; −∞ before any key
    float row_sum[2];  // l over this thread's columns (the quad's are summed in the epilogue)
};

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

    /// Keys past kv_seq, or after the row when causal, to −∞ (they drop out of the softmax).
    __device__ __forceinline__ void mask(float (&s)[N8][4], int n0, int row0, int kv_seq) const
    {
        for (int nt = 0; nt < N8; ++nt)
            for (int e = 0; e < 4; ++e) {
                const int key = n0 + nt * 8 + 2 * (lane % 4) + e % 2, row = row0 + e / 2 * 8;
                if (key >= kv_seq || (CAUSAL && key > row)) s[nt][e] = minus_infinity();
            }
    }

    /// The online softmax step: S becomes P, m and l move on, O is rescaled.
    __device__ __forceinline__ void softmax(Accumulator<HEAD_DIM>& acc, float (&s)[N8][4], float c) const
    {
        for (int r = 0; r < 2; ++r) {
            float tile_max = minus_infinity();
            for (int nt = 0; nt < N8; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));  // the quad shares a row
            tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
            const float m = fmaxf(acc.row_max[r], tile_max * c);
            const float base = m == minus_infinity() ? 0.f : m;  // a row that has seen no key stays at 0
            const float rescale = exp2(acc.row_max[r] - base);
            acc.row_max[r] = m;
            float sum = 0.f;
            for (int nt = 0; nt < N8; ++nt)
                for (int e = 2 * r; e < 2 * r + 2; ++e) {
                    s[nt][e] = exp2(fmaf(s[nt][e], c, -base));
                    sum += s[nt][e];
                }
            acc.row_sum[r] = acc.row_sum[r] * rescale + sum;
            for (int d = 0; d < D8; ++d) acc.o[d][2 * r] *= rescale, acc.o[d][2 * r + 1] *= rescale;
        }
    }

    /// O += P · V: two neighbouring 16×8 accumulator tiles of P are one 16×16 A fragment.
    __device__ __forceinline__ void accumulate(Accumulator<HEAD_DIM>& acc, const float (&p)[N8][4],
                                               unsigned v_tile) const
    {
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            const unsigned pf[4] = {pack<T>(p[2 * kk][0], p[2 * kk][1]), pack<T>(p[2 * kk][2], p[2 * kk][3]),
                                    pack<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                                    pack<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
            for (int dp = 0; dp < D8 / 2; ++dp) {
                unsigned vf[4];
                ldmatrix_x4_trans(vf, Tl::at(v_tile, kk * 16 + lane % 8 + lane / 8 % 2 * 8, dp * 16 + lane / 16 * 8));
                mma<T>(acc.o[2 * dp], pf, vf[0], vf[1]);
                mma<T>(acc.o[2 * dp + 1], pf, vf[2], vf[3]);
            }
        }
    }

    /// The whole pass for the block's query rows m0 … m0 + BLOCK_M − 1 of one head.
    __device__ __forceinline__ void run(Accumulator<HEAD_DIM>& acc, const T* q, const T* k, const T* v,
                                        const Strides& qs, const Strides& ks, const Strides& vs, int seq, int kv_seq,
                                        int m0, float c) const
    {
        const int warp = threadIdx.x / 32, row0 = m0 + warp * 16 + lane / 4;
        const KeyTiles tiles = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(m0, kv_seq);
        for (int r = 0; r < 2; ++r) acc.row_max[r] = minus_infinity(), acc.row_sum[r] = 0.f;
        for (int d = 0; d < D8; ++d)
            for (int e = 0; e < 4; ++e) acc.o[d][e] = 0.f;

        Tl::template load<BLOCK_M>(q_tile, q, qs.row, m0, seq);
        if (tiles.count > 0) {
            Tl::template load<BLOCK_N>(k_tiles, k, ks.row, 0, kv_seq);
            Tl::template load<BLOCK_N>(v_tiles, v, vs.row, 0, kv_seq);
        }
        kjit::copy_commit();

        unsigned q_frag[K16][4];
        for (int j = 0; j < tiles.count; ++j) {
            const int n0 = j * BLOCK_N, buffer = j % 2;
            if (j + 1 < tiles.count) {  // the next tile's loads fly while this one is used
                Tl::template load<BLOCK_N>(k_tiles + (1 - buffer) * Tl::KV_BYTES, k, ks.row, n0 + BLOCK_N, kv_seq);
                Tl::template load<BLOCK_N>(v_tiles + (1 - buffer) * Tl::KV_BYTES, v, vs.row, n0 + BLOCK_N, kv_seq);
            }
            kjit::copy_commit();
            kjit::copy_wait<1>();
            __syncthreads();
            if (j == 0) load_q(q_frag, warp);

            float s[N8][4];
            scores(s, q_frag, k_tiles + buffer * Tl::KV_BYTES);
            if (j >= tiles.first_masked) mask(s, n0, row0, kv_seq);
            softmax(acc, s, c);
            accumulate(acc, s, v_tiles + buffer * Tl::KV_BYTES);
            __syncthreads();  // this buffer is loaded again two tiles on
        }
        // With no key tile, Q's copies (every thread's, into every warp's rows) may still be in
        // flight: the epilogue stages O in those rows.
        kjit::copy_wait<0>();
        __syncthreads();
    }
};

}  // namespace attention
