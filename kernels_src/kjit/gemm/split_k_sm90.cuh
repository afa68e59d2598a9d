// Split-K on the Hopper GEMM: a thread-block cluster of `split` blocks computes one tile, each
// over its share of K (tile_scheduler.cuh's this_k_range); block 0 adds the others' partial
// tiles to its own through distributed shared memory and runs the epilogue. Each consumer
// warpgroup hands over on its own, through two mbarriers per warpgroup:
//   parked (in block 0): the other blocks' partials of this tile are in their shared memory —
//                        128 arrivals from each, one per thread, released to the cluster;
//   read   (in block r): block 0 has read block r's partial, so the next may overwrite it.
// A partial is parked in the warpgroup's two output boxes, which only block 0 stores y through.
#pragma once
#include "kjit/gemm/mainloop_sm90.cuh"
#include "kjit/gemm/tile_scheduler.cuh"

namespace gemm::sm90 {

template <int BLOCK_M, int BLOCK_N, int STAGES>
class SplitKHandOver {
public:
    /// Barrier arrivals to initialise each phase with, for a cluster of `split` blocks.
    __device__ static unsigned parked_arrivals(int split) { return 128 * (split - 1); }
    static constexpr unsigned read_arrivals = 128;

    __device__ SplitKHandOver(const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, int consumer, SplitK split)
        : split_(split),
          parked_(shared.parked(consumer)),
          read_(shared.read(consumer)),
          // this thread's 4-float chunk q sits at (q·128 + thread)·16: a warp's stores and loads
          // are 512 contiguous bytes, no bank conflicts
          chunk0_(shared.y(2 * consumer) + 16 * (threadIdx.x % 128))
    {
    }

    /// In a cluster of 2 or more blocks, after the K loop of this block's `tile`-th tile (counted
    /// from 0): block 0 adds every other block's partial into `acc` and returns true (it stores
    /// y); the others park `acc` for it and return false.
    __device__ __forceinline__ bool reduce(Accumulators<BLOCK_N>& acc, int tile) const
    {
        if (split_.rank != 0) {
            if (tile > 0) kjit::mbarrier_wait_cluster(read_, (tile - 1) & 1);  // block 0 has read the last one
#pragma unroll
            for (int q = 0; q < chunks; ++q)
                kjit::store4_shared(chunk(q), make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
            kjit::mbarrier_arrive_cluster(parked_, 0);
            return false;
        }
        kjit::mbarrier_wait_cluster(parked_, tile & 1);
        for (int other = 1; other < split_.split; ++other) {
#pragma unroll
            for (int q = 0; q < chunks; ++q) {
                const float4 v = kjit::load4_from_cluster_block(chunk(q), other);
                acc[4 * q] += v.x, acc[4 * q + 1] += v.y, acc[4 * q + 2] += v.z, acc[4 * q + 3] += v.w;
            }
            kjit::mbarrier_arrive_cluster(read_, other);
        }
        return true;
    }

    /// In a cluster of 2 or more, before the block exits after `tiles` tiles: a block other than
    /// 0 stays until block 0 has read its last partial (its shared memory goes with it).
    __device__ __forceinline__ void finish(int tiles) const
    {
        if (split_.rank != 0 && tiles > 0) kjit::mbarrier_wait_cluster(read_, (tiles - 1) & 1);
    }

private:
    static constexpr int chunks = BLOCK_N / 8;  // Accumulators<BLOCK_N> in 4-float chunks
    __device__ unsigned chunk(int q) const { return chunk0_ + q * 128 * 16; }

    SplitK split_;
    unsigned parked_, read_, chunk0_;
};

}  // namespace gemm::sm90
