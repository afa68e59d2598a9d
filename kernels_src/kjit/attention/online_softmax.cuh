// The online softmax both attention mainloops share, on a warp's 16 × BLOCK_N tile of scores in
// the MMA accumulator layout (mma.sync's m16n8 tiles and wgmma's m64nN rows alike: this thread
// holds rows g and g + 8, columns 8j + 2t and the next, g = lane / 4, t = lane % 4):
//   masked → m = max(m, rowmax S·c), P = 2^(S·c − m), l = l·2^(m_old − m) + ΣP, O = O·2^(m_old − m)
// with c = scale · log2 e; and the P fragments the P·V product reads. O's rescale is a step of
// its own: the Hopper mainloop makes it once the previous tile's P·V, still in flight during the
// softmax, has landed.
#pragma once
#include "kjit/attention/fragments.cuh"

namespace attention {

/// One warp's 16 rows, this thread's share: O's columns 8d + 2t and the next for every d, the
/// running max and sum of its two rows.
template <int HEAD_DIM>
struct Accumulator {
    float o[HEAD_DIM / 8][4];
    float row_max[2];  // m, in units of S·c; −∞ before any key
    float row_sum[2];  // l over this thread's columns (the quad's are summed in the epilogue)

    __device__ __forceinline__ void clear()
    {
        for (int r = 0; r < 2; ++r) row_max[r] = minus_infinity(), row_sum[r] = 0.f;
        for (int d = 0; d < HEAD_DIM / 8; ++d)
            for (int e = 0; e < 4; ++e) o[d][e] = 0.f;
    }
    /// O's two rows times their factors (the softmax's 2^(m_old − m)).
    __device__ __forceinline__ void rescale(const float (&factor)[2])
    {
        for (int d = 0; d < HEAD_DIM / 8; ++d)
            for (int e = 0; e < 4; ++e) o[d][e] *= factor[e / 2];
    }
};

/// Keys past kv_seq, or after the row when causal, to −∞ (they drop out of the softmax); the
/// tile's first key is n0, this thread's first row row0.
template <bool CAUSAL, int N8>
__device__ __forceinline__ void mask_scores(float (&s)[N8][4], int n0, int row0, int kv_seq)
{
    const int t = threadIdx.x % 4;
    for (int nt = 0; nt < N8; ++nt)
        for (int e = 0; e < 4; ++e) {
            const int key = n0 + nt * 8 + 2 * t + e % 2, row = row0 + e / 2 * 8;
            if (key >= kv_seq || (CAUSAL && key > row)) s[nt][e] = minus_infinity();
        }
}

/// The online softmax step on the scores: S becomes P, m and l move on; `rescale` is what O's
/// rows must be multiplied by before P · V is added.
template <int N8, int HEAD_DIM>
__device__ __forceinline__ void softmax_rows(Accumulator<HEAD_DIM>& acc, float (&s)[N8][4], float c,
                                             float (&rescale)[2])
{
    for (int r = 0; r < 2; ++r) {
        float tile_max = minus_infinity();
        for (int nt = 0; nt < N8; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));  // the quad shares a row
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float m = fmaxf(acc.row_max[r], tile_max * c);
        const float base = m == minus_infinity() ? 0.f : m;  // a row that has seen no key stays at 0
        rescale[r] = exp2(acc.row_max[r] - base);
        acc.row_max[r] = m;
        float sum = 0.f;
        for (int nt = 0; nt < N8; ++nt)
            for (int e = 2 * r; e < 2 * r + 2; ++e) {
                s[nt][e] = exp2(fmaf(s[nt][e], c, -base));
                sum += s[nt][e];
            }
        acc.row_sum[r] = acc.row_sum[r] * rescale[r] + sum;
    }
}

/// The whole step: S becomes P and O is rescaled.
template <int N8, int HEAD_DIM>
__device__ __forceinline__ void online_softmax(Accumulator<HEAD_DIM>& acc, float (&s)[N8][4], float c)
{
    float rescale[2];
    softmax_rows(acc, s, c, rescale);
    acc.rescale(rescale);
}

/// Keys 16kk … 16kk + 15 of P as a 16×16 A fragment: two neighbouring 16×8 accumulator tiles.
template <class T, int N8>
__device__ __forceinline__ void p_fragment(unsigned (&a)[4], const float (&p)[N8][4], int kk)
{
    a[0] = pack<T>(p[2 * kk][0], p[2 * kk][1]);
    a[1] = pack<T>(p[2 * kk][2], p[2 * kk][3]);
    a[2] = pack<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]);
    a[3] = pack<T>(p[2 * kk + 1][2], p[2 * kk + 1][3]);
}

}  // namespace attention
