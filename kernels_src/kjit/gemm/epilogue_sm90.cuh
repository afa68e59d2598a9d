// The sm90 epilogue: BN + SiLU on a consumer warpgroup's accumulators, written through its two
// output boxes (BLOCK_N channels × 32 pixels each, laid out as the Columns policy's y map wants)
// and stored by TMA, which clips at the tensor's edges — nothing outside y's valid region is
// written.
#pragma once
#include "kjit/bn_silu.cuh"
#include "kjit/gemm/mainloop_sm90.cuh"

namespace gemm::sm90 {

/// v[n], v[n + 1] — channels past N read as 0 (their outputs are clipped by the store); one
/// 8-byte load where the pair is aligned and whole.
__device__ __forceinline__ float2 bn_pair(const float* v, int n, int N)
{
    if (n + 1 < N && (reinterpret_cast<unsigned long long>(v + n) & 7) == 0)
        return *reinterpret_cast<const float2*>(v + n);
    return {n < N ? v[n] : 0.0f, n + 1 < N ? v[n + 1] : 0.0f};
}

/// y[row0 + c][pixels of the consumer's boxes] = silu(scale·acc + shift). The boxes are reused
/// tile after tile: the previous tile's stores must have read them first.
template <int BLOCK_M, int BLOCK_N, int STAGES, class Columns>
__device__ __forceinline__ void store_tile(const Accumulators<BLOCK_N>& acc,
                                           const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, const Columns& columns,
                                           int consumer, int tile_m, int row0, int N, const float* bn_scale,
                                           const float* bn_shift)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4, g = lane / 4, t = lane % 4;
    const bool leader = threadIdx.x % 128 == 0;
    const int barrier = 1 + consumer;  // this warpgroup's named barrier
    if (leader) kjit::tma_store_wait_read();
    kjit::named_barrier_sync(barrier, 128);
    const RowPixel pixels[2] = {row_pixel(warp, 0, g), row_pixel(warp, 1, g)};
    const unsigned box = shared.y(2 * consumer + pixels[0].box);  // both rows' pixels share it
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j) {
        const int c = 8 * j + 2 * t, n = row0 + c;  // this thread's channels c, c + 1
        const float2 scale = bn_pair(bn_scale, n, N), shift = bn_pair(bn_shift, n, N);
#pragma unroll
        for (int v0 = 0; v0 < 2; ++v0)
#pragma unroll
            for (int v1 = 0; v1 < 2; ++v1)
                kjit::store_shared(
                    box + Columns::y_offset(c + v0, pixels[v1].pixel),
                    kjit::bn_silu(acc[v0 + 2 * v1 + 4 * j], v0 ? scale.y : scale.x, v0 ? shift.y : shift.x));
    }
    kjit::fence_proxy_async();  // the writes above, before TMA reads the boxes
    kjit::named_barrier_sync(barrier, 128);
    if (leader) {
#pragma unroll
        for (int box = 0; box < 2; ++box) columns.store(shared.y(2 * consumer + box), tile_m, 2 * consumer + box, row0);
        kjit::tma_store_commit();
    }
}

}  // namespace gemm::sm90
