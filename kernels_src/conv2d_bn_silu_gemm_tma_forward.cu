// Fused 1×1 Conv2d (stride 1, no padding, groups 1) + inference BatchNorm + SiLU on Hopper
// (sm_90a): the GEMM of conv2d_bn_silu_gemm_forward.cu, Y[n, j] = silu(scale[n]·Σ_k W[n, k]·X[k, j] + shift[n]),
// on the TMA + wgmma path (kjit/gemm_sm90.cuh). W reaches the kernel as w_map {C_IN, C_OUT},
// boxes 32 × BLOCK_N. Two column policies, chosen per call:
//   pointwise_sm90 (M a multiple of 4): x_map {M, C_IN, B}, boxes 32 pixels × 32 channels;
//     y_map {M, C_OUT, B} with y's row stride, boxes 32 pixels × BLOCK_N channels;
//   images_sm90 (images of M ≤ 64 pixels, image_inner > 0): x_map {inner, C_IN·M/inner, B},
//     boxes of whole images (kjit::ImageBox); the consumers store y themselves.
// This file is the column policies: which boxes of x and y a tile's columns are.
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

    /// A tile's X boxes, one TMA copy each per K step, placed once per tile (the producer's one
    /// thread would otherwise divide at every step).
    struct Loader {
        const Columns& columns;
        Box boxes[BLOCK_M / 32];

        __device__ __forceinline__ Loader(const Columns& c, int tile_m) : columns(c)
        {
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i) boxes[i] = c.box(tile_m, i);
        }
        __device__ static constexpr unsigned x_tx_bytes() { return BLOCK_M / 32 * kjit::Sm90Geometry::box * 32 * 4; }
        __device__ __forceinline__ void load(unsigned dst, unsigned slot_bytes, int kt, unsigned bar) const
        {
#pragma unroll
            for (int i = 0; i < BLOCK_M / 32; ++i)
                kjit::tma_load(dst + i * slot_bytes, columns.x_map, boxes[i].m0, 32 * kt, boxes[i].b, bar);
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, int, unsigned) const { return Loader(*this, tile_m); }
    __device__ __forceinline__ void store(unsigned src, int tile_m, int i, int row0) const
    {
        const Box p = box(tile_m, i);
        kjit::tma_store(y_map, src, p.m0, row0, p.b);
    }
};

}  // namespace pointwise_sm90

namespace images_sm90 {

/// GEMM columns as groups of whole images: consumer warpgroup c of tile t owns group
/// t·consumers + c, images() images of M pixels — its 64 rows are (image, pixel) in order, the
/// rows past images()·M idle. A K step's X is one TMA box per warpgroup across its two 4 KB
/// slots: X[k][pixel] of image i at (i·32 + k)·M + pixel floats, dense, zero-filled past C_IN
/// and past the last image.
template <int BLOCK_M>
struct Columns {
    static constexpr int consumers = BLOCK_M / 64;
    const kjit::TensorMap& x_map;
    float* y;
    const float* residual;  // added to y where not null
    int B, C_OUT, y_row_stride;
    long long y_image_stride;
    kjit::ImageBox image;

    static constexpr bool gathers = false;  // TMA reads x
    static constexpr auto y_store = gemm::sm90::YStore::rows;
    __device__ static void prepare(unsigned) {}  // no shared memory of its own
    __device__ static unsigned y_offset(int channel, int pixel) { return gemm::sm90::swizzled(channel, pixel); }

    /// The first image of X box i's warpgroup in tile tile_m, and the warpgroup's row of the
    /// box's pixel `pixel`.
    __device__ __forceinline__ int first_image(int tile_m, int i) const
    {
        return (tile_m * consumers + i / 2) * image.images();
    }
    __device__ static int row(int i, int pixel) { return 32 * (i % 2) + pixel; }

    /// A's elements for this thread's two rows: row q is pixel q mod M of the group's image
    /// q / M (idle rows read the last live one), found from X box i's slot, the warpgroup's
    /// second when i is odd.
    struct Fragments {
        int base[2];  // bytes from box i's slot to the row's X[0][pixel]
        int k_bytes;  // from one k to the next: M floats
        __device__ static int step(int) { return 0; }
        __device__ int k_entry(int, int k) const { return k * k_bytes; }
        __device__ float at(unsigned box, int entry, int half) const
        {
            return kjit::load_shared(box + base[half] + entry);
        }
    };
    __device__ __forceinline__ Fragments fragments(int, int i, unsigned, gemm::sm90::ThreadPixels pixels) const
    {
        const int M = image.pixels, live = image.images() * M;
        Fragments f{{}, 4 * M};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int q = min(row(i, pixels.pixel[half]), live - 1), img = q / M;
            f.base[half] = ((img * 32 * M + q - img * M) - i % 2 * kjit::Sm90Geometry::box * 32) * 4;
        }
        return f;
    }

    /// A tile's images, one TMA copy per consumer warpgroup and K step.
    struct Loader {
        const Columns& columns;
        int tile_m;
        __device__ __forceinline__ unsigned x_tx_bytes() const { return consumers * columns.image.bytes(); }
        __device__ __forceinline__ void load(unsigned dst, unsigned slot_bytes, int kt, unsigned bar) const
        {
#pragma unroll
            for (int c = 0; c < consumers; ++c)
                kjit::tma_load(dst + 2 * c * slot_bytes, columns.x_map, 0, kt * columns.image.step_rows(),
                               columns.first_image(tile_m, 2 * c), bar);
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, int, unsigned) const { return {*this, tile_m}; }

    /// Box i of a tile, rows row0… of y, from its output box `src`: a warp's lanes hold
    /// consecutive rows, so each store runs along an image's pixels; none for idle rows or
    /// images past the batch.
    template <int BLOCK_N>
    __device__ __forceinline__ void store_rows(unsigned src, int tile_m, int i, int row0, int N) const
    {
        const int pixel = threadIdx.x % 32, q = row(i, pixel), M = image.pixels, img = q / M;
        const int b = first_image(tile_m, i) + img;
        if (q >= image.images() * M || b >= B) return;
        const long long at = b * y_image_stride + 1LL * row0 * y_row_stride + (q - img * M);
        gemm::sm90::store_pixel_channels<BLOCK_N, Columns>(y, residual, at, y_row_stride, src, pixel, row0, N);
    }
};

}  // namespace images_sm90

template <int BLOCK_M, int BLOCK_N, int STAGES, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_gemm_tma_forward(
    const kjit::TensorMap& x_map, const kjit::TensorMap& w_map, const kjit::TensorMap& y_map, float* y,
    const float* bn_scale, const float* bn_shift, int B, int C_IN, int C_OUT, int M, int y_row_stride, int image_inner,
    long long, long long y_image_stride, const float* residual)  // x's image stride is in x_map
{
    constexpr kjit::Sm90Geometry G{BLOCK_M, BLOCK_N, STAGES};
    if (image_inner > 0) {
        const kjit::ImageBox image{M, image_inner};
        const images_sm90::Columns<BLOCK_M> columns{x_map, y, residual, B, C_OUT, y_row_stride, y_image_stride, image};
        gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(columns, w_map, G.column_tiles(2 * image.groups(B)),
                                                                    C_OUT, C_IN, bn_scale, bn_shift);
    } else {
        const pointwise_sm90::Columns<BLOCK_M> columns{x_map, y_map, kjit::ceil_div(M, 32)};
        gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(columns, w_map, G.column_tiles(B, M), C_OUT, C_IN,
                                                                    bn_scale, bn_shift);
    }
}
