// Fused Conv2d (any kernel size up to 64 taps, stride, padding; groups 1, dilation 1) + inference
// BatchNorm + SiLU on Hopper (sm_90a): the implicit GEMM of conv2d_bn_silu_forward.cu,
//   Y[n, j] = silu(scale[n] · Σ_k W[n, k] · patch_j[k] + shift[n]),  k = (ci, kh, kw),
// on the TMA + wgmma path (kjit/gemm_sm90.cuh). W is read in PyTorch's layout, K contiguous per
// output channel, so a K step is 32 consecutive (channel, tap) pairs; its X box is the input
// patch its 32 output pixels see in the few channels those k touch (kjit::TapBox), one TMA copy
// whose zero fill is the conv's padding past the image's right and bottom edges. TMA starts a box
// only at a non-negative, 16-byte-aligned column (elsewhere the copy is an illegal instruction,
// measured on the H200): the top and left padding is left out of the copy and read as zero.
// Each consumer thread finds its A elements in the patch by (channel, tap, pixel). Tensor maps:
//   x_map {W, H, C_IN, B}, boxes patch_w × patch_h × box_channels × 1, dense;
//   w_map {C_IN·KH·KW, C_OUT}, boxes 32 × BLOCK_N, 128-byte swizzled;
//   y_map {OW, OH, C_OUT, B} with y's row stride, boxes BOX_W × 32/BOX_W × BLOCK_N × 1, dense —
//   or, where TMA cannot write y (OW or the row stride no multiple of 4: 14 × 14 outputs of a
//   stride-2 layer), no map: the consumers store their boxes themselves, masked at the edges.
// This file is the column policy: which patch and output box a tile's columns are.
#include "kjit/divisor.cuh"
#include "kjit/gemm_sm90.cuh"

namespace taps_sm90 {

/// GEMM columns as output boxes of BOX_W × 32/BOX_W pixels, row-major over each image's
/// ⌈OH / rows⌉ × ⌈OW / BOX_W⌉ boxes; a tile is BLOCK_M/32 consecutive boxes (tiles run across
/// images). Output pixels past the image's edge are computed on zero-filled input and clipped
/// by the store.
template <int BLOCK_M>
struct Columns {
    const kjit::TensorMap& x_map;
    const kjit::TensorMap& y_map;
    float* y;
    int B, C_OUT, OH, OW, y_row_stride;
    bool y_by_tma;
    kjit::TapBox patch;
    int boxes_w, boxes_per_image, pad, box_w_log2;
    kjit::Divisor taps, kw, period;     // KH·KW, KW, the (channel, tap) table's steps
    unsigned channel_bytes, row_bytes;  // one channel's patch, one patch row

    struct Box {
        int ow0, oh0, b;
    };
    __device__ __forceinline__ Box box(int tile_m, int i) const
    {
        const int s = tile_m * (BLOCK_M / 32) + i, b = s / boxes_per_image, in_image = s - b * boxes_per_image;
        const int row = in_image / boxes_w;
        return {(in_image - row * boxes_w) * patch.box_w, row * patch.rows(), b};
    }
    static constexpr bool gathers = false;                         // TMA reads x
    static constexpr auto y_store = gemm::sm90::YStore::per_call;  // rows where TMA cannot write y
    __device__ bool stores_by_tma() const { return y_by_tma; }

    /// Where box i's patch is loaded from: TMA starts a box only at a non-negative column on a
    /// 16-byte boundary, so the load starts at row max(ih, 0) and column max(iw, 0) rounded
    /// down to 4; the patch then sits `shift` rows and columns into the box, and rows and
    /// columns of the padding before the image (a negative shift) read as zero.
    struct Patch {
        int ih, iw, shift_rows, shift_cols;
    };
    __device__ __forceinline__ Patch patch_of(const Box& p) const
    {
        const int ih = p.oh0 * patch.stride - pad, iw = p.ow0 * patch.stride - pad;
        const int load_h = max(ih, 0), load_w = max(iw, 0) & ~3;
        return {load_h, load_w, ih - load_h, iw - load_w};
    }

    /// The (channel, tap) table (kjit::TapTable) in `table`: entry (s, k_step) is where
    /// k = 32·s + k_step sits in a patch — channel c (counted from the step's first) and tap
    /// (r, q) as a byte offset, with r and q beside it for the padding's mask.
    __device__ __forceinline__ void prepare(unsigned table) const
    {
        for (int i = threadIdx.x; i < static_cast<int>(period.d) * 32; i += blockDim.x) {
            const unsigned k0 = i / 32 * 32u, k = k0 + i % 32;
            const unsigned c = taps.div(k), tap = k - c * taps.d, r = kw.div(tap), q = tap - r * kw.d;
            const unsigned offset = (c - taps.div(k0)) * channel_bytes + r * row_bytes + q * 4;
            kjit::store_shared(table + 4 * i, __uint_as_float(offset | r << 16 | q << 24));
        }
    }

    /// A's elements of one box of a tile: patch_j[k] for the table entry of k; pixel j sits dy
    /// rows and dx columns into the box, so it reads patch row dy·stride + r, column
    /// dx·stride + q.
    struct Fragments {
        const Columns& columns;
        unsigned table;
        int shift_rows, shift_cols;
        /// The table row of K step kt.
        __device__ __forceinline__ unsigned step(int kt) const
        {
            return table + 128 * (kt - columns.period.div(kt) * columns.period.d);
        }
        __device__ __forceinline__ unsigned k_entry(unsigned row, int k_step) const
        {
            return __float_as_uint(kjit::load_shared(row + 4 * k_step));
        }
        /// Branch-free: a read of the skipped padding loads the box's first element and is zeroed.
        __device__ __forceinline__ float at(unsigned box, unsigned entry, int pixel) const
        {
            const Columns& c = columns;
            const int row = (pixel >> c.box_w_log2) * c.patch.stride + shift_rows;
            const int col = (pixel & (c.patch.box_w - 1)) * c.patch.stride + shift_cols;
            const int r = entry >> 16 & 0xff, q = entry >> 24;
            const bool inside = (row + r | col + q) >= 0;
            const unsigned at = box + (entry & 0xffff) + row * static_cast<int>(c.row_bytes) + col * 4;
            const float v = kjit::load_shared(inside ? at : box);
            return inside ? v : 0.0f;
        }
    };
    __device__ __forceinline__ Fragments fragments(int tile_m, int i, unsigned table) const
    {
        const Patch p = patch_of(box(tile_m, i));
        return {*this, table, p.shift_rows, p.shift_cols};
    }

    /// Output boxes are dense: BLOCK_N channels × 32 pixels.
    __device__ static unsigned y_offset(int channel, int pixel) { return channel * 128 + pixel * 4; }

    /// A tile's patches, one TMA copy per box and K step.
    struct Loader {
        const Columns& columns;
        int tile_m;
        __device__ __forceinline__ unsigned x_box_tx_bytes() const { return columns.patch.bytes(); }
        __device__ __forceinline__ void load(unsigned dst, unsigned slot_bytes, int kt, unsigned bar) const
        {
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i) {
                const Box b = columns.box(tile_m, i);
                const Patch p = columns.patch_of(b);
                kjit::tma_load(dst + i * slot_bytes, columns.x_map, p.iw, p.ih, columns.taps.div(32 * kt), b.b, bar);
            }
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, unsigned) const { return {*this, tile_m}; }
    __device__ __forceinline__ void store(unsigned src, int tile_m, int i, int row0) const
    {
        const Box p = box(tile_m, i);
        kjit::tma_store(y_map, src, p.ow0, p.oh0, row0, p.b);
    }
    /// Without a y map: box i of a tile, rows row0… of y, from its output box `src`, rows of
    /// BOX_W pixels per store, none past the image or the last one.
    template <int BLOCK_N>
    __device__ __forceinline__ void store_rows(unsigned src, int tile_m, int i, int row0, int N) const
    {
        const Box p = box(tile_m, i);
        const int pixel = threadIdx.x % 32;
        const int oh = p.oh0 + (pixel >> box_w_log2), ow = p.ow0 + (pixel & (patch.box_w - 1));
        if (p.b >= B || oh >= OH || ow >= OW) return;
        float* out = y + (1LL * p.b * C_OUT + row0) * y_row_stride + oh * OW + ow;
        gemm::sm90::store_pixel_channels<BLOCK_N, Columns>(out, y_row_stride, src, pixel, row0, N);
    }
};

}  // namespace taps_sm90

template <int BLOCK_M, int BLOCK_N, int STAGES, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_tma_forward(const kjit::TensorMap& x_map, const kjit::TensorMap& w_map,
                                                           const kjit::TensorMap& y_map, float* y,
                                                           const float* bn_scale, const float* bn_shift, int B,
                                                           int C_IN, int C_OUT, int OH, int OW, int KH, int KW,
                                                           int stride, int pad, int box_w, int box_channels,
                                                           int y_row_stride, int y_by_tma)
{
    const kjit::TapBox patch{box_w, box_channels, KH, KW, stride};
    const int boxes_w = kjit::ceil_div(OW, box_w);
    const taps_sm90::Columns<BLOCK_M> columns{x_map,
                                              y_map,
                                              y,
                                              B,
                                              C_OUT,
                                              OH,
                                              OW,
                                              y_row_stride,
                                              y_by_tma != 0,
                                              patch,
                                              boxes_w,
                                              kjit::ceil_div(OH, patch.rows()) * boxes_w,
                                              pad,
                                              __ffs(box_w) - 1,
                                              kjit::Divisor(KH * KW),
                                              kjit::Divisor(KW),
                                              kjit::Divisor(kjit::TapTable{KH * KW}.period()),
                                              static_cast<unsigned>(patch.patch_h() * patch.patch_w() * 4),
                                              static_cast<unsigned>(patch.patch_w() * 4)};
    const int tiles_m = kjit::Sm90Geometry{BLOCK_M, BLOCK_N, STAGES}.column_tiles(patch.boxes(B, OH, OW));
    gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(columns, w_map, tiles_m, C_OUT, C_IN * KH * KW,
                                                                bn_scale, bn_shift);
}
