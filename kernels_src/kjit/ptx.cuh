// Thin wrappers over the PTX instructions the matrix kernels use: asynchronous copies into
// shared memory (sm_80+, synchronous elsewhere) and the TF32 tensor-core MMA.
#pragma once

namespace kjit {

/// The shared-memory address of a generic pointer, as cp.async wants it.
__device__ __forceinline__ unsigned shared_address(const void* p)
{
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return static_cast<unsigned>(a);
}

__device__ __forceinline__ float load_shared(unsigned address)
{
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(address) : "memory");
    return v;
}
__device__ __forceinline__ void store_shared(unsigned address, float v)
{
    asm volatile("st.shared.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
}

__device__ __forceinline__ int2 load2_shared(unsigned address)
{
    int2 v;
    asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(address) : "memory");
    return v;
}
__device__ __forceinline__ void store2_shared(unsigned address, int2 v)
{
    asm volatile("st.shared.v2.s32 [%0], {%1, %2};" ::"r"(address), "r"(v.x), "r"(v.y) : "memory");
}

__device__ __forceinline__ void store4_shared(unsigned address, float4 v)
{
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(address), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
}

/// BYTES (4, 8 or 16) global → shared at shared address `dst`; zero-filled when !valid (src is
/// then not read).
template <int BYTES>
__device__ __forceinline__ void copy_async(unsigned dst, const void* src, bool valid)
{
#if __CUDA_ARCH__ >= 800
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(BYTES),
                     "r"(valid ? BYTES : 0));
#else
    float v[BYTES / 4];
    for (int i = 0; i < BYTES / 4; ++i) v[i] = valid ? static_cast<const float*>(src)[i] : 0.0f;
    for (int i = 0; i < BYTES / 4; ++i) asm volatile("st.shared.f32 [%0], %1;" ::"r"(dst + 4 * i), "f"(v[i]));
#endif
}

/// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void copy_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most PENDING committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void copy_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
#endif
}

/// fp32 → tf32, rounded to nearest (what the tensor cores read).
__device__ __forceinline__ unsigned to_tf32(float x)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

/// d += a·b for one 16×8×8 TF32 tile (fp32 accumulate). Fragment ownership, per the PTX ISA:
/// with g = lane/4 and q = lane%4, a = {A[g][q], A[g+8][q], A[g][q+4], A[g+8][q+4]},
/// b = {B[q][g], B[q+4][g]}, d = {D[g][2q], D[g][2q+1], D[g+8][2q], D[g+8][2q+1]}.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- thread-block clusters (sm_90+): a cluster of one block everywhere else ----

// The runtime's own reads of the cluster registers. (They alone did not keep split-K's wgmma
// descriptors on the uniform datapath: gemm_sm90.cuh's consume_tiles says what did.)
__device__ __forceinline__ unsigned cluster_size()
{
#if __CUDA_ARCH__ >= 900
    return __clusterSizeInBlocks();
#else
    return 1;
#endif
}

__device__ __forceinline__ unsigned cluster_rank()
{
#if __CUDA_ARCH__ >= 900
    return __clusterRelativeBlockRank();
#else
    return 0;
#endif
}

/// Barrier over every thread of the cluster; orders shared-memory writes before it against
/// reads after it, across the cluster's blocks.
__device__ __forceinline__ void cluster_sync()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

/// Where `address` (a shared address of this block) is in block `rank`'s shared memory, as a
/// shared::cluster address.
__device__ __forceinline__ unsigned cluster_block_address(unsigned address, unsigned rank)
{
#if __CUDA_ARCH__ >= 900
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
    return remote;
#else
    return address;
#endif
}

/// Reads the float at `address` (a shared address of this block) in block `rank`'s shared memory.
__device__ __forceinline__ float load_from_cluster_block(unsigned address, unsigned rank)
{
#if __CUDA_ARCH__ >= 900
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_block_address(address, rank)) : "memory");
    return v;
#else
    return 0.0f;
#endif
}

/// Reads the 4 floats at `address` (16-byte aligned, a shared address of this block) in block
/// `rank`'s shared memory.
__device__ __forceinline__ float4 load4_from_cluster_block(unsigned address, unsigned rank)
{
#if __CUDA_ARCH__ >= 900
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(cluster_block_address(address, rank))
                 : "memory");
    return v;
#else
    return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#endif
}

}  // namespace kjit
