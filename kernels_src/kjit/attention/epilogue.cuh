// The attention epilogue: O = O / l, rounded to T and staged through shared memory so that
// global stores are whole 16-bit pieces of rows; and the rows' log-sum-exp
// LSE = ln Σ_j e^(scale·S_ij). A row that saw no key (no keys at all) gets O = 0, LSE = −∞.
// With split-KV a block's share instead goes out in fp32 — O / l over its keys and their LSE —
// for the combine kernel.
#pragma once
#include "kjit/attention/online_softmax.cuh"
#include "kjit/attention/tiles.cuh"

namespace attention {

/// l summed over the quad that shares each of this thread's two rows (each thread holds its
/// columns' part).
template <int HEAD_DIM>
__device__ __forceinline__ void sum_rows(Accumulator<HEAD_DIM>& acc)
{
    for (int r = 0; r < 2; ++r) {
        acc.row_sum[r] += __shfl_xor_sync(0xffffffffu, acc.row_sum[r], 1);
        acc.row_sum[r] += __shfl_xor_sync(0xffffffffu, acc.row_sum[r], 2);
    }
}

/// Row r's 1/l (0 where it saw no key) and its log-sum-exp (−∞ there), once sum_rows ran.
template <int HEAD_DIM>
__device__ __forceinline__ float inverse_sum(const Accumulator<HEAD_DIM>& acc, int r)
{
    return acc.row_sum[r] > 0.f ? 1.f / acc.row_sum[r] : 0.f;
}
template <int HEAD_DIM>
__device__ __forceinline__ float log_sum_exp(const Accumulator<HEAD_DIM>& acc, int r)
{
    return acc.row_sum[r] > 0.f ? (acc.row_max[r] + log2(acc.row_sum[r])) * 0.6931471805599453f : minus_infinity();
}

/// O through shared memory, so that global stores are whole 16-byte pieces of rows: `at(row,
/// col)` is the shared address of element (row, col) of the block's staging tile, whose rows of
/// this warp it alone writes and reads.
template <class T, int HEAD_DIM, class Staging>
__device__ __forceinline__ void store_output(Accumulator<HEAD_DIM>& acc, const Staging& at, T* o, long long o_row,
                                             float* lse, int seq, int m0)
{
    constexpr int CHUNKS = HEAD_DIM / 8;  // 16-byte pieces of a row
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    sum_rows(acc);
    for (int r = 0; r < 2; ++r) {
        const float inv = inverse_sum(acc, r);
        for (int d = 0; d < HEAD_DIM / 8; ++d) {
            const unsigned packed = pack<T>(acc.o[d][2 * r] * inv, acc.o[d][2 * r + 1] * inv);
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at(warp * 16 + g + 8 * r, d * 8 + 2 * t)), "r"(packed)
                         : "memory");
        }
        const int row = m0 + warp * 16 + g + 8 * r;
        if (t == 0 && row < seq) lse[row] = log_sum_exp(acc, r);
    }
    __syncwarp();
    for (int c = lane; c < 16 * CHUNKS; c += 32) {  // the warp's 16 rows, 16 bytes at a time
        const int r = c / CHUNKS, col = c % CHUNKS * 8, row = m0 + warp * 16 + r;
        if (row >= seq) continue;
        uint4 piece;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(piece.x), "=r"(piece.y), "=r"(piece.z), "=r"(piece.w)
                     : "r"(at(warp * 16 + r, col))
                     : "memory");
        *reinterpret_cast<uint4*>(o + row * o_row + col) = piece;
    }
}

/// A split's share: O / l (fp32) into `o_part` and the LSE into `lse_part`, row i of the head
/// at row i of each (the caller offsets both to the split's and the head's first row).
template <int HEAD_DIM>
__device__ __forceinline__ void store_partial(Accumulator<HEAD_DIM>& acc, float* o_part, float* lse_part, int seq,
                                              int m0)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    sum_rows(acc);
    for (int r = 0; r < 2; ++r) {
        const int row = m0 + warp * 16 + g + 8 * r;
        if (row >= seq) continue;
        const float inv = inverse_sum(acc, r);
        for (int d = 0; d < HEAD_DIM / 8; ++d)
            *reinterpret_cast<float2*>(o_part + (long long)row * HEAD_DIM + d * 8 + 2 * t) = make_float2(
                acc.o[d][2 * r] * inv, acc.o[d][2 * r + 1] * inv);
        if (t == 0) lse_part[row] = log_sum_exp(acc, r);
    }
}

}  // namespace attention
