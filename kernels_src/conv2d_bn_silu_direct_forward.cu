// Fused Conv2d (any kernel size, stride, padding, groups; dilation 1) + inference BatchNorm +
// SiLU, computed directly in fp32: the kernel for depthwise and narrow-group layers, whose
// per-group GEMMs are too thin for tensor-core tiles. A block computes BLOCK_OC channels × BLOCK_OW pixels of one
// output row; each thread a 4×4 register tile of them. Per step over input channels, the
// input rows the block needs and their weights are staged in shared memory once and reused
// by every thread.
#include "kjit/bn_silu.cuh"
#include "kjit/grid.cuh"

namespace direct {

constexpr int OC_PER_THREAD = 4;
constexpr int OW_PER_THREAD = 4;

/// The shape of one convolution, as the kernel receives it.
struct Conv {
    int B, C_IN, H, W, C_OUT, OH, OW, KH, KW, stride, pad, groups;
    int cin_per_group() const { return C_IN / groups; }
    int cout_per_group() const { return C_OUT / groups; }
};

/// Input columns a block reads for BLOCK_OW outputs.
__device__ __forceinline__ int input_columns(int block_ow, const Conv& c) { return (block_ow - 1) * c.stride + c.KW; }

/// Stages `slots` input channels (rows oh·stride−pad … +KH, zero-padded) and their weights.
/// Slot s holds group g0 + s / step_channels, channel c0 + s % step_channels of that group.
template <int BLOCK_OC, int BLOCK_OW, int THREADS>
__device__ __forceinline__ void stage(float* in_s, float* w_s, const float* x, const float* w, const Conv& c, int b,
                                      int oh, int ow0, int oc0, int g0, int groups_here, int c0, int step_channels)
{
    const int cols = input_columns(BLOCK_OW, c);
    const int slots = groups_here * step_channels;
    const int row0 = oh * c.stride - c.pad, col0 = ow0 * c.stride - c.pad;
    for (int e = threadIdx.x; e < slots * c.KH * cols; e += THREADS) {
        const int col = e % cols, kh = e / cols % c.KH, s = e / cols / c.KH;
        const int ic = (g0 + s / step_channels) * c.cin_per_group() + c0 + s % step_channels;
        const int ih = row0 + kh, iw = col0 + col;
        const bool inside = ih >= 0 && ih < c.H && iw >= 0 && iw < c.W;
        in_s[e] = inside ? x[(((long long)b * c.C_IN + ic) * c.H + ih) * c.W + iw] : 0.0f;
    }
    const int taps = c.KH * c.KW;
    for (int e = threadIdx.x; e < BLOCK_OC * step_channels * taps; e += THREADS) {
        const int tap = e % taps, ci = e / taps % step_channels, oc = oc0 + e / taps / step_channels;
        w_s[e] = oc < c.C_OUT ? w[((long long)oc * c.cin_per_group() + c0 + ci) * taps + tap] : 0.0f;
    }
}

/// acc += the staged step for this thread's 4 channels × 4 pixels. ONE_GROUP: every channel
/// of the block reads the same input slots, so each input value is loaded once for all four.
template <bool ONE_GROUP, int BLOCK_OW>
__device__ __forceinline__ void accumulate(float (&acc)[OC_PER_THREAD][OW_PER_THREAD], const float* in_s,
                                           const float* w_s, const Conv& c, int step_channels, int oc_local,
                                           const int (&group_slot)[OC_PER_THREAD], int tx)
{
    constexpr int TX = BLOCK_OW / OW_PER_THREAD;  // threads along the row
    const int cols = input_columns(BLOCK_OW, c);
    const int taps = c.KH * c.KW;
    for (int ci = 0; ci < step_channels; ++ci)
        for (int kh = 0; kh < c.KH; ++kh)
            for (int kw = 0; kw < c.KW; ++kw) {
                float wv[OC_PER_THREAD];
#pragma unroll
                for (int o = 0; o < OC_PER_THREAD; ++o)
                    wv[o] = w_s[((oc_local + o) * step_channels + ci) * taps + kh * c.KW + kw];
#pragma unroll
                for (int p = 0; p < OW_PER_THREAD; ++p) {
                    const int col = (tx + p * TX) * c.stride + kw;
                    if (ONE_GROUP) {
                        const float v = in_s[((group_slot[0] + ci) * c.KH + kh) * cols + col];
#pragma unroll
                        for (int o = 0; o < OC_PER_THREAD; ++o) acc[o][p] = fmaf(wv[o], v, acc[o][p]);
                    } else {
#pragma unroll
                        for (int o = 0; o < OC_PER_THREAD; ++o)
                            acc[o][p] = fmaf(wv[o], in_s[((group_slot[o] + ci) * c.KH + kh) * cols + col], acc[o][p]);
                    }
                }
            }
}

}  // namespace direct

template <int BLOCK_OC, int BLOCK_OW>
__device__ __forceinline__ void conv2d_bn_silu_direct_forward(const float* x, const float* w, const float* bn_scale,
                                                              const float* bn_shift, float* y, int B, int C_IN, int H,
                                                              int W, int C_OUT, int OH, int OW, int KH, int KW,
                                                              int stride, int pad, int groups, int y_row_stride,
                                                              int step_channels)
{
    using namespace direct;
    constexpr int TX = BLOCK_OW / OW_PER_THREAD;
    constexpr int THREADS = TX * (BLOCK_OC / OC_PER_THREAD);
    const Conv c{B, C_IN, H, W, C_OUT, OH, OW, KH, KW, stride, pad, groups};

    // Block: output row oh, pixels ow0…, channels oc0… of image b.
    const int ow0 = blockIdx.x * BLOCK_OW, oh = blockIdx.y;
    const int oc_tiles = kjit::ceil_div(C_OUT, BLOCK_OC);
    const int b = blockIdx.z / oc_tiles, oc0 = blockIdx.z % oc_tiles * BLOCK_OC;

    // The groups this block's channels belong to (one, unless groups are narrower than the block).
    const int cout_pg = c.cout_per_group();
    const int g0 = oc0 / cout_pg;
    const int groups_here = (min(oc0 + BLOCK_OC, C_OUT) - 1) / cout_pg - g0 + 1;

    extern __shared__ __align__(16) float shared[];
    float* in_s = shared;  // [groups_here · step_channels][KH][input columns]
    float* w_s = shared + groups_here * step_channels * KH * input_columns(BLOCK_OW, c);  // [BLOCK_OC][step][KH·KW]

    const int tx = threadIdx.x % TX, oc_local = threadIdx.x / TX * OC_PER_THREAD;
    float acc[OC_PER_THREAD][OW_PER_THREAD] = {};
    for (int c0 = 0; c0 < c.cin_per_group(); c0 += step_channels) {
        const int step = min(step_channels, c.cin_per_group() - c0);
        int group_slot[OC_PER_THREAD];  // first slot of each of this thread's channels
#pragma unroll
        for (int o = 0; o < OC_PER_THREAD; ++o)
            group_slot[o] = (min((oc0 + oc_local + o) / cout_pg, g0 + groups_here - 1) - g0) * step;
        __syncthreads();  // the previous step's tiles are consumed
        stage<BLOCK_OC, BLOCK_OW, THREADS>(in_s, w_s, x, w, c, b, oh, ow0, oc0, g0, groups_here, c0, step);
        __syncthreads();
        if (groups_here == 1) accumulate<true, BLOCK_OW>(acc, in_s, w_s, c, step, oc_local, group_slot, tx);
        else accumulate<false, BLOCK_OW>(acc, in_s, w_s, c, step, oc_local, group_slot, tx);
    }

    // Epilogue: rows of y are (image, channel) pairs of OH·OW pixels, y_row_stride apart.
#pragma unroll
    for (int o = 0; o < OC_PER_THREAD; ++o) {
        const int oc = oc0 + oc_local + o;
        if (oc >= C_OUT) continue;
        const float scale = bn_scale[oc], shift = bn_shift[oc];
        float* y_row = y + ((long long)b * C_OUT + oc) * y_row_stride + (long long)oh * OW;
#pragma unroll
        for (int p = 0; p < OW_PER_THREAD; ++p) {
            const int ow = ow0 + tx + p * TX;
            if (ow < OW) y_row[ow] = kjit::bn_silu(acc[o][p], scale, shift);
        }
    }
}
