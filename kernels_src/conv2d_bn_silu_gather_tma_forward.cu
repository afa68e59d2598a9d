// Fused Conv2d (any kernel up to 64 taps, 1×1 included; stride, padding; groups 1, dilation 1) +
// inference BatchNorm + SiLU on Hopper (sm_90a) for the layers whose x or y TMA cannot address:
// image rows (or, for a 1×1 layer, whole images) that are no multiple of 16 bytes — 7×7, 14×14,
// 10×10 — or tensors off a 16-byte boundary. The implicit GEMM of conv2d_bn_silu_tma_forward.cu,
//   Y[n, j] = silu(scale[n] · Σ_k W[n, k] · patch_j[k] + shift[n]),  k = (ci, kh, kw), j = (b, oh, ow),
// with X gathered instead of boxed. W still arrives by TMA (w_map {C_IN·KH·KW, C_OUT}, boxes
// 32 × BLOCK_N, 128-byte swizzled). The producer warpgroup's 128 threads gather each K step's X —
// per box 32 consecutive columns j (flat over the batch) × the step's 32 k — with 4-byte cp.async,
// zero-filled at the padding and past the tensor, into the pixel-major 128-byte-swizzled rows
// the 1×1 kernel's TMA boxes use; each thread's copies arrive on the stage's barrier when they
// land. The consumers store y themselves, coalesced along j and masked at its edges.
// This file is the column policy: which input elements and output columns a tile's boxes are.
#include "kjit/divisor.cuh"
#include "kjit/gemm_sm90.cuh"

namespace gather_sm90 {

using gemm::sm90::swizzled;

template <int BLOCK_M>
struct Columns {
    static constexpr bool gathers = true;
    static constexpr auto y_store = gemm::sm90::YStore::rows;
    static constexpr int boxes = BLOCK_M / 32;
    const float* x;
    float* y;
    const float* residual;  // added to y where not null
    int pixels;             // the GEMM's columns: B·OH·OW
    int C_IN, H, W, C_OUT, OH, OW, stride, pad, K, y_row_stride;
    int x_image_stride;  // the host checked that x's last image ends below 2³¹
    long long y_image_stride;
    kjit::Divisor taps, kw, period;  // KH·KW, KW, the (channel, tap) table's steps

    /// Column j of box i of a tile: box s = tile_m·BLOCK_M/32 + i holds j = 32·s …
    __device__ static int column(int tile_m, int i, int pixel) { return (tile_m * boxes + i) * 32 + pixel; }

    /// The (channel, tap) table (kjit::TapTable) in `table`: entry (s, k_step) says where
    /// k = 32·s + k_step sits relative to its step's first channel: dc | r << 8 | q << 16 for
    /// channel c0 + dc and filter tap (r, q).
    __device__ __forceinline__ void prepare(unsigned table) const
    {
        for (int i = threadIdx.x; i < static_cast<int>(period.d) * 32; i += blockDim.x) {
            const unsigned k0 = i / 32 * 32u, k = k0 + i % 32;
            const unsigned c = taps.div(k), tap = k - c * taps.d, r = kw.div(tap), q = tap - r * kw.d;
            kjit::store_shared(table + 4 * i, __uint_as_float((c - taps.div(k0)) | r << 8 | q << 16));
        }
    }

    /// A producer thread's part of a tile: pixel threadIdx.x % 32 of every box, k_step
    /// threadIdx.x / 32 + 4u of every K step (u < 8), written where the consumers read them.
    struct Loader {
        const Columns& c;
        unsigned table;
        int corner[boxes];  // the patch's top-left input element (maybe in the padding); x has < 2³¹
        int ih0[boxes], iw0[boxes];

        __device__ __forceinline__ Loader(const Columns& columns, int tile_m, unsigned tap_table)
            : c(columns), table(tap_table)
        {
            const int image = c.OH * c.OW;
#pragma unroll
            for (int i = 0; i < boxes; ++i) {
                const int j = column(tile_m, i, threadIdx.x % 32);
                const int b = j / image, m = j - b * image, oh = m / c.OW, ow = m - oh * c.OW;
                const bool live = j < c.pixels;
                ih0[i] = live ? oh * c.stride - c.pad : -(1 << 30);  // a column past the end reads nothing
                iw0[i] = ow * c.stride - c.pad;
                corner[i] = live ? b * c.x_image_stride + ih0[i] * c.W + iw0[i] : 0;
            }
        }
        /// The gathered copies arrive on the barrier themselves: TMA brings no X bytes.
        __device__ static constexpr unsigned x_tx_bytes() { return 0; }

        __device__ __forceinline__ void load(unsigned dst, unsigned slot_bytes, int kt, unsigned bar) const
        {
            const unsigned row = table + 128 * (kt - c.period.div(kt) * c.period.d);
            const int c0 = c.taps.div(32 * kt), pixel = threadIdx.x % 32;
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int k_step = threadIdx.x / 32 + 4 * u;
                const unsigned e = __float_as_uint(kjit::load_shared(row + 4 * k_step));
                const int r = e >> 8 & 0xff, q = e >> 16;
                const bool in_k = 32 * kt + k_step < c.K;
                const int offset = ((c0 + static_cast<int>(e & 0xff)) * c.H + r) * c.W + q;
#pragma unroll
                for (int i = 0; i < boxes; ++i) {
                    const bool valid = in_k && static_cast<unsigned>(ih0[i] + r) < static_cast<unsigned>(c.H) &&
                                       static_cast<unsigned>(iw0[i] + q) < static_cast<unsigned>(c.W);
                    kjit::copy_async<4>(dst + i * slot_bytes + swizzled(k_step, pixel),
                                        valid ? c.x + corner[i] + offset : c.x, valid);
                }
            }
        }
    };
    __device__ __forceinline__ Loader loader(int tile_m, int, unsigned table) const { return {*this, tile_m, table}; }

    __device__ static gemm::sm90::PixelMajorFragments fragments(int, int, unsigned, gemm::sm90::ThreadPixels rows)
    {
        return {rows};
    }
    __device__ static unsigned y_offset(int channel, int pixel) { return swizzled(channel, pixel); }

    /// Box i of a tile, rows row0… of y, from its output box `src`: 32 consecutive columns per
    /// store, none past the last.
    template <int BLOCK_N>
    __device__ __forceinline__ void store_rows(unsigned src, int tile_m, int i, int row0, int N) const
    {
        const int pixel = threadIdx.x % 32, j = column(tile_m, i, pixel);
        if (j >= pixels) return;
        const int image = OH * OW, b = j / image;
        const long long at = b * y_image_stride + 1LL * row0 * y_row_stride + (j - b * image);
        gemm::sm90::store_pixel_channels<BLOCK_N, Columns>(y, residual, at, y_row_stride, src, pixel, row0, N);
    }
};

}  // namespace gather_sm90

template <int BLOCK_M, int BLOCK_N, int STAGES, int GROUP_M>
__device__ __forceinline__ void conv2d_bn_silu_gather_tma_forward(const float* x, const kjit::TensorMap& w_map,
                                                                  float* y, const float* bn_scale,
                                                                  const float* bn_shift, int B, int C_IN, int H, int W,
                                                                  int C_OUT, int OH, int OW, int KH, int KW, int stride,
                                                                  int pad, int y_row_stride, long long x_image_stride,
                                                                  long long y_image_stride, const float* residual)
{
    const int K = C_IN * KH * KW, pixels = B * OH * OW;
    const gather_sm90::Columns<BLOCK_M> columns{x,
                                                y,
                                                residual,
                                                pixels,
                                                C_IN,
                                                H,
                                                W,
                                                C_OUT,
                                                OH,
                                                OW,
                                                stride,
                                                pad,
                                                K,
                                                y_row_stride,
                                                static_cast<int>(x_image_stride),
                                                y_image_stride,
                                                kjit::Divisor(KH * KW),
                                                kjit::Divisor(KW),
                                                kjit::Divisor(kjit::TapTable{KH * KW}.period())};
    const int tiles_m = kjit::Sm90Geometry{BLOCK_M, BLOCK_N, STAGES}.column_tiles(kjit::ceil_div(pixels, 32));
    gemm::sm90::gemm_bn_silu<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(columns, w_map, tiles_m, C_OUT, K, bn_scale, bn_shift);
}
