// The attention forward's parts both kernels share: a query tile's epilogue, and the whole pass
// of a block a query tile (the sm80 kernel; the Hopper one runs a persistent grid,
// flash_attention2_forward_sm90.cu). See flash_attention2_forward.cu for what they compute.
#pragma once
#include "kjit/attention/epilogue.cuh"
#include "kjit/attention/tile_scheduler.cuh"

namespace attention {

/// Query tile w's epilogue: O (staged through `at`, epilogue.cuh) and the LSE; or with
/// kv_splits > 1 its key share's O and LSE to `partials` (fp32 O [kv_splits][B·H·S][HEAD_DIM],
/// then LSE [kv_splits][B·H·S]), for flash_attention2_combine.cu.
template <class T, int HEAD_DIM, class Staging>
__device__ __forceinline__ void store(Accumulator<HEAD_DIM>& acc, const Staging& at, const Work& w, T* o, float* lse,
                                      float* partials, int batch, int heads, int seq, int kv_splits, Strides os)
{
    const long long head_row = ((long long)w.batch * heads + w.head) * seq;  // the head's first row of B·H·S
    if (kv_splits == 1) {
        store_output<T, HEAD_DIM>(acc, at, o + w.batch * os.batch + w.head * os.head, os.row, lse + head_row, seq,
                                  w.m0);
        return;
    }
    const long long rows = (long long)batch * heads * seq, first = w.split * rows + head_row;
    store_partial(acc, partials + first * HEAD_DIM, partials + kv_splits * rows * HEAD_DIM + first, seq, w.m0);
}

/// A block a query tile: its work from the grid, one pass of the mainloop, the epilogue.
/// `inputs` is what the mainloop reads Q, K and V through; O is strided as `os` says.
template <class Mainloop, class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL, class Inputs>
__device__ __forceinline__ void forward(const Inputs& inputs, T* o, float* lse, float* partials, int heads,
                                        int kv_heads, int seq, int kv_seq, int kv_splits, float scale, Strides os)
{
    extern __shared__ __align__(16) unsigned char shared[];
    const Work w = this_work<BLOCK_M, CAUSAL>(heads, kv_heads, kv_splits);
    const Mainloop mainloop(kjit::shared_address(shared));
    Accumulator<HEAD_DIM> acc;
    mainloop.run(acc, inputs, w, seq, kv_seq, scale * 1.4426950408889634f);
    const unsigned staging = mainloop.staging();
    const auto at = [staging](int row, int col) { return Tiles<BLOCK_M, BLOCK_N, HEAD_DIM>::at(staging, row, col); };
    store<T, HEAD_DIM>(acc, at, w, o, lse, partials, (int)gridDim.z / kv_splits, heads, seq, kv_splits, os);
}

}  // namespace attention
