// Thin wrappers over the sm_90a instructions of the Hopper mainloop: tensor-memory-access (TMA)
// copies (tiled and im2col) and the mbarriers they complete on, warpgroup MMA (TF32, A from
// registers or a shared-memory descriptor, B through one) with its fences and groups, register reallocation between
// warpgroups, named barriers, and the proxy fence between ordinary shared-memory accesses and
// the async proxy (TMA, wgmma). Only compiled for an sm_90a target (__CUDA_ARCH_FEAT_SM90_ALL).
#pragma once
#include "kjit/ptx.cuh"
#include "kjit/tensor_map.cuh"

namespace kjit {

// ---- mbarriers: a transaction count the TMA unit completes, and phases threads wait on ----

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
/// Makes barrier initialisation visible to the async proxy (before the first TMA completes on it).
__device__ __forceinline__ void fence_barrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// One arrival that also expects `bytes` of TMA transactions in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/// Spins on `bar` until the phase of parity `parity` has completed; SEM: the try_wait's
/// semantics and scope ("" for the default, acquire at CTA scope).
#define KJIT_MBARRIER_WAIT(SEM, bar, parity) \
    asm volatile(                            \
        "{\n"                                \
        ".reg .pred done;\n"                 \
        "wait:\n"                            \
        "mbarrier.try_wait.parity" SEM       \
        ".shared::cta.b64 done, [%0], %1;\n" \
        "@!done bra wait;\n"                 \
        "}\n" ::"r"(bar),                    \
        "r"(parity)                          \
        : "memory")

/// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) { KJIT_MBARRIER_WAIT("", bar, parity); }
/// Waits, as `mbarrier_wait`, for a phase that other blocks of the cluster complete: their
/// writes before their arrivals are visible after it (acquire at cluster scope).
__device__ __forceinline__ void mbarrier_wait_cluster(unsigned bar, unsigned parity)
{
    KJIT_MBARRIER_WAIT(".acquire.cluster", bar, parity);
}
#undef KJIT_MBARRIER_WAIT

/// One arrival on the barrier at `bar` (a shared address, the same in every block) of block
/// `rank` of the cluster, releasing this thread's shared-memory accesses before it to that block.
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned bar, unsigned rank)
{
    asm volatile(
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_block_address(bar, rank))
        : "memory");
}

/// One arrival on `bar`, made once every cp.async this thread issued before it has landed (the
/// barrier's expected arrivals count it: .noinc).
__device__ __forceinline__ void copy_async_arrive(unsigned bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// ---- TMA: tiles between global memory (through a tensor map) and shared memory ----

/// Loads the box at coordinates (c0, c1) — innermost first — into `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap& map, int c0, int c1, unsigned bar)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
            "r"(dst),
        "l"(&map), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap& map, int c0, int c1, int c2, unsigned bar)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];\n" ::"r"(dst),
        "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap& map, int c0, int c1, int c2, int c3,
                                         unsigned bar)
{
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n" ::"r"(dst),
        "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
}
/// Loads, through an im2col map over an NHWC tensor, the map's pixels-per-column positions from
/// (w, h, n) on — along W, then H, then the batch, inside the map's bounding box — each shifted
/// by the filter tap (dw, dh), channels c… of each; zero where a read leaves the tensor.
__device__ __forceinline__ void tma_load_im2col(unsigned dst, const TensorMap& map, int c, int w, int h, int n,
                                                unsigned short dw, unsigned short dh, unsigned bar)
{
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5}], [%6], {%7, %8};\n" ::"r"(dst),
        "l"(&map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(dw), "h"(dh)
        : "memory");
}
/// Stores `src` to the box at (c0, c1) — or (c0, c1, c2), (c0, …, c3) below — innermost first;
/// elements outside the tensor are not written.
__device__ __forceinline__ void tma_store(const TensorMap& map, unsigned src, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(&map), "r"(src),
                 "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap& map, unsigned src, int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(&map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap& map, unsigned src, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(&map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/// Waits until the committed stores have read their shared memory (it may be rewritten).
__device__ __forceinline__ void tma_store_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
/// Waits until the committed stores are done.
__device__ __forceinline__ void tma_store_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void prefetch_tensor_map(const TensorMap& map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(&map) : "memory");
}

/// Waits until the grid launched before this one has finished and its writes are visible (a
/// no-op unless launched as a programmatic dependent). For kernels that `waits_in_body`.
__device__ __forceinline__ void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

// ---- warpgroups: registers moved between roles, barriers over a subset of warps ----

/// Raises (INC) or lowers this warpgroup's registers per thread to REGISTERS.
template <int REGISTERS>
__device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}
template <int REGISTERS>
__device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}
/// Barrier `id` (1…15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void named_barrier_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Arrives on barrier `id` without waiting (the barrier completes when `threads` threads have
/// synced or arrived).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- wgmma ----

/// A wgmma shared-memory descriptor, no swizzle: start address, the byte distance between core
/// matrices adjacent in K (leading) and in N (stride), each stored >> 4 (PTX ISA, "Matrix
/// Descriptor Format").
__device__ __forceinline__ unsigned long long wgmma_descriptor(unsigned shared_address, unsigned leading_bytes,
                                                               unsigned stride_bytes)
{
    return (unsigned long long)((shared_address >> 4) & 0x3fff) |
           (unsigned long long)((leading_bytes >> 4) & 0x3fff) << 16 |
           (unsigned long long)((stride_bytes >> 4) & 0x3fff) << 32;
}
/// The descriptor of a K-major operand in 128-byte-swizzled rows (what TMA's SWIZZLE_128B
/// writes): 8-row atoms 1024 bytes apart, swizzle mode 1 in bits 62–63; the leading offset is
/// unused for this layout.
__device__ __forceinline__ unsigned long long wgmma_descriptor_swizzle128(unsigned shared_address)
{
    return wgmma_descriptor(shared_address, 16, 1024) | 1ull << 62;
}

/// Orders this warpgroup's register writes (A fragments, accumulators) before the wgmma that reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
/// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most PENDING committed wgmma groups are in flight.
template <int PENDING>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
/// Makes this thread's ordinary shared-memory writes (cp.async included) visible to the async
/// proxy (wgmma, TMA) once a barrier follows.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The accumulator operands of one 64 × N wgmma, N/2 floats a thread: their constraints, and
// their names in the instruction.
#define KJIT_D16(o)                                                                                                 \
    "+f"(d[o + 0]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), \
        "+f"(d[o + 7]), "+f"(d[o + 8]), "+f"(d[o + 9]), "+f"(d[o + 10]), "+f"(d[o + 11]), "+f"(d[o + 12]),          \
        "+f"(d[o + 13]), "+f"(d[o + 14]), "+f"(d[o + 15])
#define KJIT_D_OPERANDS_16 KJIT_D16(0)
#define KJIT_D_OPERANDS_32 KJIT_D16(0), KJIT_D16(16)
#define KJIT_D_OPERANDS_64 KJIT_D16(0), KJIT_D16(16), KJIT_D16(32), KJIT_D16(48)
#define KJIT_D_NAMES_16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define KJIT_D_NAMES_32                                                                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31"
#define KJIT_D_NAMES_64                                                                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
    "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

/// d += A · B, one 64 × N × 8 TF32 wgmma (fp32 accumulate), B (N × 8, K-major) through a
/// shared-memory descriptor, A from registers (`a`) or through a descriptor as well
/// (`wgmma_tf32_ss`). Register fragments, per the PTX ISA (warp w of the warpgroup, g = lane/4,
/// t = lane%4): a = {A[16w+g][t], A[16w+g+8][t], A[16w+g][t+4], A[16w+g+8][t+4]};
/// d[v0 + 2·v1 + 4·j] = D[16w+g+8·v1][8·j+2·t+v0], in either form.
template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b);
template <int N>
__device__ __forceinline__ void wgmma_tf32_ss(float (&d)[N / 2], unsigned long long a, unsigned long long b);

// One N's two forms; the operand numbers follow the N/2 accumulators. The accumulate predicate
// is always set: the consumers zero d once per tile.
#define KJIT_WGMMA_TF32(N, HALF, RS_FLAG, RS_A, RS_B, SS_FLAG, SS_A, SS_B)                                        \
    template <>                                                                                                   \
    __device__ __forceinline__ void wgmma_tf32<N>(float(&d)[HALF], const unsigned(&a)[4], unsigned long long b)   \
    {                                                                                                             \
        asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, " RS_FLAG                                \
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" KJIT_D_NAMES_##HALF        \
                     "}, " RS_A ", " RS_B ", accumulate, 1, 1;\n}\n"                                              \
                     : KJIT_D_OPERANDS_##HALF                                                                     \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));                               \
    }                                                                                                             \
    template <>                                                                                                   \
    __device__ __forceinline__ void wgmma_tf32_ss<N>(float(&d)[HALF], unsigned long long a, unsigned long long b) \
    {                                                                                                             \
        asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, " SS_FLAG                                \
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" KJIT_D_NAMES_##HALF        \
                     "}, " SS_A ", " SS_B ", accumulate, 1, 1;\n}\n"                                              \
                     : KJIT_D_OPERANDS_##HALF                                                                     \
                     : "l"(a), "l"(b), "r"(1));                                                                   \
    }

KJIT_WGMMA_TF32(32, 16, "%21", "{%16, %17, %18, %19}", "%20", "%18", "%16", "%17")
KJIT_WGMMA_TF32(64, 32, "%37", "{%32, %33, %34, %35}", "%36", "%34", "%32", "%33")
KJIT_WGMMA_TF32(128, 64, "%69", "{%64, %65, %66, %67}", "%68", "%66", "%64", "%65")
#undef KJIT_WGMMA_TF32
#undef KJIT_D16
#undef KJIT_D_OPERANDS_16
#undef KJIT_D_OPERANDS_32
#undef KJIT_D_OPERANDS_64
#undef KJIT_D_NAMES_16
#undef KJIT_D_NAMES_32
#undef KJIT_D_NAMES_64

}  // namespace kjit
