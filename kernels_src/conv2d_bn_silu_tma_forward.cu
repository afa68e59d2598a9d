// Fused Conv2d (any kernel size up to 64 taps, stride, padding, groups; dilation 1) + inference
// BatchNorm + SiLU on Hopper (sm_90a): the implicit GEMM of conv2d_bn_silu_forward.cu,
//   Y[n, j] = silu(scale[n] · Σ_k W[n, k] · patch_j[k] + shift[n]),  k = (ci, kh, kw),
// on the TMA + wgmma path (kjit/gemm_sm90.cuh). A grouped layer is one GEMM over every output
// channel whose K is a group's (ci, kh, kw): a tile's channels lie in one group (BLOCK_N divides
// the group's outputs) and its X boxes start at that group's first input channel; a group's K is
// whole 32-wide steps, so no step reads another group's channels. W is read in PyTorch's layout, K contiguous per
// output channel, so a K step is 32 consecutive (channel, tap) pairs; its X box is the input
// patch its 32 output pixels see in the few channels those k touch, one TMA copy whose zero fill
// pads it wherever it leaves the tensor. TMA starts a box at any row, negative ones included,
// but only at a 16-byte-aligned innermost element (elsewhere the copy is an illegal instruction:
// probes on the H200, 2026-12-03): a load starts at the patch's first row and at or before its
// first column. Each consumer thread finds its A elements in the patch by (channel, tap, pixel).
// Two column policies, chosen per call:
//   taps_sm90 (W a multiple of 4): output boxes of BOX_W × 32/BOX_W pixels (kjit::TapBox);
//     x_map {W, H, C_IN, B}, boxes patch_w × patch_h × box_channels × 1, dense;
//     y_map {OW, OH, C_OUT, B} with y's row stride, boxes BOX_W × 32/BOX_W × BLOCK_N × 1, dense;
//   rows_sm90 (image rows no multiple of 16 bytes: 14×14, 10×10, 7×7): output boxes of 32
//     consecutive pixels of an image, their patch the whole input rows they reach, flattened
//     (kjit::RowsBox); x_map {H·W, C_IN, B}, boxes span × box_channels × 1 — or, where H·W is
//     no multiple of 4 either, {C_IN·H·W, B}, boxes of box_channels consecutive planes' spans;
//     y_map {OH·OW, C_OUT, B} with y's row stride, boxes 32 × BLOCK_N × 1, 128-byte swizzled.
// W: w_map {C_IN·KH·KW, C_OUT}, boxes 32 × BLOCK_N, 128-byte swizzled. Where TMA cannot write y
// (rows of OH·OW or OW floats, or a row stride, no multiple of 4) there is no y map: the consumers
// store their boxes themselves, masked at the edges.
// This file is the column policies: which patch and output box a tile's columns are.
#include "kjit/divisor.cuh"
#include "kjit/gemm_sm90.cuh"

namespace conv_sm90 {

/// What both policies share: the (channel, tap) table (kjit::TapTable) and reading A from a
/// patch through it. Table entry (s, k_step) is where k = 32·s + k_step sits in a patch —
/// channel c (counted from the step's first) and tap (r, q) as a byte offset, with r and q
/// beside it for the padding's mask.
struct Patches {
    kjit::Divisor taps, kw, period;     // KH·KW, KW, the table's steps
    unsigned channel_bytes, row_bytes;  // one channel's patch, one patch row

    __device__ __forceinline__ void prepare(unsigned table) const
    {
        for (int i = threadIdx.x; i < static_cast<int>(period.d) * 32; i += blockDim.x) {
            const unsigned k0 = i / 32 * 32u, k = k0 + i % 32;
            const unsigned c = taps.div(k), tap = k - c * taps.d, r = kw.div(tap), q = tap - r * kw.d;
            const unsigned offset = (c - taps.div(k0)) * channel_bytes + r * row_bytes + q * 4;
            kjit::store_shared(table + 4 * i, __uint_as_float(offset | r << 16 | q << 24));
        }
    }
    /// The table row of K step kt.
    __device__ __forceinline__ unsigned step(unsigned table, int kt) const
    {
        return table + 128 * (kt - period.div(kt) * period.d);
    }
    /// Where the table ends: a policy's own shared memory follows (kjit::TapTable::bytes).
    __device__ __forceinline__ unsigned end(unsigned table) const { return table + 128 * period.d; }
    /// The channel a K step's patch starts at, counted from the group's first.
    __device__ __forceinline__ int first_channel(int kt) const { return taps.div(32 * kt); }
};

/// Channels a group: a tile of output channels row0… reads the input channels of their group.
struct Groups {
    int in, out;

    __device__ __forceinline__ int first_input(int row0) const { return row0 / out * in; }
};

/// A's elements of one tap box for this thread's two rows: pixel `half` reads, for a table entry,
/// the patch element at its `base` (in bytes) + the entry's offset. The patch holds every element
/// its pixels' taps read, the padding's zeros included (TMA's zero fill, on every side), so no
/// read is masked.
struct TapFragments {
    const Patches& patches;
    unsigned table;
    int base[2];

    __device__ __forceinline__ unsigned step(int kt) const { return patches.step(table, kt); }
    __device__ __forceinline__ unsigned k_entry(unsigned row, int k_step) const
    {
        return __float_as_uint(kjit::load_shared(row + 4 * k_step)) & 0xffff;  // the offset, not (r, q)
    }
    __device__ __forceinline__ float at(unsigned box, unsigned offset, int half) const
    {
        return kjit::load_shared(box + offset + base[half]);
    }
};

/// A's elements of one flattened-rows box for this thread's two rows: pixel `half` reads, for a
/// table entry (channel, r, q), the patch element at its `base` (in bytes) + the entry's offset,
/// masked to zero where (row + r, col + q) leaves [0, rows) × [0, cols) — a row's neighbours in
/// the flattened patch are the rows before and after it; branch-free: a masked read loads the
/// box's first element. Where the box's start moves with the step's first channel c0 (less than a
/// 16-byte step: patches across planes of `plane` elements), a step adds ((c0·plane + first) mod
/// 4) elements to every entry.
struct PatchFragments {
    const Patches& patches;
    unsigned table;
    int row[2], col[2], base[2];
    int rows, cols, plane, first;

    struct Step {
        unsigned row, rebase;
    };
    __device__ __forceinline__ Step step(int kt) const
    {
        return {patches.step(table, kt), ((patches.first_channel(kt) * plane + first) & 3) * 4u};
    }
    __device__ __forceinline__ unsigned k_entry(const Step& s, int k_step) const
    {
        return __float_as_uint(kjit::load_shared(s.row + 4 * k_step)) + s.rebase;  // offsets < 4096: no carry
    }
    __device__ __forceinline__ float at(unsigned box, unsigned entry, int half) const
    {
        const int r = entry >> 16 & 0xff, q = entry >> 24;
        const bool inside = static_cast<unsigned>(row[half] + r) < static_cast<unsigned>(rows) &&
                            static_cast<unsigned>(col[half] + q) < static_cast<unsigned>(cols);
        const float v = kjit::load_shared(inside ? box + (entry & 0xffff) + base[half] : box);
        return inside ? v : 0.0f;
    }
};

}  // namespace conv_sm90

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
    const float* residual;  // added to y where not null (y_by_tma is then false)
    int B, C_OUT, OH, OW, y_row_stride;
    long long y_image_stride;
    bool y_by_tma;
    kjit::TapBox patch;
    int boxes_w, boxes_per_image, pad, box_w_log2;
    conv_sm90::Patches patches;
    conv_sm90::Groups groups;

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

    /// Where box i's patch is loaded from: its first input row ih and its first column iw rounded
    /// down to a multiple of 4 (negative in the padding before the image, which TMA zero-fills as
    /// it does past the other edges); the patch then sits `shift_cols` columns into the box.
    struct Patch {
        int ih, iw, shift_cols;
    };
    __device__ __forceinline__ Patch patch_of(const Box& p) const
    {
        const int ih = p.oh0 * patch.stride - pad, iw = p.ow0 * patch.stride - pad, load_w = iw & ~3;
        return {ih, load_w, iw - load_w};
    }

    __device__ __forceinline__ void prepare(unsigned table) const { patches.prepare(table); }

    /// A's elements of one box of a tile: pixel j sits dy rows and dx columns into the box, so it
    /// reads patch row dy·stride + r, column dx·stride + shift_cols + q.
    __device__ __forceinline__ conv_sm90::TapFragments fragments(int tile_m, int i, unsigned table,
                                                                 gemm::sm90::ThreadPixels pixels) const
    {
        const Patch p = patch_of(box(tile_m, i));
        conv_sm90::TapFragments f{patches, table, {}};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = (pixels.pixel[half] >> box_w_log2) * patch.stride;
            const int col = (pixels.pixel[half] & (patch.box_w - 1)) * patch.stride + p.shift_cols;
            f.base[half] = row * static_cast<int>(patches.row_bytes) + col * 4;
        }
        return f;
    }

    /// Output boxes are dense: BLOCK_N channels × 32 pixels.
    __device__ static unsigned y_offset(int channel, int pixel) { return channel * 128 + pixel * 4; }

    /// A tile's patches, one TMA copy per box and K step, from the corners worked out once per
    /// tile (kept in the K loop, the producer's divisions took longer than its copies).
    struct Loader {
        const Columns& columns;
        Patch patch[BLOCK_M / 32];
        int image[BLOCK_M / 32];
        int channel0;  // the tile's group's first input channel

        __device__ __forceinline__ Loader(const Columns& c, int tile_m, int row0)
            : columns(c), channel0(c.groups.first_input(row0))
        {
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i) {
                const Box b = c.box(tile_m, i);
                patch[i] = c.patch_of(b);
                image[i] = b.b;
            }
        }
        __device__ __forceinline__ unsigned x_tx_bytes() const { return BLOCK_M / 32 * columns.patch.bytes(); }
        __device__ __forceinline__ void load(unsigned dst, unsigned slot_bytes, int kt, unsigned bar) const
        {
            const int c0 = channel0 + columns.patches.first_channel(kt);
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i)
                kjit::tma_load(dst + i * slot_bytes, columns.x_map, patch[i].iw, patch[i].ih, c0, image[i], bar);
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, int row0, unsigned) const
    {
        return Loader(*this, tile_m, row0);
    }
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
        const long long at = p.b * y_image_stride + 1LL * row0 * y_row_stride + oh * OW + ow;
        gemm::sm90::store_pixel_channels<BLOCK_N, Columns>(y, residual, at, y_row_stride, src, pixel, row0, N);
    }
};

}  // namespace taps_sm90

namespace rows_sm90 {

using gemm::sm90::swizzled;

/// GEMM columns as boxes of 32 consecutive output pixels j of an image (flat over its OH·OW),
/// ⌈OH·OW / 32⌉ boxes an image; a tile is BLOCK_M/32 consecutive boxes (tiles run across
/// images). A box's patch is the input rows its pixels' taps reach, each whole, flattened:
/// element (c, ih, iw) at c·pitch + ih·W + iw − start, `start` where the load began.
template <int BLOCK_M>
struct Columns {
    const kjit::TensorMap& x_map;
    const kjit::TensorMap& y_map;
    float* y;
    const float* residual;  // added to y where not null (y_by_tma is then false)
    int B, C_OUT, H, W, OH, OW, stride, pad, y_row_stride;
    long long y_image_stride;
    bool y_by_tma;
    kjit::RowsBox patch;
    int boxes_per_image;
    conv_sm90::Patches patches;
    conv_sm90::Groups groups;

    struct Box {
        int j0, b;
    };
    __device__ __forceinline__ Box box(int tile_m, int i) const
    {
        const int s = tile_m * (BLOCK_M / 32) + i, b = s / boxes_per_image;
        return {(s - b * boxes_per_image) * 32, b};
    }
    static constexpr bool gathers = false;                         // TMA reads x
    static constexpr auto y_store = gemm::sm90::YStore::per_call;  // rows where TMA cannot write y
    __device__ bool stores_by_tma() const { return y_by_tma; }

    /// The first element of box p's patch in a channel plane: the first input row its pixels
    /// reach, max(ih, 0), at column 0.
    __device__ __forceinline__ int first_element(const Box& p) const { return max((p.j0 / OW) * stride - pad, 0) * W; }
    /// Where TMA starts the copy of channels c0… of a box whose patch starts at `first` in a
    /// plane, in the map's innermost dimension (a plane of H·W, or all C_IN of them): rounded down
    /// to a 16-byte boundary. (A group's first channel moves the start by whole 16-byte steps:
    /// groups of a multiple of 4 channels, so the consumers' offsets within the box hold.)
    __device__ __forceinline__ int load_start(int first, int c0) const
    {
        return ((patch.planes_apart ? c0 * H * W : 0) + first) & ~3;
    }

    __device__ __forceinline__ void prepare(unsigned table) const { patches.prepare(table); }

    /// A's elements of one box of a tile: pixel j0 + p is output (oh, ow), its taps read input
    /// (oh·stride − pad + r, ow·stride − pad + q), masked to the image on every side (a row's
    /// neighbours in the flattened patch are the rows before and after it), at
    /// ih·W + iw − first + ((c0·plane + first) mod 4) of the channel's run (start_of).
    __device__ __forceinline__ conv_sm90::PatchFragments fragments(int tile_m, int i, unsigned table,
                                                                   gemm::sm90::ThreadPixels pixels) const
    {
        const Box p = box(tile_m, i);
        const int first = first_element(p);
        conv_sm90::PatchFragments f{patches, table, {}, {}, {}, H, W, patch.planes_apart ? H * W : 0, first};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int j = min(p.j0 + pixels.pixel[half], OH * OW - 1);  // past the image: any pixel's, clipped
            const int oh = j / OW, ow = j - oh * OW;
            f.row[half] = oh * stride - pad;
            f.col[half] = ow * stride - pad;
            f.base[half] = (f.row[half] * W + f.col[half] - first) * 4;
        }
        return f;
    }

    /// Output boxes are 128-byte-swizzled rows of 32 pixels, one per channel (the y map's).
    __device__ static unsigned y_offset(int channel, int pixel) { return swizzled(channel, pixel); }

    /// A tile's patches, one TMA copy per box and K step, from each box's patch start and image,
    /// worked out once per tile (as the tap boxes' corners) and kept in shared memory after the
    /// tap table: in registers they spilled the producer's 40 at 128x128, and worked out at
    /// every step their divisions held up its copies.
    struct Loader {
        const Columns& columns;
        unsigned boxes;  // (first element, image) of each box
        int channel0;    // the tile's group's first input channel

        __device__ __forceinline__ Loader(const Columns& c, int tile_m, int row0, unsigned table)
            : columns(c), boxes(c.patches.end(table)), channel0(c.groups.first_input(row0))
        {
            static_assert(BLOCK_M / 32 * 8 <= kjit::TapTable::rows_loader_bytes);
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i) {
                const Box b = c.box(tile_m, i);
                kjit::store2_shared(boxes + 8 * i, {c.first_element(b), b.b});
            }
        }
        __device__ __forceinline__ unsigned x_tx_bytes() const { return BLOCK_M / 32 * columns.patch.bytes(); }
        __device__ __forceinline__ void load(unsigned dst, unsigned slot_bytes, int kt, unsigned bar) const
        {
            const Columns& c = columns;
            const int c0 = channel0 + c.patches.first_channel(kt);
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i) {
                const int2 box = kjit::load2_shared(boxes + 8 * i);
                const int start = c.load_start(box.x, c0);
                if (c.patch.planes_apart) kjit::tma_load(dst + i * slot_bytes, c.x_map, start, box.y, bar);
                else kjit::tma_load(dst + i * slot_bytes, c.x_map, start, c0, box.y, bar);
            }
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, int row0, unsigned table) const
    {
        return Loader(*this, tile_m, row0, table);
    }
    __device__ __forceinline__ void store(unsigned src, int tile_m, int i, int row0) const
    {
        const Box p = box(tile_m, i);
        kjit::tma_store(y_map, src, p.j0, row0, p.b);
    }
    /// Without a y map: box i of a tile, rows row0… of y, from its output box `src`: 32
    /// consecutive pixels per store, none past the image or the last one.
    template <int BLOCK_N>
    __device__ __forceinline__ void store_rows(unsigned src, int tile_m, int i, int row0, int N) const
    {
        const Box p = box(tile_m, i);
        const int pixel = threadIdx.x % 32, j = p.j0 + pixel;
        if (p.b >= B || j >= OH * OW) return;
        const long long at = p.b * y_image_stride + 1LL * row0 * y_row_stride + j;
        gemm::sm90::store_pixel_channels<BLOCK_N, Columns>(y, residual, at, y_row_stride, src, pixel, row0, N);
    }
};

}  // namespace rows_sm90

template <int BLOCK_M, int BLOCK_N, int STAGES, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_tma_forward(const kjit::TensorMap& x_map, const kjit::TensorMap& w_map,
                                                           const kjit::TensorMap& y_map, float* y,
                                                           const float* bn_scale, const float* bn_shift, int B,
                                                           int C_IN, int H, int W, int C_OUT, int groups, int OH,
                                                           int OW, int KH, int KW, int stride, int pad, int box_w,
                                                           int box_rows, int box_channels, int planes_apart,
                                                           int y_row_stride, int y_by_tma, long long,
                                                           long long y_image_stride,  // x's is in x_map
                                                           const float* residual)
{
    constexpr kjit::Sm90Geometry G{BLOCK_M, BLOCK_N, STAGES};
    const int taps = KH * KW, K = C_IN / groups * taps;  // a group's
    const conv_sm90::Groups group_channels{C_IN / groups, C_OUT / groups};
    if (box_w > 0) {  // tap boxes
        const kjit::TapBox patch{box_w, box_channels, KH, KW, stride};
        const conv_sm90::Patches patches{
            kjit::Divisor(taps), kjit::Divisor(KW), kjit::Divisor(kjit::TapTable{taps}.period()),
            static_cast<unsigned>(patch.patch_h() * patch.patch_w() * 4), static_cast<unsigned>(patch.patch_w() * 4)};
        const int boxes_w = kjit::ceil_div(OW, box_w), boxes_per_image = kjit::ceil_div(OH, patch.rows()) * boxes_w;
        const taps_sm90::Columns<BLOCK_M> columns{x_map,
                                                  y_map,
                                                  y,
                                                  residual,
                                                  B,
                                                  C_OUT,
                                                  OH,
                                                  OW,
                                                  y_row_stride,
                                                  y_image_stride,
                                                  y_by_tma != 0,
                                                  patch,
                                                  boxes_w,
                                                  boxes_per_image,
                                                  pad,
                                                  __ffs(box_w) - 1,
                                                  patches,
                                                  group_channels};
        gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(
            columns, w_map, G.column_tiles(patch.boxes(B, OH, OW)), C_OUT, K, bn_scale, bn_shift);
    } else {  // whole rows, flattened
        const kjit::RowsBox patch{box_rows, box_channels, W, H * W, planes_apart != 0};
        const conv_sm90::Patches patches{kjit::Divisor(taps), kjit::Divisor(KW),
                                         kjit::Divisor(kjit::TapTable{taps}.period()),
                                         static_cast<unsigned>(patch.pitch() * 4), static_cast<unsigned>(W * 4)};
        const rows_sm90::Columns<BLOCK_M> columns{x_map,
                                                  y_map,
                                                  y,
                                                  residual,
                                                  B,
                                                  C_OUT,
                                                  H,
                                                  W,
                                                  OH,
                                                  OW,
                                                  stride,
                                                  pad,
                                                  y_row_stride,
                                                  y_image_stride,
                                                  y_by_tma != 0,
                                                  patch,
                                                  kjit::ceil_div(OH * OW, 32),
                                                  patches,
                                                  group_channels};
        gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(columns, w_map, G.column_tiles(B, OH * OW), C_OUT,
                                                                    K, bn_scale, bn_shift);
    }
}
