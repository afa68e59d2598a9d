// y = x in y's element type (f32, f16 or bf16; rounded to nearest even, through f32, which holds
// both 16-bit types exactly) over B images of IMAGE elements; each tensor's images lie its own
// stride apart. One element per thread per step of a grid-stride loop, 64-bit indices.
#include "kjit/convert.cuh"
#include "kjit/grid.cuh"

template <int BLOCK, class SRC, class DST>
__device__ __forceinline__ void cast(const SRC* x, DST* y, long long n, long long image, long long x_stride,
                                     long long y_stride)
{
    for (long long i = kjit::block_index() * BLOCK + threadIdx.x; i < n; i += kjit::grid_blocks() * BLOCK) {
        const long long img = i / image, e = i - img * image;
        y[img * y_stride + e] = kjit::from_float<DST>(kjit::to_float(x[img * x_stride + e]));
    }
}
