// The tensor-core and async-copy primitives the mma.sync kernels share (moe/grouped_mma*.cu,
// attention/sparse_attention_mma.cu, indexer/indexer_mma.cu): one definition each, so every
// kernel issues the same instruction for the same operands.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace deepinfer::kernels::cuda {

// D[16, 8] += A[16, 16] · B[16, 8], BF16 operands, FP32 accumulators (mma.sync m16n8k16,
// row.col). Fragments: a0 (row g, k 2t..2t+1), a1 (g + 8, same k), a2 (g, k 2t + 8..), a3
// (g + 8, k 2t + 8..); b0 (k 2t..2t+1, column g), b1 (k 2t + 8.., g); d (g, 2t), (g, 2t + 1),
// (g + 8, 2t), (g + 8, 2t + 1), for lane 4g + t. Within a register the lower half is the lower k.
__device__ __forceinline__ void mma_bf16_16816(float* d, uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two floats as a BF16x2 register (lo in the lower half), rounded to nearest even: exact for
// BF16 numbers, which is what the callers promise.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// A shared-memory pointer as a shared-state-space address (32 bits: what ldmatrix and cp.async
// take; a kernel holding several row addresses across a loop keeps these, not 64-bit pointers).
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit values from shared memory: lane l gives the address of row l % 8
// of matrix l / 8 (16 contiguous bytes); r[m] receives matrix m's row g, elements 2t, 2t + 1
// (lane 4g + t), the mma's A / B fragment layout.
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem) {
  ldmatrix_x4(r, smem_addr(smem));
}
// The same, transposed: r[m] receives matrix m's elements (2t, g) and (2t + 1, g), i.e. two
// consecutive rows of one column (a B fragment whose k runs down the stored rows).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// cp.async: 16 bytes global -> shared, bypassing L1 (both 16-byte aligned); groups committed
// and waited on by count.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
// 4 bytes (both 4-byte aligned).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace deepinfer::kernels::cuda
