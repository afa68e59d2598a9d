// Fused Conv2d (any kernel size, strides, paddings; groups 1, dilation 1) + inference BatchNorm +
// SiLU on channels-last tensors on Hopper (sm_90a): x [B, H, W, C_IN], W [C_OUT, KH, KW, C_IN],
// y [B, OH, OW, C_OUT], the implicit GEMM
//   Y[j, n] = silu(scale[n] · Σ_k patch_j[k] · W[n, k] + shift[n]),  j = (b, oh, ow), k = (kh, kw, ci)
// on the TMA + wgmma path (kjit/gemm_sm90.cuh), both operands read by the tensor cores from shared
// memory. A K step is 32 input channels of one filter tap; its X box is one TMA copy in im2col
// mode — BLOCK_M output positions walked along W, H and the batch, each shifted by the tap, 32
// channels of each: the copy zero-fills the padding and steps by the stride itself, so the box's
// rows are the GEMM's A rows as they stand (K-major, 128-byte swizzled), with no table and no masks.
//   x_map: im2col over {C_IN, W, H, B}, bounding box [-pad, size + pad - (kernel - 1)) per axis,
//          element strides the conv's strides, BLOCK_M pixels × 32 channels a copy
//   w_map: {C_IN, KH·KW, C_OUT}, boxes 32 × 1 × BLOCK_N, 128-byte swizzled
//   y_map: {C_OUT, B·OH·OW} with y's row stride (pixels y_row_stride floats apart), boxes 32
//          channels × 32 pixels, 128-byte swizzled — or none (a row stride no multiple of 4, an
//          unaligned y): the consumers store y themselves
// This file is the column policy: which box of x, and which boxes of y, a tile's columns are.
#include "kjit/divisor.cuh"
#include "kjit/gemm_sm90.cuh"

namespace im2col_sm90 {

/// GEMM columns as the B·OH·OW output positions in order: tile t is positions t·BLOCK_M… — one
/// im2col box per K step, across rows and images as they come; TMA zero-fills the positions past
/// the last image and clips what it writes there.
template <int BLOCK_M, int BLOCK_N>
struct Columns {
    static constexpr unsigned box_bytes = kjit::Sm90Geometry::box * 128;  // 32 pixels × 32 channels
    const kjit::TensorMap& x_map;
    const kjit::TensorMap& y_map;
    float* y;
    int pixels, C_OUT, OH, OW, stride_h, stride_w, pad_h, pad_w, y_row_stride;
    kjit::Divisor chunks;  // K steps per tap: ⌈C_IN/32⌉
    kjit::Divisor kw;      // taps per filter row
    bool y_by_tma;

    static constexpr bool a_from_shared = true;  // box rows are pixels' 32 channels: K-major
    static constexpr bool loads_w = true;        // W's box is the step's tap and channels
    static constexpr bool gathers = false;       // TMA reads x
    static constexpr auto y_store = gemm::sm90::YStore::per_call;
    __device__ bool stores_by_tma() const { return y_by_tma; }
    __device__ static void prepare(unsigned) {}  // no shared memory of its own
    /// An output box of 32 pixels is BLOCK_N/32 boxes of 32 channels, 128-byte-swizzled rows of
    /// one pixel's channels each (y's layout, channels innermost).
    __device__ static unsigned y_offset(int channel, int pixel)
    {
        return channel / 32 * box_bytes + gemm::sm90::swizzled(pixel, channel % 32);
    }

    /// K step kt: input channels c0… of filter tap `tap` = (r, q).
    struct Step {
        int c0, tap, r, q;
    };
    __device__ __forceinline__ Step step(int kt) const
    {
        const int tap = chunks.div(kt), r = kw.div(tap);
        return {32 * (kt - tap * static_cast<int>(chunks.d)), tap, r, tap - r * static_cast<int>(kw.d)};
    }

    /// A tile's copies: its first output position's window corner, found once per tile.
    struct Loader {
        const Columns& columns;
        int w0, h0, b;

        __device__ static constexpr unsigned x_tx_bytes() { return BLOCK_M * kjit::Sm90Geometry::block_k * 4; }
        __device__ __forceinline__ void load(unsigned dst, unsigned, int kt, unsigned bar) const
        {
            const Step s = columns.step(kt);
            kjit::tma_load_im2col(dst, columns.x_map, s.c0, w0, h0, b, static_cast<unsigned short>(s.q),
                                  static_cast<unsigned short>(s.r), bar);
        }
        __device__ __forceinline__ void load_w(unsigned dst, const kjit::TensorMap& w_map, int kt, int row0,
                                               unsigned bar) const
        {
            const Step s = columns.step(kt);
            kjit::tma_load(dst, w_map, s.c0, s.tap, row0, bar);
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, int, unsigned) const
    {
        const int m0 = tile_m * BLOCK_M, plane = OH * OW, b = m0 / plane, oh = (m0 - b * plane) / OW;
        const int ow = m0 - b * plane - oh * OW;
        return {*this, ow * stride_w - pad_w, oh * stride_h - pad_h, b};
    }

    /// Output box i of a tile, channels row0…: one TMA store per 32 of them below C_OUT.
    __device__ __forceinline__ void store(unsigned src, int tile_m, int i, int row0) const
    {
        const int m = tile_m * BLOCK_M + 32 * i;
#pragma unroll
        for (int c = 0; c < BLOCK_N / 32; ++c)
            if (row0 + 32 * c < C_OUT) kjit::tma_store(y_map, src + c * box_bytes, row0 + 32 * c, m);
    }
    /// Box i of a tile without TMA: warp w of the four stores pixels w, w + 4, … of the box, a
    /// lane per channel, so each store is a run of one pixel's channels in y and one swizzled
    /// row of the box (y is channels-last: lanes on pixels would scatter every store).
    template <int N_TILE>
    __device__ __forceinline__ void store_rows(unsigned src, int tile_m, int i, int row0, int N) const
    {
        const int lane = threadIdx.x % 32, m0 = tile_m * BLOCK_M + 32 * i;
        for (int p = threadIdx.x / 32 % 4; p < 32 && m0 + p < pixels; p += 4) {
            float* out = y + 1LL * (m0 + p) * y_row_stride + row0;
#pragma unroll
            for (int c = lane; c < N_TILE; c += 32)
                if (row0 + c < N) out[c] = kjit::load_shared(src + y_offset(c, p));
        }
    }
};

}  // namespace im2col_sm90

template <int BLOCK_M, int BLOCK_N, int STAGES, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_nhwc_tma_forward(
    const kjit::TensorMap& x_map, const kjit::TensorMap& w_map, const kjit::TensorMap& y_map, float* y,
    const float* bn_scale, const float* bn_shift, int B, int C_IN, int C_OUT, int OH, int OW, int KH, int KW,
    int stride_h, int stride_w, int pad_h, int pad_w, int y_row_stride, int y_by_tma)
{
    constexpr kjit::Sm90Geometry G{BLOCK_M, BLOCK_N, STAGES};
    const int pixels = B * OH * OW, chunks = kjit::ceil_div(C_IN, 32);
    const im2col_sm90::Columns<BLOCK_M, BLOCK_N> columns{x_map,
                                                         y_map,
                                                         y,
                                                         pixels,
                                                         C_OUT,
                                                         OH,
                                                         OW,
                                                         stride_h,
                                                         stride_w,
                                                         pad_h,
                                                         pad_w,
                                                         y_row_stride,
                                                         kjit::Divisor(chunks),
                                                         kjit::Divisor(KW),
                                                         y_by_tma != 0};
    gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(
        columns, w_map, G.column_tiles(kjit::ceil_div(pixels, 32)), C_OUT, KH * KW * chunks * 32, bn_scale, bn_shift);
}
