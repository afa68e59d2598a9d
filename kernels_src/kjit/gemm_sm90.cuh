// The Hopper GEMM of the conv kernels (sm_90a): Y[n, j] = silu(scale[n]·Σ_k W[n, k]·X[k, j] + shift[n])
// on a persistent grid of warp-specialised blocks. The parts:
//   kjit/gemm/tile_scheduler.cuh  which tiles a persistent block computes, in L2-friendly order
//   kjit/gemm/mainloop_sm90.cuh   the TMA producer and the wgmma consumers, an mbarrier pipeline
//   kjit/gemm/split_k_sm90.cuh    a cluster's partial tiles summed in block 0 (split-K)
//   kjit/gemm/epilogue_sm90.cuh   BN + SiLU through shared memory, TMA stores
// Warpgroup 0 produces (one thread issues every TMA copy, or all of it gathers X; the warpgroup
// gives registers to the others), warpgroups 1… consume, 64 pixels of each tile apiece. While the consumers run a
// tile's epilogue the producer is already filling stages for the next tile. Launched in clusters
// of `split` blocks, a cluster computes each tile, every block over 1/split of K.
#pragma once
#include "kjit/ceil_div.cuh"
#include "kjit/gemm/epilogue_sm90.cuh"
#include "kjit/gemm/mainloop_sm90.cuh"
#include "kjit/gemm/split_k_sm90.cuh"
#include "kjit/gemm/tile_scheduler.cuh"

namespace gemm::sm90 {

/// A consumer warpgroup's tiles: the K loop, then — where SPLIT, in a cluster's block 0 after
/// adding the other blocks' partials — the epilogue. A tile's BN parameters are loaded before
/// its K loop, so their latency hides behind it instead of stalling the epilogue. Split-K is a
/// loop of its own: its branches on the block's rank would make the pipeline's state, and so
/// every wgmma descriptor, look divergent to the compiler, which then leaves the uniform datapath.
template <bool SPLIT, int BLOCK_M, int BLOCK_N, int STAGES, class Columns>
__device__ __forceinline__ void consume_tiles(const Shared<BLOCK_M, BLOCK_N, STAGES>& shared, const Columns& columns,
                                              int consumer, const PersistentTiles& tiles, int first, int stride,
                                              KRange k, SplitK split, PipelineState<STAGES>& pipe, int N,
                                              const float* bn_scale, const float* bn_shift)
{
    const SplitKHandOver<BLOCK_M, BLOCK_N, STAGES> hand_over(shared, consumer, split);
    Accumulators<BLOCK_N> acc;
    int done = 0;
    for (int pid = first; pid < tiles.count(); pid += stride, ++done) {
        const TileCoord t = tiles.at(pid);
        const int row0 = t.n * BLOCK_N;
        const ChannelPairs<BLOCK_N> bn(bn_scale, bn_shift, row0, N, threadIdx.x % 4);
        consume_tile(acc, shared, columns, consumer, t.m, k, pipe);
        if (!SPLIT || hand_over.reduce(acc, done)) store_tile(acc, bn, shared, columns, consumer, t.m, row0, N);
    }
    if (SPLIT) hand_over.finish(done);
}

/// The whole GEMM for a W of N rows × K (w_map: {K, N}, boxes of 32 × BLOCK_N) and `tiles_m`
/// column tiles of BLOCK_M that `columns` loads and stores.
template <int BLOCK_M, int BLOCK_N, int STAGES, int GROUP_M, class Columns>
__device__ __forceinline__ void gemm_bn_silu(const Columns& columns, const kjit::TensorMap& w_map, int tiles_m, int N,
                                             int K, const float* bn_scale, const float* bn_shift)
{
    constexpr Geometry G{BLOCK_M, BLOCK_N, STAGES};
    extern __shared__ __align__(1024) unsigned char dynamic_shared[];
    const Shared<BLOCK_M, BLOCK_N, STAGES> shared(dynamic_shared);
    using HandOver = SplitKHandOver<BLOCK_M, BLOCK_N, STAGES>;
    const SplitK split = this_split_k();
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            kjit::mbarrier_init(shared.full(s), full_arrivals<Columns>);  // expect_tx (+ gathers)
            kjit::mbarrier_init(shared.empty(s), 4 * G.consumers());      // one per consumer warp
        }
        for (int c = 0; c < G.consumers(); ++c) {
            kjit::mbarrier_init(shared.parked(c), HandOver::parked_arrivals(split.split));
            kjit::mbarrier_init(shared.read(c), HandOver::read_arrivals);
        }
        kjit::fence_barrier_init();
        kjit::prefetch_tensor_map(w_map);
    }
    columns.prepare(shared.policy());
    if (split.split > 1) kjit::cluster_sync();  // every block's barriers exist before any arrives from afar
    else __syncthreads();
    kjit::wait_for_previous_grid();  // the setup above reads only the arguments: it overlaps that grid

    // A cluster's blocks run the same tiles, block r over its share of K.
    const PersistentTiles tiles{tiles_m, kjit::ceil_div(N, BLOCK_N), GROUP_M};
    const int cluster = blockIdx.x / split.split, clusters = gridDim.x / split.split;
    const KRange k = this_k_range<G.block_k>(K, split);
    PipelineState<STAGES> pipe;
    const int role = threadIdx.x / 128;
    // A gathering producer computes addresses: it keeps more registers than one issuing TMA.
    constexpr bool gathers = Columns::gathers;
    if (role == 0) {
        if constexpr (G.consumers() > 1) kjit::setmaxnreg_dec<G.producer_registers(gathers)>();
        // Threads with nothing to issue leave at once: the compiler then knows one thread runs
        // the loop and keeps its address arithmetic on the uniform datapath. (Kept alive to the
        // end, the loop left it, and the two-consumer kernels ran 12–30% slower on long K
        // loops: H200, 2026-12-02.)
        if (threadIdx.x >= producer_threads<Columns>) return;
        for (int pid = cluster; pid < tiles.count(); pid += clusters) {
            const TileCoord t = tiles.at(pid);
            produce_tile(shared, columns, w_map, t.m, t.n * BLOCK_N, k, pipe);
        }
    } else {
        if constexpr (G.consumers() > 1) kjit::setmaxnreg_inc<G.consumer_registers(gathers)>();
        const int consumer = role - 1;
        if (split.split > 1)
            consume_tiles<true>(shared, columns, consumer, tiles, cluster, clusters, k, split, pipe, N, bn_scale,
                                bn_shift);
        else
            consume_tiles<false>(shared, columns, consumer, tiles, cluster, clusters, k, split, pipe, N, bn_scale,
                                 bn_shift);
        if (threadIdx.x % 128 == 0) kjit::tma_store_wait();  // before the block's shared memory goes
    }
}

}  // namespace gemm::sm90
