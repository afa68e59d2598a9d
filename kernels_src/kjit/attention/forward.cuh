// The attention forward both kernels run, whichever mainloop they are built on: the block's work
// from the tile scheduler, one pass of the mainloop, the epilogue. See
// flash_attention2_forward.cu for what it computes.
#pragma once
#include "kjit/attention/epilogue.cuh"
#include "kjit/attention/tile_scheduler.cuh"

namespace attention {

/// `inputs` is what the mainloop reads Q, K and V through (pointers, or TMA maps); O is strided
/// as `os` says.
template <class Mainloop, class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL, class Inputs>
__device__ __forceinline__ void forward(const Inputs& inputs, T* o, float* lse, int heads, int kv_heads, int seq,
                                        int kv_seq, float scale, Strides os)
{
    extern __shared__ __align__(16) unsigned char shared[];
    const Work w = this_work<BLOCK_M, CAUSAL>(heads, kv_heads);
    const Mainloop mainloop(kjit::shared_address(shared));
    Accumulator<HEAD_DIM> acc;
    if (!mainloop.run(acc, inputs, w, seq, kv_seq, scale * 1.4426950408889634f)) return;  // a producer's thread
    store_output<T, BLOCK_M, BLOCK_N, HEAD_DIM>(acc, mainloop.staging(), o + w.batch * os.batch + w.head * os.head,
                                                os.row, lse + ((long long)w.batch * heads + w.head) * seq, seq, w.m0);
}

}  // namespace attention
