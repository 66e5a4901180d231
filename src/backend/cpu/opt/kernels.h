// Inner loops of the CPU opt backend: contiguous FP32 dots, AXPYs and weight-row decoding.
//
// Each is a plain loop with `#pragma omp simd` (compiled with -fopenmp-simd: the pragma only,
// no OpenMP runtime) so the reductions vectorise without -ffast-math. On x86-64 Linux with GCC
// they are built twice (baseline SSE2 and x86-64-v3 = AVX2+FMA) and picked at load time by the
// dynamic loader (target_clones / ifunc): the binary runs everywhere and uses FMA where present.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/weight_ref.h"

namespace deepinfer::backend::cpu::opt {

// parallel_for grain for items of `work` elementary operations each: at least ~16K operations
// per chunk, so an op too small to repay a hand-off (a tiny model's row ops, any decode step)
// runs on the calling thread (ThreadPool runs inline when one chunk covers the loop).
inline int64_t grain_for(int64_t work) {
  constexpr int64_t kMinChunkWork = int64_t{1} << 14;
  return std::max<int64_t>(1, kMinChunkWork / std::max<int64_t>(1, work));
}

#if defined(__x86_64__)
// The CPU has AVX2 and F16C. F16C is read from CPUID (leaf 1, ECX): clang 14's
// __builtin_cpu_supports, used by the fuzz build (docs/fuzzing.md), does not know "f16c".
bool cpu_has_avx2_f16c();
#endif

// Σ a[i]·b[i].
float dot(const float* a, const float* b, int64_t n);
// out[r] = Σ_k x[k]·w[r·ldw + k] for r < 4 (one x load feeds four rows).
void dot4(const float* x, const float* w, int64_t ldw, int64_t n, float* out);
// Same for two x rows: out0[r] = x0·w_r, out1[r] = x1·w_r (each weight load feeds two FMAs).
void dot4x2(const float* x0, const float* x1, const float* w, int64_t ldw, int64_t n, float* out0,
            float* out1);
// y[i] += a·x[i].
void axpy(float a, const float* x, float* y, int64_t n);
// y[i] += a0·x0[i] + a1·x1[i] (two rows per pass over y).
void axpy2(float a0, const float* x0, float a1, const float* x1, float* y, int64_t n);
// Σ x[i]².
float sumsq(const float* x, int64_t n);
// y[i] = x[i]·s.
void scale_to(const float* x, float s, float* y, int64_t n);

// y[i] = e^x[i] (x == y allowed): an AVX2 polynomial within ~2 ulp of libm where the CPU has
// AVX2 + FMA (opt_math.cc), else std::exp.
void exp_to(const float* x, float* y, int64_t n);
// out[i] = u / (1 + e^-u) · v with u = min(a[i], limit), v = clamp(b[i], ±limit) (no clamp when
// limit <= 0); out may alias a or b.
void swiglu_row(const float* a, const float* b, float limit, float* out, int64_t n);

// out[j] = Σ_h w[h]·max(dots[h·ld + j], 0) for j < n, heads summed in order from 0 with a
// multiply then an add (no FMA: the lightning indexer's scalar arithmetic, eight j at a time on
// AVX2); std::max's ReLU (-0 stays -0, NaN stays NaN).
void relu_weighted_sum(const float* dots, int64_t ld, int64_t n_heads, const float* w, int64_t n,
                       float* out);

// In-place FP8 E4M3 quantize->dequantize of one block (same bits as quant.h's
// fake_quant_block_fp8; tests/ops checks it against the ref backend exactly).
void fake_quant_fp8_block(float* x, int64_t n);

// Columns [0, w.k) of weight row `row`, dequantized to FP32 (scale applied).
void dequant_row(const WeightRef& w, int64_t row, float* out);
// Columns [k0, k0 + len) of weight row `row`; k0 a multiple of the format's block_k.
void dequant_range(const WeightRef& w, int64_t row, int64_t k0, int64_t len, float* out);

}  // namespace deepinfer::backend::cpu::opt
