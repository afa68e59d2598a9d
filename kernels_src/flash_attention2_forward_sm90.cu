// FlashAttention forward on Hopper (sm_90a only): what flash_attention2_forward.cu computes, for
// head dims 64 and 128, with TMA loads and both matmuls on warpgroup MMAs
// (kjit/attention/mainloop_sm90.cuh): BLOCK_M query rows a block, 64 a consumer warpgroup, and
// a producer warpgroup. Q, K and V come as TMA maps over {D, S, H, B} (innermost first, the
// tensors' own strides), boxes of 64 columns × BLOCK_M (Q) or BLOCK_N (K, V) rows, 128-byte
// swizzled; O is written through its pointer and strides.
#include "kjit/attention/forward.cuh"
#include "kjit/attention/mainloop_sm90.cuh"

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
__device__ __forceinline__ void flash_attention2_forward_sm90(const kjit::TensorMap& q_map,
                                                              const kjit::TensorMap& k_map,
                                                              const kjit::TensorMap& v_map, T* o, float* lse,
                                                              float* partials, int heads, int kv_heads, int seq,
                                                              int kv_seq, int kv_splits, float scale, long long o_batch,
                                                              long long o_head, long long o_row)
{
    attention::forward<attention::MainloopSm90<T, BLOCK_M, BLOCK_N, HEAD_DIM, CAUSAL>, T, BLOCK_M, BLOCK_N, HEAD_DIM,
                       CAUSAL>(attention::TensorMaps{q_map, k_map, v_map}, o, lse, partials, heads, kv_heads, seq,
                               kv_seq, kv_splits, scale, {o_batch, o_head, o_row});
}
