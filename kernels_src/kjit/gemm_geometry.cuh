// The tensor-core GEMM's tile geometry: block layout and shared-memory plan of one tile shape.
// Both sides compile this one definition — NVRTC for the kernels (gemm.cuh), the host compiler
// for launch shapes, shared-memory sizes and validation — so the two never disagree. Plain
// constexpr C++ only (NVRTC's -default-device makes these device functions).
#pragma once
#include "kjit/ceil_div.cuh"
#include "kjit/register_split.cuh"

namespace kjit {

/// A BLOCK_M (columns: pixels) × BLOCK_N (rows: output channels) × BLOCK_K (reduction) tile.
struct GemmGeometry {
    int block_m, block_n, block_k;

    static constexpr int stages = 3;  // cp.async pipeline depth

    // Each warp owns 32 columns and warp_n() channels.
    constexpr int warps_m() const { return block_m / 32; }
    constexpr int warps_n() const { return block_n >= 64 ? 2 : 1; }
    constexpr int threads() const { return 32 * warps_m() * warps_n(); }
    constexpr int warp_n() const { return block_n / warps_n(); }
    // Shared tiles, padded so fragment reads hit 32 distinct banks.
    constexpr int w_stride() const { return block_k + 4; }  // W tile: [BLOCK_N][BLOCK_K]
    constexpr int x_stride() const { return block_m + 8; }  // X tile: [BLOCK_K][BLOCK_M]
    constexpr int w_stage() const { return block_n * w_stride(); }
    constexpr int x_stage() const { return block_k * x_stride(); }
    /// Dynamic shared memory: the pipeline's stages, or with split-K the whole partial tile
    /// parked for the cluster's reduction when that is larger.
    constexpr int shared_floats(int split_k) const
    {
        const int pipeline = stages * (w_stage() + x_stage());
        const int partial = split_k > 1 ? block_m * block_n : 0;
        return pipeline > partial ? pipeline : partial;
    }
};

/// The Hopper (sm_90a, TMA + wgmma) tile: BLOCK_M pixels (64 per consumer warpgroup: 1, 2 or 4 of
/// them) × BLOCK_N channels (the wgmma N: 32, 64 or 128), K in 32-float steps (one 128-byte
/// swizzled row), STAGES of them in flight. Boxes are 32 pixels (X and Y) or 32 of K (W) wide:
/// one 128-byte row each.
struct Sm90Geometry {
    int block_m, block_n, stages;

    static constexpr int box = 32;      // floats in one 128-byte swizzled row
    static constexpr int block_k = 32;  // K per stage

    constexpr int consumers() const { return block_m / 64; }           // wgmma warpgroups
    constexpr int threads() const { return 128 * (consumers() + 1); }  // + the TMA producer
    /// Registers per thread at launch (kjit/register_split.cuh).
    constexpr int launch_registers() const { return RegisterSplit{consumers(), 0}.launch(); }
    /// What setmaxnreg leaves the producer warpgroup: one thread issuing TMA copies needs few; a
    /// gathering warpgroup computes addresses.
    static constexpr int producer_registers(bool gathers) { return gathers ? 56 : 40; }
    /// What each consumer warpgroup raises itself to.
    constexpr int consumer_registers(bool gathers) const
    {
        return RegisterSplit{consumers(), producer_registers(gathers)}.consumer();
    }
    /// A-fragment buffers a consumer thread holds (16 registers each): two, so that the next K
    /// step's are read while this one's wgmma run, except at four consumers, whose 96 registers
    /// a thread spill with the second.
    constexpr int a_buffers() const { return consumers() < 4 ? 2 : 1; }
    constexpr int w_bytes() const { return block_n * box * 4; }
    constexpr int x_box_bytes() const { return block_k * box * 4; }
    constexpr int x_bytes() const { return block_m / box * x_box_bytes(); }
    constexpr int stage_bytes() const { return w_bytes() + x_bytes(); }
    constexpr int y_box_bytes() const { return block_n * box * 4; }
    constexpr int y_bytes() const { return block_m / box * y_box_bytes(); }
    constexpr int barriers_offset() const { return stages * stage_bytes() + y_bytes(); }
    /// Column tiles of `boxes` output boxes of 32 pixels: a tile is BLOCK_M/32 consecutive boxes.
    template <class T>
    constexpr T column_tiles(T boxes) const
    {
        return ceil_div(boxes, T(block_m / box));
    }
    /// Column tiles of `batch` images of `pixels` each, an image ⌈pixels/32⌉ boxes (tiles run
    /// across images).
    template <class T>
    constexpr T column_tiles(T batch, T pixels) const
    {
        return column_tiles(batch * ceil_div(pixels, T(box)));
    }
    /// Every tile of the GEMM: column tiles × ⌈channels / BLOCK_N⌉.
    template <class T>
    constexpr T tiles(T batch, T pixels, T channels) const
    {
        return column_tiles(batch, pixels) * ceil_div(channels, T(block_n));
    }
    /// The mbarriers: a full and an empty one per stage, and per consumer warpgroup the two of
    /// a split-K cluster's hand-over (partials parked, partials read).
    constexpr int barriers_bytes() const { return (2 * stages + 2 * consumers()) * 8; }
    /// Dynamic shared memory: the stages, the output boxes, the barriers, and the slack that
    /// aligns the start to the 1024 bytes 128-byte swizzling wants.
    constexpr int shared_bytes() const { return barriers_offset() + barriers_bytes() + 1024; }
};

/// The Hopper implicit GEMM's X box: the input patch that 32 output pixels — BOX_W along a row
/// × 32/BOX_W rows — read for one K step (32 consecutive k = (channel, tap) of a KH × KW filter
/// at `stride`): `channels` input channels × patch_h() rows × patch_w() columns, dense, one TMA
/// box (the tensor map's zero fill pads it wherever it leaves the image).
struct TapBox {
    int box_w, channels, kh, kw, stride;

    constexpr int rows() const { return 32 / box_w; }
    constexpr int patch_h() const { return (rows() - 1) * stride + kh; }
    /// 16-byte rows, and 3 columns more: a load starts at the 16-byte boundary at or before the
    /// patch's first column (TMA takes no other starting column).
    constexpr int patch_w() const { return ceil_div((box_w - 1) * stride + kw + 3, 4) * 4; }
    constexpr int bytes() const { return channels * patch_h() * patch_w() * 4; }
    /// Input channels any 32 consecutive k of a step can touch (steps start at multiples of 32).
    static constexpr int step_channels(int taps)
    {
        int most = 0;
        for (int k0 = 0; k0 < 32 * taps; k0 += 32) {
            const int span = (k0 + 31) / taps - k0 / taps + 1;
            most = span > most ? span : most;
        }
        return most;
    }
    /// Output boxes of `batch` images of oh × ow pixels: ⌈oh / rows⌉ × ⌈ow / BOX_W⌉ each.
    template <class T>
    constexpr T boxes(T batch, T oh, T ow) const
    {
        return batch * ceil_div(oh, T(rows())) * ceil_div(ow, T(box_w));
    }
};

/// The Hopper 1×1 kernel's X box for small images (`pixels` ≤ 64: 7×7, 5×5, one pixel): a
/// consumer warpgroup's 64 rows are images() whole images, and a K step's box is their 32
/// channels' planes, which lie contiguous in x — through a map {inner, C_IN·pixels/inner, B}
/// (rows of `inner` floats: 16-byte strides whatever the image's size), box {inner, step_rows(),
/// images()}. `inner` is 8, or 4 where C_IN·pixels is no multiple of 8 (then pixels ≤ 32: a box
/// has at most 256 rows).
struct ImageBox {
    int pixels, inner;

    constexpr int images() const { return 64 / pixels; }
    constexpr int step_rows() const { return 32 * pixels / inner; }
    /// One warpgroup's box: 32 channels of its images, at most two 32-pixel X slots.
    constexpr int bytes() const { return 32 * pixels * images() * 4; }
    /// Groups of images() images in a batch: a consumer warpgroup's columns each.
    template <class T>
    constexpr T groups(T batch) const
    {
        return ceil_div(batch, T(images()));
    }
};

/// The Hopper implicit GEMM's X box where TMA cannot box image rows (W no multiple of 4): for
/// 32 consecutive output pixels of an image, the `rows` whole input rows of width W their taps
/// reach, flattened, in `channels` channels. A channel's run is rows·W elements and 3 more (a
/// load starts at the 16-byte boundary at or before it), 16-byte rounded. With planes_apart
/// (planes of H·W no multiple of 4 either: the map is {C·H·W, B}) one box spans the channels'
/// planes; else each channel is a row of the box (the map is {H·W, C, B}).
struct RowsBox {
    int rows, channels, W, plane;
    bool planes_apart;

    constexpr int span() const { return ceil_div(rows * W + 3, 4) * 4; }
    /// Elements from one channel's run in the box to the next's.
    constexpr int pitch() const { return planes_apart ? plane : span(); }
    /// The box's innermost extent: one channel's run, or every channel's across their planes.
    constexpr int extent() const
    {
        return planes_apart ? ceil_div((channels - 1) * plane + rows * W + 3, 4) * 4 : span();
    }
    constexpr int bytes() const { return (planes_apart ? extent() : span() * channels) * 4; }
};

/// Where each of a K step's 32 k = (channel, tap) of the Hopper implicit GEMM sits in its patch,
/// one 4-byte entry each, for the steps after which the pattern repeats: 32·kt mod taps takes
/// taps / gcd(32, taps) values (9 steps for a 3 × 3 filter).
struct TapTable {
    int taps;

    constexpr int period() const
    {
        int common = 1;
        while (common < 32 && taps % (2 * common) == 0) common *= 2;
        return taps / common;
    }
    constexpr int bytes() const { return period() * 32 * 4; }
    /// What the flattened-rows producer keeps after the table: each box's patch start and image,
    /// BLOCK_M/32 ≤ 8 boxes.
    static constexpr int rows_loader_bytes = 8 * 8;
};

}  // namespace kjit
