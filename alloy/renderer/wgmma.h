// Device helpers of the Hopper (sm_90a) matmul kernel that renderer/cuda_wgmma.py renders: shared-memory
// addresses, mbarriers, TMA tile loads and wgmma descriptors, each one PTX instruction (or a short loop of one).
// Prepended to the rendered kernel as it is; NVRTC compiles the two as one translation unit.
typedef unsigned int u32;
typedef unsigned long long u64;

// A CUtensorMap is 128 opaque bytes, 64-byte aligned; the kernel only passes its address to the copy engine.
struct __align__(64) alloy_tensor_map { u64 opaque[16]; };

__device__ __forceinline__ u32 alloy_smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void alloy_mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
// the producer announces the bytes the copy engine will deliver to this stage, and arrives
__device__ __forceinline__ void alloy_mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void alloy_mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// spin until the barrier's phase of the given parity has completed
__device__ __forceinline__ void alloy_mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

__device__ __forceinline__ void alloy_prefetch_tensor_map(const alloy_tensor_map* map) {
  asm volatile("prefetch.tensormap [%0];" :: "l"((u64)map) : "memory");
}
// one box of a 3-d tensor (inner coordinate first) into shared memory; the copy engine zero-fills what lies outside
// the tensor and completes the bytes on the stage's barrier
__device__ __forceinline__ void alloy_tma_load_3d(u32 dst, const alloy_tensor_map* map, int c0, int c1, int c2, u32 bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}

// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (all in 16-byte units),
// 128-byte swizzle (the layout the copy engine writes with CU_TENSOR_MAP_SWIZZLE_128B)
__device__ __forceinline__ u64 alloy_wgmma_desc(u32 addr, u32 leading_bytes, u32 stride_bytes) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(leading_bytes >> 4) << 16) | ((u64)(stride_bytes >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void alloy_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void alloy_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void alloy_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
