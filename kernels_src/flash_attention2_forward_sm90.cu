// FlashAttention forward on Hopper (sm_90a only): what flash_attention2_forward.cu computes, for
// head dims 64 and 128, with TMA loads and both matmuls on warpgroup MMAs
// (kjit/attention/mainloop_sm90.cuh): BLOCK_M query rows a query tile, 64 a consumer warpgroup,
// and a producer warpgroup. The grid is persistent (kjit/attention/tile_scheduler.cuh): a block
// takes every gridDim.x-th query tile, and its producer loads the next one's Q and keys while the
// consumers finish this one. Q, K and V come as TMA maps over {D, S, H, B} (innermost first, the
// tensors' own strides), boxes of 64 columns × BLOCK_M (Q) or BLOCK_N (K, V) rows, 128-byte
// swizzled; O is written through its pointer and strides, staged in its query tile's Q tile.
#include "kjit/attention/forward.cuh"
#include "kjit/attention/mainloop_sm90.cuh"

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
__device__ __forceinline__ void flash_attention2_forward_sm90(const kjit::TensorMap& q_map,
                                                              const kjit::TensorMap& k_map,
                                                              const kjit::TensorMap& v_map, T* o, float* lse,
                                                              float* partials, int batch, int heads, int kv_heads,
                                                              int seq, int kv_seq, int kv_splits, float scale,
                                                              long long o_batch, long long o_head, long long o_row)
{
    using namespace attention;
    using Mainloop = MainloopSm90<T, BLOCK_M, BLOCK_N, HEAD_DIM, CAUSAL>;
    using Schedule = PersistentSchedule<BLOCK_M, CAUSAL>;
    extern __shared__ __align__(16) unsigned char shared[];
    __shared__ Schedule schedule;  // in shared memory: registers are what the consumers are short of
    if (threadIdx.x == 0) schedule = Schedule::of(batch, heads, kv_heads, seq, kv_splits, gridDim.x);
    const Mainloop mainloop(kjit::shared_address(shared));
    const TensorMaps maps{q_map, k_map, v_map};
    if (!mainloop.start(maps, schedule, seq, kv_seq)) return;  // the producer's warpgroup, its loads issued
    const float c = scale * 1.4426950408889634f;
    const typename Mainloop::Turns turns{static_cast<int>(threadIdx.x / 128)};
    typename Mainloop::Progress progress;
    turns.begin_round();
    schedule.for_each(blockIdx.x, [&](TileIndex tile) {
        Accumulator<HEAD_DIM> acc;
        const unsigned q_tile = mainloop.consume(acc, schedule.work(tile), seq, kv_seq, c, turns, progress);
        const Work w = schedule.work(tile);  // read again rather than held through the pass
        const auto at = [q_tile](int row, int col) { return Mainloop::QTile::at(q_tile, row, col); };
        store<T, HEAD_DIM>(acc, at, w, o, lse, partials, batch, heads, seq, kv_splits, {o_batch, o_head, o_row});
        mainloop.finish_query(progress);
    });
    turns.end_round();
}
