// FlashAttention forward on Hopper (sm_90a only): what flash_attention2_forward.cu computes, for
// head dims 64 and 128, with both matmuls on warpgroup MMAs (kjit/attention/mainloop_sm90.cuh):
// BLOCK_M query rows a block, 64 a consumer warpgroup.
#include "kjit/attention/forward.cuh"
#include "kjit/attention/mainloop_sm90.cuh"

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
__device__ __forceinline__ void flash_attention2_forward_sm90(const T* q, const T* k, const T* v, T* o, float* lse,
                                                              int heads, int kv_heads, int seq, int kv_seq, float scale,
                                                              long long q_batch, long long q_head, long long q_row,
                                                              long long k_batch, long long k_head, long long k_row,
                                                              long long v_batch, long long v_head, long long v_row,
                                                              long long o_batch, long long o_head, long long o_row)
{
    attention::forward<attention::MainloopSm90<T, BLOCK_M, BLOCK_N, HEAD_DIM, CAUSAL>, T, BLOCK_M, BLOCK_N, HEAD_DIM,
                       CAUSAL>(q, k, v, o, lse, heads, kv_heads, seq, kv_seq, scale, {q_batch, q_head, q_row},
                               {k_batch, k_head, k_row}, {v_batch, v_head, v_row}, {o_batch, o_head, o_row});
}
