// Fused depthwise Conv2d (groups = C_IN, C_OUT = m·C_IN: a channel multiplier m) + inference
// BatchNorm + SiLU in fp32, built for memory speed: an output costs 2·KH·KW FLOP and 8 bytes of
// traffic, so the job is to read each input element once, keep its halo in shared memory, and
// write each output once.
//   block:  PLANES input planes (image, channel) × one BLOCK_H × BLOCK_W tile of their outputs;
//           the tile's input window staged once (16-byte cp.async where x's rows are 16-byte
//           aligned, 4-byte otherwise), zero-filled at the padding, then used by every output
//           channel the plane feeds
//   thread: ROWS × PIX outputs at a time (PIX along W, ROWS along H): each input row of their
//           window read once from shared memory in 16-byte pieces and used by every output row
//           it feeds; the filter in registers
//   store:  BN + SiLU, 16-byte stores where y's rows allow
// KH, KW, STRIDE and PAD are compile-time constants: the window loops unroll fully and every
// register index is fixed.
#include "kjit/bn_silu.cuh"
#include "kjit/ceil_div.cuh"
#include "kjit/ptx.cuh"

namespace depthwise {

constexpr int ROWS = 2;  // output rows a thread computes at a time
constexpr int PIX = 4;   // output pixels along W a thread computes at a time

/// The shared-memory window of one plane: the input rows BLOCK_H output rows read, each from the
/// 16-byte chunk holding its first column (`offset` floats before it: the window starts at
/// ow0·STRIDE − PAD, ow0 a multiple of 4), `pitch` floats apart.
template <int KH, int KW, int STRIDE, int PAD, int BLOCK_H, int BLOCK_W>
struct Window {
    static constexpr int offset = (4 - PAD % 4) % 4;
    static constexpr int rows = (BLOCK_H - 1) * STRIDE + KH;
    static constexpr int pitch = kjit::ceil_div(offset + (BLOCK_W - 1) * STRIDE + KW, 4) * 4;
    static constexpr int floats = rows * pitch;
    /// What PIX neighbouring outputs read of one input row, in whole chunks from their first.
    static constexpr int span = offset + (PIX - 1) * STRIDE + KW;
    static constexpr int span_chunks = kjit::ceil_div(span, 4);
    /// Input rows that ROWS neighbouring output rows read.
    static constexpr int row_span = (ROWS - 1) * STRIDE + KH;
};

/// Where a block works: planes plane0…, output rows oh0…, output columns ow0….
struct Origin {
    long long plane0;
    int oh0, ow0;
};

/// Stages the window of each of the block's planes into `window` (shared, PLANES × floats):
/// input rows oh0·STRIDE − PAD…, columns from the chunk at ow0·STRIDE − PAD − offset, zero
/// where they leave the image or the planes run out. BY16: x's rows are whole chunks (W % 4 = 0,
/// x 16-byte aligned), so each chunk is wholly inside the image or wholly outside it.
template <class Win, int PLANES, int THREADS, int STRIDE, int PAD, bool BY16>
__device__ __forceinline__ void stage(float* window, const float* x, const Origin& o, long long planes, int H, int W)
{
    constexpr int width = BY16 ? 4 : 1, columns = Win::pitch / width, per_plane = Win::rows * columns;
    const int ih0 = o.oh0 * STRIDE - PAD, iw0 = o.ow0 * STRIDE - PAD - Win::offset;
    for (int e = threadIdx.x; e < PLANES * per_plane; e += THREADS) {
        const int plane = e / per_plane, row = e % per_plane / columns, column = e % columns;
        const int ih = ih0 + row, iw = iw0 + width * column;
        const bool inside = o.plane0 + plane < planes && ih >= 0 && ih < H && iw >= 0 && iw < W;
        const float* src = inside ? x + ((o.plane0 + plane) * H + ih) * W + iw : x;
        kjit::copy_async<4 * width>(
            kjit::shared_address(window + plane * Win::floats + row * Win::pitch + width * column), src, inside);
    }
    kjit::copy_commit();
}

/// acc[r][p] = Σ over the filter of w · x, for output rows r and columns p of one thread step:
/// `rows` is the window at the first input row and chunk the step reads.
template <class Win, int KH, int KW, int STRIDE>
__device__ __forceinline__ void convolve(float (&acc)[ROWS][PIX], const float (&w)[KH * KW], const float* rows)
{
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int p = 0; p < PIX; ++p) acc[r][p] = 0.0f;
#pragma unroll
    for (int ir = 0; ir < Win::row_span; ++ir) {
        float in[Win::span_chunks * 4];
#pragma unroll
        for (int c = 0; c < Win::span_chunks; ++c) {
            const float4 v = reinterpret_cast<const float4*>(rows + ir * Win::pitch)[c];
            in[4 * c] = v.x, in[4 * c + 1] = v.y, in[4 * c + 2] = v.z, in[4 * c + 3] = v.w;
        }
        // Input row ir is filter row ir − r·STRIDE of output row r.
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const int kh = ir - r * STRIDE;
            if (kh < 0 || kh >= KH) continue;
#pragma unroll
            for (int kw = 0; kw < KW; ++kw)
#pragma unroll
                for (int p = 0; p < PIX; ++p)
                    acc[r][p] = fmaf(w[kh * KW + kw], in[Win::offset + p * STRIDE + kw], acc[r][p]);
        }
    }
}

/// Output row `oh` of y's row `row` (an (image, output channel) pair), columns ow…ow+PIX−1:
/// BN + SiLU, one 16-byte store where the four are in range and y's rows allow it.
__device__ __forceinline__ void store(float* y, long long row, int y_row_stride, int oh, int OW, int ow,
                                      const float (&acc)[PIX], float scale, float shift, bool by16)
{
    float* out = y + row * y_row_stride + 1LL * oh * OW + ow;
    float v[PIX];
#pragma unroll
    for (int p = 0; p < PIX; ++p) v[p] = kjit::bn_silu(acc[p], scale, shift);
    if (by16 && ow + PIX <= OW) {
        *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
#pragma unroll
    for (int p = 0; p < PIX; ++p)
        if (ow + p < OW) out[p] = v[p];
}

}  // namespace depthwise

/// x [B, C, H, W] as `planes` = B·C planes; w [C·m, 1, KH, KW]; y rows (b, c·m + j) = plane·m + j
/// of OH·OW outputs, y_row_stride apart. `vectors`: bit 0, x's rows are 16-byte chunks; bit 1,
/// y's rows take 16-byte stores.
template <int KH, int KW, int STRIDE, int PAD, int BLOCK_H, int BLOCK_W, int PLANES, int THREADS>
__device__ __forceinline__ void conv2d_bn_silu_depthwise_forward(const float* x, const float* w, const float* bn_scale,
                                                                 const float* bn_shift, float* y, long long planes,
                                                                 int C, int H, int W, int OH, int OW, int multiplier,
                                                                 int y_row_stride, int vectors)
{
    using namespace depthwise;
    using Win = Window<KH, KW, STRIDE, PAD, BLOCK_H, BLOCK_W>;
    static_assert(BLOCK_W % PIX == 0 && BLOCK_H % ROWS == 0, "a block's tile is whole thread steps");
    constexpr int per_plane = THREADS / PLANES, across = BLOCK_W / PIX, down = per_plane / across;
    static_assert(THREADS % PLANES == 0 && per_plane % across == 0 && down >= 1 && down <= BLOCK_H / ROWS,
                  "the threads of a plane cover its tile's columns and share its rows");

    const Origin o{1LL * blockIdx.x * PLANES, static_cast<int>(blockIdx.y) * BLOCK_H,
                   static_cast<int>(blockIdx.z) * BLOCK_W};
    extern __shared__ __align__(16) float window[];  // [PLANES][Win::rows][Win::pitch]
    if (vectors & 1) stage<Win, PLANES, THREADS, STRIDE, PAD, true>(window, x, o, planes, H, W);
    else stage<Win, PLANES, THREADS, STRIDE, PAD, false>(window, x, o, planes, H, W);

    // This thread: plane `plane` of the block, output columns ow0 + PIX·column…, row steps from
    // `first_step` on, `down` steps apart.
    const int plane = threadIdx.x / per_plane, column = threadIdx.x % per_plane % across,
              first_step = threadIdx.x % per_plane / across;
    const long long global_plane = o.plane0 + plane;
    const int channel = static_cast<int>(global_plane % C);
    kjit::copy_wait<0>();
    __syncthreads();
    if (global_plane >= planes) return;

    const float* mine = window + plane * Win::floats + PIX * STRIDE * column;
    for (int j = 0; j < multiplier; ++j) {
        const int oc = channel * multiplier + j;
        float filter[KH * KW];
#pragma unroll
        for (int i = 0; i < KH * KW; ++i) filter[i] = __ldg(w + 1LL * oc * KH * KW + i);
        const float scale = __ldg(bn_scale + oc), shift = __ldg(bn_shift + oc);
        for (int step = first_step; step < BLOCK_H / ROWS; step += down) {
            const int oh = o.oh0 + ROWS * step;
            if (oh >= OH) break;
            float acc[ROWS][PIX];
            convolve<Win, KH, KW, STRIDE>(acc, filter, mine + ROWS * STRIDE * step * Win::pitch);
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
                if (oh + r < OH)
                    store(y, global_plane * multiplier + j, y_row_stride, oh + r, OW, o.ow0 + PIX * column, acc[r],
                          scale, shift, (vectors & 2) != 0);
        }
    }
}
