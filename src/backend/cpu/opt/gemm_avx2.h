// The AVX2 + FMA GEMM of the CPU opt backend (opt_gemm_avx2.cc), used by OptOps::gemm on x86-64
// CPUs that have AVX2, FMA and F16C but not AVX-512F (e.g. AMD Zen 2/3). Internal to opt/.
#pragma once

#include <cstdint>

#include "backend/mat.h"
#include "backend/weight_ref.h"

namespace deepinfer::backend::cpu::opt {

// Weight rows per gemm task on this path (a multiple of both block widths, 3 and 4).
inline constexpr int64_t kAvx2TileN = 48;

// True when the CPU has AVX2, FMA and F16C (checked once).
bool have_avx2_fma();

// y[:, n0:n1) = x · W[n0:n1)ᵀ for any weight format; n0 a multiple of kAvx2TileN. Every
// (row, weight row) value is computed the same way whatever M, n0, n1 (batch invariance).
void gemm_avx2(CMat x, const WeightRef& w, Mat y, int64_t n0, int64_t n1);

// y = x · wᵀ for FP32 matrices (any ld), on the calling thread: the same kernel and per-pair
// summation order as gemm_avx2 over FP32 weights, for the attention-side products (indexer
// scores, mHC mixes) whose "weights" are activations.
void gemm_f32_avx2(CMat x, CMat w, Mat y);

}  // namespace deepinfer::backend::cpu::opt
