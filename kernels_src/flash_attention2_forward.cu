// FlashAttention-2 forward: for query row i of head h (key/value head h / (H / H_KV)),
//   O[i] = Σ_j softmax_j(scale · Q[i] · K[j]) · V[j],   LSE[i] = ln Σ_j e^(scale · Q[i] · K[j])
// over the keys j < kv_seq (and j ≤ i when CAUSAL: torch's is_causal), never forming the score
// matrix: one pass over key tiles with the online softmax (kjit/attention/mainloop_sm80.cuh).
// T is kjit::f16 or kjit::bf16; accumulation and the softmax are fp32. Tensors are strided
// [B, H, S, D] (so [B, S, H, D] too), rows 16-byte aligned; LSE is a dense [B, H, S] of floats.
#include "kjit/attention/epilogue.cuh"

template <class T, int BLOCK_M, int BLOCK_N, int HEAD_DIM, bool CAUSAL>
__device__ __forceinline__ void flash_attention2_forward(const T* q, const T* k, const T* v, T* o, float* lse,
                                                         int heads, int kv_heads, int seq, int kv_seq, float scale,
                                                         long long q_batch, long long q_head, long long q_row,
                                                         long long k_batch, long long k_head, long long k_row,
                                                         long long v_batch, long long v_head, long long v_row,
                                                         long long o_batch, long long o_head, long long o_row)
{
    using namespace attention;
    extern __shared__ __align__(16) unsigned char shared[];
    const Work w = this_work<BLOCK_M, CAUSAL>(heads, kv_heads);
    const MainloopSm80<T, BLOCK_M, BLOCK_N, HEAD_DIM, CAUSAL> mainloop(kjit::shared_address(shared));
    Accumulator<HEAD_DIM> acc;
    mainloop.run(acc, q + w.batch * q_batch + w.head * q_head, k + w.batch * k_batch + w.kv_head * k_head,
                 v + w.batch * v_batch + w.kv_head * v_head, {q_batch, q_head, q_row}, {k_batch, k_head, k_row},
                 {v_batch, v_head, v_row}, seq, kv_seq, w.m0, scale * 1.4426950408889634f);
    store_output<T, BLOCK_M, BLOCK_N, HEAD_DIM>(acc, mainloop.q_tile, o + w.batch * o_batch + w.head * o_head, o_row,
                                                lse + ((long long)w.batch * heads + w.head) * seq, seq, w.m0);
}
