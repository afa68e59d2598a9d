// The attention mainloop on Hopper (sm_90a): both matmuls on warpgroup MMAs. Each consumer
// warpgroup owns 64 query rows (a warp 16 of them, as in the sm80 mainloop, so the online softmax
// and the epilogue are shared); K and V tiles load by cp.async into 128-byte-swizzled tiles, the
// next pair while this one is used. S = Q·Kᵀ reads Q and K through descriptors; O += P·V takes P
// from registers and V N-major. One warpgroup's softmax overlaps only the other's matmuls here;
// a producer warp with TMA and ping-pong consumers (FlashAttention-3) are the next step.
#pragma once
#include "kjit/attention/online_softmax.cuh"
#include "kjit/attention/tile_scheduler.cuh"
#include "kjit/attention/tiles.cuh"
#include "kjit/attention/wgmma_16bit.cuh"
#include "kjit/ptx_sm90.cuh"

namespace attention {

/// ROWS rows of HEAD_DIM 16-bit values as HEAD_DIM/64 column blocks of ROWS × 128 bytes, 16-byte
/// chunk c of row r stored at chunk c ^ (r % 8): wgmma's 128-byte swizzle, each 8 rows an atom
/// (the tile starts on a 1024-byte boundary).
template <int ROWS, int HEAD_DIM>
struct SwizzledTile {
    static constexpr int BYTES = HEAD_DIM / 64 * ROWS * 128;
    static_assert(HEAD_DIM % 64 == 0, "whole 128-byte column blocks");

    static __device__ __forceinline__ unsigned at(unsigned tile, int row, int chunk)
    {
        return tile + chunk / 8 * ROWS * 128 + row * 128 + ((chunk % 8) ^ (row % 8)) * 16;
    }
    /// Rows row0 … row0 + ROWS − 1 of a tensor into the tile; rows past `rows` zero-filled.
    template <int THREADS, class T>
    static __device__ __forceinline__ void load(unsigned tile, const T* base, long long row_stride, int row0, int rows)
    {
        constexpr int CHUNKS = HEAD_DIM / 8;
        for (int c = threadIdx.x; c < ROWS * CHUNKS; c += THREADS) {
            const int r = c / CHUNKS, chunk = c % CHUNKS;
            const bool valid = row0 + r < rows;
            kjit::copy_async<16>(at(tile, r, chunk), base + (valid ? (row0 + r) * row_stride + chunk * 8 : 0), valid);
        }
    }
};

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
struct MainloopSm90 {
    static constexpr int THREADS = BLOCK_M / 64 * 128, N8 = BLOCK_N / 8;
    using QTile = SwizzledTile<BLOCK_M, HEAD_DIM>;
    using KVTile = SwizzledTile<BLOCK_N, HEAD_DIM>;
    /// Q, K ×2, V ×2, and the slack that aligns them to 1024 bytes.
    static constexpr int SHARED_BYTES = QTile::BYTES + 4 * KVTile::BYTES + 1024;
    static_assert(BLOCK_M * (HEAD_DIM + 8) * 2 <= 4 * KVTile::BYTES, "the epilogue stages O in K's and V's tiles");

    unsigned q_tile, k_tiles, v_tiles;

    __device__ __forceinline__ explicit MainloopSm90(unsigned shared)
        : q_tile((shared + 1023) & ~1023u), k_tiles(q_tile + QTile::BYTES), v_tiles(k_tiles + 2 * KVTile::BYTES)
    {
    }

    /// S = Q · Kᵀ for this warpgroup's 64 rows: k steps of 16 walk 32 bytes along a swizzled
    /// row, then on to the next column block.
    __device__ __forceinline__ void scores(float (&s)[N8][4], unsigned k_tile) const
    {
        const int warpgroup = threadIdx.x / 128;
        for (int nt = 0; nt < N8; ++nt)
            for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
        kjit::wgmma_fence();
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
            const unsigned step = kk / 4, within = kk % 4 * 32;
            wgmma_ss<T, BLOCK_N>(
                reinterpret_cast<float(&)[BLOCK_N / 2]>(s),
                kjit::wgmma_descriptor_swizzle128(q_tile + step * BLOCK_M * 128 + warpgroup * 64 * 128 + within),
                kjit::wgmma_descriptor_swizzle128(k_tile + step * BLOCK_N * 128 + within));
        }
        kjit::wgmma_commit();
        kjit::wgmma_wait<0>();
    }

    /// O += P · V: V's 16 rows a k step are two swizzle atoms along K (1024 bytes apart), its
    /// column blocks of 64 along N (a tile's rows × 128 bytes apart).
    __device__ __forceinline__ void accumulate(Accumulator<HEAD_DIM>& acc, const float (&p)[N8][4],
                                               unsigned v_tile) const
    {
        kjit::wgmma_fence();
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            unsigned pf[4];
            p_fragment<T>(pf, p, kk);
            const unsigned long long v = kjit::wgmma_descriptor(v_tile + kk * 16 * 128, BLOCK_N * 128, 1024) |
                                         1ull << 62;
            wgmma_rs_n_major<T, HEAD_DIM>(reinterpret_cast<float(&)[HEAD_DIM / 2]>(acc.o), pf, v);
        }
        kjit::wgmma_commit();
        kjit::wgmma_wait<0>();
    }

    /// The whole pass for the block's query rows m0 … m0 + BLOCK_M − 1 of one head.
    __device__ __forceinline__ void run(Accumulator<HEAD_DIM>& acc, const T* q, const T* k, const T* v,
                                        const Strides& qs, const Strides& ks, const Strides& vs, int seq, int kv_seq,
                                        int m0, float c) const
    {
        const int row0 = m0 + threadIdx.x / 32 * 16 + threadIdx.x % 32 / 4;
        const KeyTiles tiles = key_tiles<BLOCK_M, BLOCK_N, CAUSAL>(m0, kv_seq);
        acc.clear();
        QTile::template load<THREADS>(q_tile, q, qs.row, m0, seq);
        if (tiles.count > 0) {
            KVTile::template load<THREADS>(k_tiles, k, ks.row, 0, kv_seq);
            KVTile::template load<THREADS>(v_tiles, v, vs.row, 0, kv_seq);
        }
        kjit::copy_commit();
        for (int j = 0; j < tiles.count; ++j) {
            const int n0 = j * BLOCK_N, buffer = j % 2;
            if (j + 1 < tiles.count) {  // the next tile's loads fly while this one is used
                const unsigned next = (1 - buffer) * KVTile::BYTES;
                KVTile::template load<THREADS>(k_tiles + next, k, ks.row, n0 + BLOCK_N, kv_seq);
                KVTile::template load<THREADS>(v_tiles + next, v, vs.row, n0 + BLOCK_N, kv_seq);
            }
            kjit::copy_commit();
            kjit::copy_wait<1>();
            kjit::fence_proxy_async();  // the copies, visible to wgmma
            __syncthreads();
            float s[N8][4];
            scores(s, k_tiles + buffer * KVTile::BYTES);
            if (j >= tiles.first_masked) mask_scores<CAUSAL>(s, n0, row0, kv_seq);
            online_softmax(acc, s, c);
            accumulate(acc, s, v_tiles + buffer * KVTile::BYTES);
            __syncthreads();  // this buffer is loaded again two tiles on
        }
        kjit::copy_wait<0>();  // as in the sm80 mainloop: the epilogue reuses these tiles
        __syncthreads();
    }

    /// Where the epilogue stages O (padded rows, BLOCK_M × (HEAD_DIM + 8) values): K's and V's
    /// buffers, free after the pass.
    __device__ __forceinline__ unsigned staging() const { return k_tiles; }
};

}  // namespace attention
