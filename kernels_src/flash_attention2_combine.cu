// Split-KV's second step: the kv_splits shares of each query row that flash_attention2_forward
// wrote to `partials` — O_s = softmax-weighted values over share s's keys (fp32,
// [kv_splits][rows][HEAD_DIM]) and their log-sum-exps LSE_s ([kv_splits][rows], after the O
// part) — summed with weights e^(LSE_s − LSE):
//   LSE = ln Σ_s e^(LSE_s),   O = Σ_s e^(LSE_s − LSE) · O_s
// into O (T, strided [B, H, S, D] as the forward's) and the dense LSE [B, H, S]. A row no share
// saw a key for gets O = 0 and LSE = −∞. A warp per row (rows = B·H·S, in (b·H + h)·S + i order),
// each lane 1/32 of its columns.
#include "kjit/attention/fragments.cuh"

template <class T, int HEAD_DIM>
__device__ __forceinline__ void flash_attention2_combine(const float* partials, T* o, float* lse, int heads, int seq,
                                                         int kv_splits, long long rows, long long o_batch,
                                                         long long o_head, long long o_row)
{
    constexpr int PER_LANE = HEAD_DIM / 32;
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = threadIdx.x % 32;
    const float* lse_part = partials + kv_splits * rows * HEAD_DIM;
    float m = attention::minus_infinity();
    for (int s = 0; s < kv_splits; ++s) m = fmaxf(m, lse_part[s * rows + row]);
    float total = 0.f, sum[PER_LANE] = {};
    if (m != attention::minus_infinity())
        for (int s = 0; s < kv_splits; ++s) {
            const float weight = expf(lse_part[s * rows + row] - m);  // 0 for a share with no key
            const float* o_s = partials + (s * rows + row) * HEAD_DIM;
            total += weight;
            for (int e = 0; e < PER_LANE; ++e) sum[e] += weight * o_s[lane + 32 * e];
        }
    const float inv = total > 0.f ? 1.f / total : 0.f;
    const long long head_row = row / seq, b = head_row / heads, h = head_row % heads, i = row % seq;
    unsigned short* out = reinterpret_cast<unsigned short*>(o + b * o_batch + h * o_head + i * o_row);
    for (int e = 0; e < PER_LANE; ++e) out[lane + 32 * e] = attention::pack<T>(sum[e] * inv, 0.f) & 0xffffu;
    if (lane == 0) lse[row] = total > 0.f ? m + logf(total) : attention::minus_infinity();
}
