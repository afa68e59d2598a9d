// Where the attention tiles live: Q (BLOCK_M rows), K and V (BLOCK_N rows each, two buffers) in
// shared memory, every row HEAD_DIM 16-bit values padded by 16 bytes so that the 8 rows an
// ldmatrix reads fall in distinct banks; and their asynchronous loads from strided tensors.
#pragma once
#include "kjit/ptx.cuh"

namespace attention {

/// Element strides of a [B, H, S, D]-like tensor's batch, head and row (D is contiguous), so
/// [B, S, H, D] is the same tensor with other strides.
struct Strides {
    long long batch, head, row;
};

/// Q, K and V as the sm80 mainloop reads them: pointers and strides.
template <class T>
struct Pointers {
    const T *q, *k, *v;
    Strides qs, ks, vs;
};

template <int BLOCK_M, int BLOCK_N, int HEAD_DIM>
struct Tiles {
    static constexpr int WARPS = BLOCK_M / 16;  // a warp owns 16 query rows
    static constexpr int THREADS = WARPS * 32;
    static constexpr int STRIDE = HEAD_DIM + 8;  // elements between shared rows
    static constexpr int CHUNKS = HEAD_DIM / 8;  // 16-byte pieces of a row
    static constexpr int Q_BYTES = BLOCK_M * STRIDE * 2, KV_BYTES = BLOCK_N * STRIDE * 2;
    static_assert(BLOCK_M % 16 == 0 && BLOCK_N % 16 == 0 && HEAD_DIM % 16 == 0, "MMA shape multiples");

    /// The shared address of element (row, col) of the tile at `tile`.
    static __device__ __forceinline__ unsigned at(unsigned tile, int row, int col)
    {
        return tile + (row * STRIDE + col) * 2;
    }

    /// Rows row0 … row0 + ROWS − 1 of a tensor (`row_stride` elements apart, `rows` of them) into
    /// the tile at `tile`; rows past the end are zero-filled, never read.
    template <int ROWS, class T>
    static __device__ __forceinline__ void load(unsigned tile, const T* base, long long row_stride, int row0, int rows)
    {
        for (int c = threadIdx.x; c < ROWS * CHUNKS; c += THREADS) {
            const int r = c / CHUNKS, col = c % CHUNKS * 8;
            const bool valid = row0 + r < rows;
            kjit::copy_async<16>(at(tile, r, col), base + (valid ? (row0 + r) * row_stride + col : 0), valid);
        }
    }
};

}  // namespace attention
