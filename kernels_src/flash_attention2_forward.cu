// FlashAttention-2 forward: for query row i of head h (key/value head h / (H / H_KV)),
//   O[i] = Σ_j softmax_j(scale · Q[i] · K[j]) · V[j],   LSE[i] = ln Σ_j e^(scale · Q[i] · K[j])
// over the keys j < kv_seq (and j ≤ i when CAUSAL: torch's is_causal), never forming the score
// matrix: one pass over key tiles with the online softmax (kjit/attention/mainloop_sm80.cuh,
// mma.sync for sm_80 and later; flash_attention2_forward_sm90.cu is the same on Hopper's wgmma).
// T is kjit::f16 or kjit::bf16; accumulation and the softmax are fp32. Tensors are strided
// [B, H, S, D] (so [B, S, H, D] too), rows 16-byte aligned; LSE is a dense [B, H, S] of floats.
// With kv_splits > 1 (split-KV, for few query tiles and many keys) each block covers its share
// of the key tiles and writes fp32 partial results to `partials`, which
// flash_attention2_combine.cu adds up into O and LSE.
#include "kjit/attention/forward.cuh"
#include "kjit/attention/mainloop_sm80.cuh"

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
__device__ __forceinline__ void flash_attention2_forward(const T* q, const T* k, const T* v, T* o, float* lse,
                                                         float* partials, int heads, int kv_heads, int seq, int kv_seq,
                                                         int kv_splits, float scale, long long q_batch,
                                                         long long q_head, long long q_row, long long k_batch,
                                                         long long k_head, long long k_row, long long v_batch,
                                                         long long v_head, long long v_row, long long o_batch,
                                                         long long o_head, long long o_row)
{
    const attention::Pointers<T> inputs{
        q, k, v, {q_batch, q_head, q_row}, {k_batch, k_head, k_row}, {v_batch, v_head, v_row}};
    attention::forward<attention::MainloopSm80<T, BLOCK_M, BLOCK_N, HEAD_DIM, CAUSAL>, T, BLOCK_M, BLOCK_N, HEAD_DIM,
                       CAUSAL>(inputs, o, lse, partials, heads, kv_heads, seq, kv_seq, kv_splits, scale,
                               {o_batch, o_head, o_row});
}
