// Fused depthwise Conv2d (groups = C_IN, C_OUT = m·C_IN: a channel multiplier m) + inference
// BatchNorm + SiLU in fp32, built for memory speed — and narrow groups of GROUP_IN input channels
// with the same plan, each output summing its group's planes. A depthwise output costs 2·KH·KW
// FLOP and 8 bytes of traffic, so the job is to read each input element once, keep its halo in
// shared memory, and write each output once.
//   block:  PLANES groups (image, group) × one BLOCK_H × BLOCK_W tile of their outputs; with
//           STAGED, the tile's input window of each of the groups' GROUP_IN planes staged once
//           (cp.async of 16 bytes where x's rows are whole 16-byte chunks, 8 or 4 otherwise),
//           zero-filled at the padding, then used by every output channel of the group; without
//           it (small images, where staging's copies, barrier and halo cost more than they save),
//           each thread reads its window rows from x itself, through L1, masked at the padding
//   thread: OC_STEP output channels × STEP_ROWS × PIX outputs at a time (PIX along W, STEP_ROWS
//           along H): each input row of their window read once (from shared memory in 16-byte
//           pieces, or from x) and used by every output row and channel it feeds; the filters in
//           registers.
//           Taller steps reuse each row more (a 7×7 filter's 4-row step reads 10 rows for 16
//           outputs, a 2-row step 8 for 8), more channels a step reuse it across filters
//   store:  BN + SiLU, 16- or 8-byte stores where y's rows allow
// KH, KW, STRIDE, PAD and GROUP_IN are compile-time constants: the window loops unroll fully and
// every register index is fixed.
#include "kjit/bn_silu.cuh"
#include "kjit/ceil_div.cuh"
#include "kjit/ptx.cuh"

namespace depthwise {

constexpr int PIX = 4;  // output pixels along W a thread computes at a time: one 16-byte store

/// The shared-memory window of one plane: the input rows BLOCK_H output rows read, each from the
/// 16-byte chunk holding its first column (`offset` floats before it: the window starts at
/// ow0·STRIDE − PAD, ow0 a multiple of 4), `pitch` floats apart; a thread's step is ROWS × PIX
/// outputs.
template <int KH, int KW, int STRIDE, int PAD, int BLOCK_H, int BLOCK_W, int ROWS>
struct Window {
    static constexpr int step_rows = ROWS;
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
/// where they leave the image or the planes run out. BYTES a copy: 16 where x's rows are whole
/// 16-byte chunks (W % 4 = 0, x aligned), 8 where whole 8-byte pairs, else 4 — so each copy is
/// wholly inside the image or wholly outside it. A thread keeps one column of the window (its
/// offset and bounds found once) and walks down the rows of every plane; a copy's source is an
/// offset from the block's first plane, 32-bit within a plane (the op refuses tensors of 2^31
/// elements or more).
template <class Win, int PLANES, int THREADS, int STRIDE, int PAD, int BYTES>
__device__ __forceinline__ void stage(float* window, const float* x, const Origin& o, long long planes, int H, int W)
{
    constexpr int width = BYTES / 4, columns = Win::pitch / width, rows = PLANES * Win::rows;
    constexpr int lanes = columns < THREADS ? columns : THREADS;  // threads along a window row
    constexpr int row_step = THREADS / lanes;                     // window rows copied at once
    const int first = threadIdx.x / lanes;
    if (first < row_step) {
        const int ih0 = o.oh0 * STRIDE - PAD;
        const long long plane_floats = 1LL * H * W;
        const int live_planes = planes - o.plane0 < PLANES ? static_cast<int>(planes - o.plane0) : PLANES;
        const float* block_x = x + o.plane0 * plane_floats;
        for (int column = threadIdx.x % lanes; column < columns; column += lanes) {
            const int iw = o.ow0 * STRIDE - PAD - Win::offset + width * column;
            const bool column_inside = iw >= 0 && iw < W;
            const unsigned dst = kjit::shared_address(window + first * Win::pitch + width * column);
            for (int r = first; r < rows; r += row_step) {
                const int plane = r / Win::rows, ih = ih0 + r - plane * Win::rows;
                const bool inside = column_inside && plane < live_planes &&
                                    static_cast<unsigned>(ih) < static_cast<unsigned>(H);
                const float* src = inside ? block_x + plane * plane_floats + (ih * W + iw) : x;
                kjit::copy_async<BYTES>(dst + 4 * (r - first) * Win::pitch, src, inside);
            }
        }
    }
    kjit::copy_commit();
}

/// A thread step's input rows from the staged window: `rows` is one plane's window at the step's
/// first input row and chunk; row ir's span is read in 16-byte pieces.
template <class Win>
struct SharedRows {
    const float* rows;

    __device__ __forceinline__ void read(int ir, float (&in)[Win::span_chunks * 4]) const
    {
#pragma unroll
        for (int c = 0; c < Win::span_chunks; ++c) {
            const float4 v = reinterpret_cast<const float4*>(rows + ir * Win::pitch)[c];
            in[4 * c] = v.x, in[4 * c + 1] = v.y, in[4 * c + 2] = v.z, in[4 * c + 3] = v.w;
        }
    }
};

/// A thread step's input rows straight from x: in[i] of row ir is the plane's element (ih0 + ir,
/// iw0 + i), zero outside the image, as the window would hold it (iw0 is the window chunk's first
/// column). Only the elements the filter reads are loaded: the indices are compile-time.
template <class Win>
struct GlobalRows {
    const float* plane;
    int ih0, iw0, H, W;

    __device__ __forceinline__ void read(int ir, float (&in)[Win::span_chunks * 4]) const
    {
        const int ih = ih0 + ir;
        const bool row_inside = static_cast<unsigned>(ih) < static_cast<unsigned>(H);
        // One address a row, the elements at fixed offsets from it (no per-element arithmetic);
        // 32-bit within the plane, as the op's tensors are under 2^31 elements. Before sm_90 the
        // row's offset is summed first: ptxas for sm_80/87 spills on 7×7 filters' 2-row steps
        // otherwise (the sm_90 form is the one timed on the H200).
#if __CUDA_ARCH__ >= 900
        const float* row = plane + ih * W + iw0;
#else
        const float* row = plane + (ih * W + iw0);
#endif
#pragma unroll
        for (int i = 0; i < Win::span_chunks * 4; ++i)
            in[i] = row_inside && static_cast<unsigned>(iw0 + i) < static_cast<unsigned>(W) ? __ldg(row + i) : 0.0f;
    }
};

/// acc[o][r][p] += Σ over filter o of w · x, for output rows r and columns p of one thread step
/// and each of OC filters, from the step's input rows (SharedRows or GlobalRows); each row read
/// once serves every filter.
template <class Win, int KH, int KW, int STRIDE, int OC, class Rows>
__device__ __forceinline__ void convolve(float (&acc)[OC][Win::step_rows][PIX], const float (&w)[OC][KH * KW],
                                         const Rows& rows)
{
#pragma unroll
    for (int ir = 0; ir < Win::row_span; ++ir) {
        float in[Win::span_chunks * 4];
        rows.read(ir, in);
        // Input row ir is filter row ir − r·STRIDE of output row r.
#pragma unroll
        for (int r = 0; r < Win::step_rows; ++r) {
            const int kh = ir - r * STRIDE;
            if (kh < 0 || kh >= KH) continue;
#pragma unroll
            for (int o = 0; o < OC; ++o)
#pragma unroll
                for (int kw = 0; kw < KW; ++kw)
#pragma unroll
                    for (int p = 0; p < PIX; ++p)
                        acc[o][r][p] = fmaf(w[o][kh * KW + kw], in[Win::offset + p * STRIDE + kw], acc[o][r][p]);
        }
    }
}

/// Filters oc…oc+OC−1 for input channel `ci` of their group (w [C_OUT][GROUP_IN][KH][KW]): every
/// element at a fixed offset from filter oc's, so each load is one instruction (a narrow group
/// reloads them for each of its input channels).
template <int KH, int KW, int GROUP_IN, int OC>
__device__ __forceinline__ void load_filters(float (&f)[OC][KH * KW], const float* w, int oc, int ci)
{
    const float* first = w + (1LL * oc * GROUP_IN + ci) * KH * KW;
#pragma unroll
    for (int o = 0; o < OC; ++o)
#pragma unroll
        for (int i = 0; i < KH * KW; ++i) f[o][i] = __ldg(first + o * GROUP_IN * KH * KW + i);
}

/// Output row `oh` of y's row `row` (an (image, output channel) pair), columns ow…ow+PIX−1:
/// BN + SiLU, stored Y_BYTES at a time where y's rows allow it (16: OW % 4 = 0; 8: OW even; the
/// pieces are then wholly inside the row or wholly past it).
__device__ __forceinline__ void store(float* y, long long row, int y_row_stride, int oh, int OW, int ow,
                                      const float (&acc)[PIX], float scale, float shift, int y_bytes)
{
    float* out = y + row * y_row_stride + 1LL * oh * OW + ow;
    float v[PIX];
#pragma unroll
    for (int p = 0; p < PIX; ++p) v[p] = kjit::bn_silu(acc[p], scale, shift);
    if (y_bytes == 16) {
        if (ow < OW) *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
    if (y_bytes == 8) {
#pragma unroll
        for (int p = 0; p < PIX; p += 2)
            if (ow + p < OW) *reinterpret_cast<float2*>(out + p) = make_float2(v[p], v[p + 1]);
        return;
    }
#pragma unroll
    for (int p = 0; p < PIX; ++p)
        if (ow + p < OW) out[p] = v[p];
}

}  // namespace depthwise

/// x [B, C, H, W] as `planes` = B·C planes, groups of GROUP_IN consecutive channels; w [C_OUT,
/// GROUP_IN, KH, KW]; y rows (b, g·group_out + j) = (b·C / GROUP_IN + g)·group_out + j of OH·OW
/// outputs, y_row_stride apart (group_out a multiple of OC_STEP). `vectors`: bits 0-1, log2 of
/// x's copy size in floats (4, 8 or 16 bytes); bits 2-3, of y's store size.
template <int KH, int KW, int STRIDE, int PAD, int BLOCK_H, int BLOCK_W, int PLANES, int THREADS, int STEP_ROWS,
          int GROUP_IN, int OC_STEP, bool STAGED>
__device__ __forceinline__ void conv2d_bn_silu_depthwise_forward(const float* x, const float* w, const float* bn_scale,
                                                                 const float* bn_shift, float* y, long long planes,
                                                                 int C, int H, int W, int OH, int OW, int group_out,
                                                                 int y_row_stride, int vectors)
{
    using namespace depthwise;
    using Win = Window<KH, KW, STRIDE, PAD, BLOCK_H, BLOCK_W, STEP_ROWS>;
    static_assert(BLOCK_W % PIX == 0 && BLOCK_H % STEP_ROWS == 0, "a block's tile is whole thread steps");
    // A group's threads: `across` columns × `down` row steps × `lanes` shares of its outputs.
    constexpr int per_group = THREADS / PLANES, across = BLOCK_W / PIX, steps = BLOCK_H / STEP_ROWS;
    constexpr int down = per_group / across < steps ? per_group / across : steps, lanes = per_group / (across * down);
    static_assert(THREADS % PLANES == 0 && down >= 1 && per_group % (across * down) == 0,
                  "the threads of a group cover its tile's columns, then its row steps, then its outputs");

    const Origin o{1LL * blockIdx.x * PLANES * GROUP_IN, static_cast<int>(blockIdx.y) * BLOCK_H,
                   static_cast<int>(blockIdx.z) * BLOCK_W};
    extern __shared__ __align__(16) float window[];  // [PLANES · GROUP_IN][Win::rows][Win::pitch]
    constexpr int staged = PLANES * GROUP_IN;
    if constexpr (STAGED) switch (vectors & 3) {
            case 2: stage<Win, staged, THREADS, STRIDE, PAD, 16>(window, x, o, planes, H, W); break;
            case 1: stage<Win, staged, THREADS, STRIDE, PAD, 8>(window, x, o, planes, H, W); break;
            default: stage<Win, staged, THREADS, STRIDE, PAD, 4>(window, x, o, planes, H, W);
        }
    const int y_bytes = 4 << (vectors >> 2 & 3);

    // This thread: group `unit` of the block, output columns ow0 + PIX·column…, row steps from
    // `first_step` on, `down` steps apart, the group's outputs from OC_STEP·lane on, `lanes`
    // steps apart.
    const int unit = threadIdx.x / per_group, in_group = threadIdx.x % per_group, column = in_group % across,
              first_step = in_group / across % down, lane = in_group / (across * down);
    const long long group = 1LL * blockIdx.x * PLANES + unit;  // (image, group of the image)
    const int oc0 = static_cast<int>(group % (C / GROUP_IN)) * group_out;
    if constexpr (STAGED) {
        kjit::copy_wait<0>();
        __syncthreads();
    }
    if (group >= planes / GROUP_IN) return;

    // Input channel ci's rows for row step `step`: from the window, or from x.
    const float* mine = window + unit * GROUP_IN * Win::floats + PIX * STRIDE * column;
    const auto rows = [&](int ci, int step) {
        if constexpr (STAGED) return SharedRows<Win>{mine + ci * Win::floats + STEP_ROWS * STRIDE * step * Win::pitch};
        else
            return GlobalRows<Win>{x + (group * GROUP_IN + ci) * H * W, (o.oh0 + STEP_ROWS * step) * STRIDE - PAD,
                                   (o.ow0 + PIX * column) * STRIDE - PAD - Win::offset, H, W};
    };
    for (int j = OC_STEP * lane; j < group_out; j += OC_STEP * lanes) {
        float filters[OC_STEP][KH * KW];
        if constexpr (GROUP_IN == 1) load_filters<KH, KW, GROUP_IN>(filters, w, oc0 + j, 0);  // once for every step
        for (int step = first_step; step < steps; step += down) {
            const int oh = o.oh0 + STEP_ROWS * step;
            if (oh >= OH) break;
            float acc[OC_STEP][STEP_ROWS][PIX] = {};
#pragma unroll 1
            for (int ci = 0; ci < GROUP_IN; ++ci) {
                if constexpr (GROUP_IN > 1) load_filters<KH, KW, GROUP_IN>(filters, w, oc0 + j, ci);
                convolve<Win, KH, KW, STRIDE>(acc, filters, rows(ci, step));
            }
#pragma unroll
            for (int c = 0; c < OC_STEP; ++c) {
                const float scale = __ldg(bn_scale + oc0 + j + c), shift = __ldg(bn_shift + oc0 + j + c);
#pragma unroll
                for (int r = 0; r < STEP_ROWS; ++r)
                    if (oh + r < OH)
                        store(y, group * group_out + j + c, y_row_stride, oh + r, OW, o.ow0 + PIX * column, acc[c][r],
                              scale, shift, y_bytes);
            }
        }
    }
}
