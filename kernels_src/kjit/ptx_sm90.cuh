// Thin wrappers over the sm_90a instructions of the Hopper mainloop: tensor-memory-access (TMA)
// copies and the mbarriers they complete on, warpgroup MMA (TF32, A from registers, B through a
// shared-memory descriptor) with its fences and groups, register reallocation between
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
/// Stores `src` to the box at (c0, c1, c2); elements outside the tensor are not written.
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

/// d += A · B, one 64 × N × 8 TF32 wgmma (fp32 accumulate). Fragments, per the PTX ISA (warp w
/// of the warpgroup, g = lane/4, t = lane%4): a = {A[16w+g][t], A[16w+g+8][t], A[16w+g][t+4],
/// A[16w+g+8][t+4]}; d[v0 + 2·v1 + 4·j] = D[16w+g+8·v1][8·j+2·t+v0].
template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b);

/// d += a · B for a 64 × 32 × 8 tile: A (64 × 8) from registers, B (32 × 8, K-major) through a descriptor.
template <>
__device__ __forceinline__ void wgmma_tf32<32>(float (&d)[16], const unsigned (&a)[4], unsigned long long b)
{
    asm volatile(
        "{\n"
        ".reg .pred accumulate;\n"
        "setp.ne.b32 accumulate, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, accumulate, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

/// d += a · B for a 64 × 64 × 8 tile: A (64 × 8) from registers, B (64 × 8, K-major) through a descriptor.
template <>
__device__ __forceinline__ void wgmma_tf32<64>(float (&d)[32], const unsigned (&a)[4], unsigned long long b)
{
    asm volatile(
        "{\n"
        ".reg .pred accumulate;\n"
        "setp.ne.b32 accumulate, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, accumulate, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

/// d += a · B for a 64 × 128 × 8 tile: A (64 × 8) from registers, B (128 × 8, K-major) through a descriptor.
template <>
__device__ __forceinline__ void wgmma_tf32<128>(float (&d)[64], const unsigned (&a)[4], unsigned long long b)
{
    asm volatile(
        "{\n"
        ".reg .pred accumulate;\n"
        "setp.ne.b32 accumulate, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, accumulate, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

}  // namespace kjit
