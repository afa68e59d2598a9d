// The sm90 epilogue: BN + SiLU on a consumer warpgroup's accumulators, written through its two
// output boxes (BLOCK_N channels × 32 pixels each, laid out as the Columns policy's y map wants)
// and stored by TMA, which clips at the tensor's edges, or by the warpgroup's own coalesced
// stores, masked there — nothing outside y's valid region is written.
#pragma once
#include "kjit/bn_silu.cuh"
#include "kjit/gemm/mainloop_sm90.cuh"

namespace gemm::sm90 {

/// How a Columns policy's output boxes reach y (its `y_store`): TMA stores through a y map,
/// the consumers' own stores (Columns::store_rows), or either, chosen per call
/// (Columns::stores_by_tma(), a policy with `per_call` only).
enum class YStore { tma, rows, per_call };

/// One output pixel's channels of an output box, stored without TMA by a consumer warpgroup:
/// warp w of its four stores channels row0 + w, row0 + w + 4, … below N, from the box at `src`
/// (laid out as Columns::y_offset says) to y + at, the pixel's element of channel row0, channels
/// `row_stride` floats apart — plus the residual's element at the same place where there is one
/// (a residual add fused into the conv). A warp's lanes hold consecutive pixels: each store is a
/// row run.
template <int BLOCK_N, class Columns>
__device__ __forceinline__ void store_pixel_channels(float* y, const float* residual, long long at, int row_stride,
                                                     unsigned src, int pixel, int row0, int N)
{
#pragma unroll 4
    for (int ch = threadIdx.x / 32 % 4; ch < BLOCK_N; ch += 4) {
        if (row0 + ch >= N) continue;
        const long long element = at + 1LL * ch * row_stride;
        float v = kjit::load_shared(src + Columns::y_offset(ch, pixel));
        if (residual) v += __ldg(residual + element);
        y[element] = v;
    }
}

/// BN scale and shift of a thread's channel pairs (c, c + 1), c = 8j + 2t: every load issued
/// before any is used, branch-free (consume_tiles issues them before the tile's K loop).
/// Channels past N read channel N - 1 (their outputs are never stored); one 8-byte load per
/// pair where every pair is aligned (the choice is uniform across the block).
template <int BLOCK_N>
struct ChannelPairs {
    float2 scale[BLOCK_N / 8], shift[BLOCK_N / 8];

    __device__ __forceinline__ ChannelPairs(const float* bn_scale, const float* bn_shift, int row0, int N, int t)
    {
        const auto address = [](const float* p) { return reinterpret_cast<unsigned long long>(p); };
        if (N % 2 == 0 && ((address(bn_scale) | address(bn_shift)) & 7) == 0) {
#pragma unroll
            for (int j = 0; j < BLOCK_N / 8; ++j) {
                const int n = min(row0 + 8 * j + 2 * t, N - 2);
                scale[j] = __ldg(reinterpret_cast<const float2*>(bn_scale + n));
                shift[j] = __ldg(reinterpret_cast<const float2*>(bn_shift + n));
            }
        } else {
#pragma unroll
            for (int j = 0; j < BLOCK_N / 8; ++j) {
                const int n0 = min(row0 + 8 * j + 2 * t, N - 1), n1 = min(n0 + 1, N - 1);
                scale[j] = {__ldg(bn_scale + n0), __ldg(bn_scale + n1)};
                shift[j] = {__ldg(bn_shift + n0), __ldg(bn_shift + n1)};
            }
        }
    }
};

/// y[row0 + c][pixels of the consumer's boxes] = silu(scale·acc + shift), staged through the
/// consumer's two output boxes, which are reused tile after tile: the previous tile's stores
/// must have read them first. TMA stores the boxes (Columns::store, one thread), or, where the
/// policy says TMA cannot, every thread of the warpgroup stores its share (Columns::store_rows).
/// Channel groups of 8 wholly past N are neither computed nor staged: no store reads them (TMA
/// clips at the tensor's edge, store_rows stops at N), which spares a layer of fewer channels
/// than the tile most of its epilogue.
template <int BLOCK_M, int BLOCK_N, int STAGES, class Columns>
__device__ __forceinline__ void store_tile(const Accumulators<BLOCK_N>& acc, const ChannelPairs<BLOCK_N>& bn,
                                           const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, const Columns& columns,
                                           int consumer, int tile_m, int row0, int N)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4, g = lane / 4, t = lane % 4;
    const bool leader = threadIdx.x % 128 == 0;
    const int barrier = 1 + consumer;  // this warpgroup's named barrier
    bool by_tma = Columns::y_store == YStore::tma;
    if constexpr (Columns::y_store == YStore::per_call) by_tma = columns.stores_by_tma();  // uniform over the grid
    if (by_tma && leader) kjit::tma_store_wait_read();
    kjit::named_barrier_sync(barrier, 128);
    const RowPixel pixels[2] = {output_row_pixel<Columns>(warp, 0, g), output_row_pixel<Columns>(warp, 1, g)};
    const unsigned box = shared.y(2 * consumer + pixels[0].box);  // both rows' pixels share it
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j) {
        if (row0 + 8 * j >= N) break;  // uniform across the block
        const int c = 8 * j + 2 * t;   // this thread's channels c, c + 1
#pragma unroll
        for (int v0 = 0; v0 < 2; ++v0)
#pragma unroll
            for (int v1 = 0; v1 < 2; ++v1)
                kjit::store_shared(box + Columns::y_offset(c + v0, pixels[v1].pixel),
                                   kjit::bn_silu(acc[v0 + 2 * v1 + 4 * j], v0 ? bn.scale[j].y : bn.scale[j].x,
                                                 v0 ? bn.shift[j].y : bn.shift[j].x));
    }
    if constexpr (Columns::y_store != YStore::tma) {
        if (!by_tma) {
            kjit::named_barrier_sync(barrier, 128);
#pragma unroll
            for (int box = 0; box < 2; ++box)
                columns.template store_rows<BLOCK_N>(shared.y(2 * consumer + box), tile_m, 2 * consumer + box, row0, N);
            return;
        }
    }
    if constexpr (Columns::y_store != YStore::rows) {
        kjit::fence_proxy_async();  // the writes above, before TMA reads the boxes
        kjit::named_barrier_sync(barrier, 128);
        if (leader) {
#pragma unroll
            for (int box = 0; box < 2; ++box)
                columns.store(shared.y(2 * consumer + box), tile_m, 2 * consumer + box, row0);
            kjit::tma_store_commit();
        }
    }
}

}  // namespace gemm::sm90
