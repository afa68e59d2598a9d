// The attention forward both kernels run, whichever mainloop they are built on: the block's work
// from the tile scheduler, one pass of the mainloop, the epilogue. See
// flash_attention2_forward.cu for what it computes.
#pragma once
#include "kjit/attention/epilogue.cuh"
#include "kjit/attention/tile_scheduler.cuh"

namespace attention {

/// `inputs` is what the mainloop reads Q, K and V through (pointers, or TMA maps); O is strided
/// as `os` says. With kv_splits > 1 each block covers its share of the keys and writes it to
/// `partials` (fp32 O [kv_splits][B·H·S][HEAD_DIM], then LSE [kv_splits][B·H·S]) instead, for
/// flash_attention2_combine.cu.
template <class Mainloop, class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL, class Inputs>
__device__ __forceinline__ void forward(const Inputs& inputs, T* o, float* lse, float* partials, int heads,
                                        int kv_heads, int seq, int kv_seq, int kv_splits, float scale, Strides os)
{
    extern __shared__ __align__(16) unsigned char shared[];
    const Work w = this_work<BLOCK_M, CAUSAL>(heads, kv_heads, kv_splits);
    const Mainloop mainloop(kjit::shared_address(shared));
    Accumulator<HEAD_DIM> acc;
    if (!mainloop.run(acc, inputs, w, seq, kv_seq, scale * 1.4426950408889634f)) return;  // a producer's thread
    const long long head_row = ((long long)w.batch * heads + w.head) * seq;  // the head's first row of B·H·S
    if (kv_splits == 1) {
        store_output<T, BLOCK_M, BLOCK_N, HEAD_DIM>(acc, mainloop.staging(), o + w.batch * os.batch + w.head * os.head,
                                                    os.row, lse + head_row, seq, w.m0);
        return;
    }
    const long long rows = (long long)(gridDim.z / kv_splits) * heads * seq, first = w.split * rows + head_row;
    store_partial(acc, partials + first * HEAD_DIM, partials + kv_splits * rows * HEAD_DIM + first, seq, w.m0);
}

}  // namespace attention
