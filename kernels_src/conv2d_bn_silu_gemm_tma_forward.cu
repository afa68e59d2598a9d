// Fused 1×1 Conv2d (stride 1, no padding, groups 1) + inference BatchNorm + SiLU on Hopper
// (sm_90a): the GEMM of conv2d_bn_silu_gemm_forward.cu, Y[n, j] = silu(scale[n]·Σ_k W[n, k]·X[k, j] + shift[n]),
// on the TMA + wgmma path (kjit/gemm_sm90.cuh). x, w and y reach the kernel as tensor maps:
//   x_map {M, C_IN, B}, boxes 32 pixels × 32 channels;  w_map {C_IN, C_OUT}, boxes 32 × BLOCK_N;
//   y_map {M, C_OUT, B} with y's row stride, boxes 32 pixels × BLOCK_N channels.
// This file is the column policy: which boxes of x and y a tile's columns are.
#include "kjit/gemm_sm90.cuh"

namespace pointwise_sm90 {

/// GEMM columns as 32-pixel boxes: image b's M pixels are ⌈M/32⌉ boxes and a tile is BLOCK_M/32
/// consecutive boxes, so tiles run across images and only an image's last box is partial — TMA
/// zero-fills what it reads past M (or past the last image) and clips what it writes.
template <int BLOCK_M>
struct Columns {
    const kjit::TensorMap& x_map;
    const kjit::TensorMap& y_map;
    int boxes_per_image;

    struct Box {
        int m0, b;
    };
    __device__ __forceinline__ Box box(int tile_m, int i) const
    {
        const int s = tile_m * (BLOCK_M / 32) + i, b = s / boxes_per_image;
        return {(s - b * boxes_per_image) * 32, b};
    }
    static constexpr bool gathers = false;  // TMA reads x and writes y
    static constexpr auto y_store = gemm::sm90::YStore::tma;
    /// A's elements of a tile: boxes are whole 128-byte-swizzled rows, 32 of K × 32 pixels.
    __device__ static gemm::sm90::PixelMajorFragments fragments(int, int, unsigned, gemm::sm90::ThreadPixels rows)
    {
        return {rows};
    }
    __device__ static void prepare(unsigned) {}  // no shared memory of its own
    __device__ static unsigned y_offset(int channel, int pixel) { return gemm::sm90::swizzled(channel, pixel); }

    /// A tile's X boxes, one TMA copy each per K step.
    struct Loader {
        const Columns& columns;
        int tile_m;
        __device__ static constexpr unsigned x_box_tx_bytes() { return kjit::Sm90Geometry::box * 32 * 4; }
        __device__ __forceinline__ void load(unsigned dst, unsigned slot_bytes, int kt, unsigned bar) const
        {
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i) {
                const Box p = columns.box(tile_m, i);
                kjit::tma_load(dst + i * slot_bytes, columns.x_map, p.m0, 32 * kt, p.b, bar);
            }
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, unsigned) const { return {*this, tile_m}; }
    __device__ __forceinline__ void store(unsigned src, int tile_m, int i, int row0) const
    {
        const Box p = box(tile_m, i);
        kjit::tma_store(y_map, src, p.m0, row0, p.b);
    }
};

}  // namespace pointwise_sm90

template <int BLOCK_M, int BLOCK_N, int STAGES, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_gemm_tma_forward(const kjit::TensorMap& x_map,
                                                                const kjit::TensorMap& w_map,
                                                                const kjit::TensorMap& y_map, const float* bn_scale,
                                                                const float* bn_shift, int B, int C_IN, int C_OUT,
                                                                int M)
{
    const int boxes_per_image = kjit::ceil_div(M, 32);
    const pointwise_sm90::Columns<BLOCK_M> columns{x_map, y_map, boxes_per_image};
    const int tiles_m = kjit::Sm90Geometry{BLOCK_M, BLOCK_N, STAGES}.column_tiles(B, M);
    gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(columns, w_map, tiles_m, C_OUT, C_IN, bn_scale,
                                                                bn_shift);
}
