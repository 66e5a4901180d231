// Sampling on the GPU (Ops::sample): the host Sampler's pipeline (src/sample/processors.cc),
// reproduced step for step so the token is the host's for the same logits row and uniform.
//
// One block per row; the row is worked on in global scratch (a 129k vocabulary does not fit
// shared memory). Each step is the host's arithmetic:
//   row max          the maximum of order-preserving integer keys (row_max);
//   greedy           the first id equal to the max (argmax_lowest_id);
//   temperature      x / t clamped to FLT_MAX;
//   min_p            x < max + log(min_p) in double -> -inf;
//   top_k            the k-th largest finite value by an MSB-first radix select over the keys,
//                    x < kth -> -inf;
//   weights          exp_nonpositive(x - max) with every operation rounded on its own (the
//                    host build contracts nothing into FMAs);
//   masses           blocks of 64 ids summed in double in id order, block sums added in block
//                    order (blocked_mass);
//   top_p            the canonical prefix (weight descending, id ascending) whose preceding
//                    mass is below top_p x total: candidates from the mass histogram's buckets,
//                    sorted in shared memory, then the host's sequential cut; a row with more
//                    than kMaxCandidates candidates is left to the host (kSampleToHost);
//   inverse CDF      the first block whose cumulative mass exceeds u x total, then the first id
//                    inside it (sample_inverse_cdf's dense walk).
// The sequential parts (the running mass total, the top-p cut, the walk inside the chosen
// block) run on one thread in the host's order; everything else is parallel and order-free
// (maxima, counts, selections, the search for the block the walk stops in).
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kMassBlock = 64;      // sample/processors.h
constexpr int kTopPBuckets = 2048;  // processors.cc: float bits >> 19 of a weight in [0, 1]
constexpr int kMaxCandidates = 2048;
constexpr float kFltMax = 3.402823466e+38f;

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

// The ordering key of processors.h's row_max (an involution on the bit pattern).
__device__ __forceinline__ int32_t order_key(int32_t b) { return b ^ ((b >> 31) & 0x7FFFFFFF); }

__device__ float exp_nonpositive_d(float x) {
  const float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float kRound = 12582912.0f;
  const float xc = x < -87.0f ? -87.0f : x;
  const float n = __fsub_rn(__fadd_rn(__fmul_rn(xc, kLog2e), kRound), kRound);
  float r = __fsub_rn(xc, __fmul_rn(n, kLn2Hi));
  r = __fsub_rn(r, __fmul_rn(n, kLn2Lo));
  const float z = __fmul_rn(r, r);
  float y = 1.9875691500e-4f;
  y = __fadd_rn(__fmul_rn(y, r), 1.3981999507e-3f);
  y = __fadd_rn(__fmul_rn(y, r), 8.3334519073e-3f);
  y = __fadd_rn(__fmul_rn(y, r), 4.1665795894e-2f);
  y = __fadd_rn(__fmul_rn(y, r), 1.6666665459e-1f);
  y = __fadd_rn(__fmul_rn(y, r), 5.0000001201e-1f);
  y = __fadd_rn(__fadd_rn(__fmul_rn(y, z), r), 1.0f);
  const float scale = __int_as_float((static_cast<int32_t>(n) + 127) * (1 << 23));
  return x < -87.0f ? 0.0f : __fmul_rn(y, scale);
}

struct Shared {
  int32_t ired[32];
  unsigned long long cand[kMaxCandidates];
  double hist[kTopPBuckets];
  int32_t counter, token;
  unsigned hist_radix[256];
  double total, threshold;
  int32_t first_bucket, prefix_digits, need;
};

// A block-wide reduction of int32 (max, min or sum), the result returned to every thread.
enum class Red { kMax, kMin, kSum };
__device__ int32_t block_reduce(int32_t v, Red op, int32_t* red) {
  auto comb = [op](int32_t a, int32_t b) {
    return op == Red::kMax ? max(a, b) : op == Red::kMin ? min(a, b) : a + b;
  };
  for (int o = 16; o > 0; o >>= 1) v = comb(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  const int nw = static_cast<int>(blockDim.x >> 5);
  int32_t t = red[0];
  for (int w = 1; w < nw; ++w) t = comb(t, red[w]);
  return t;
}

// The row's maximum (row_max): -inf when every entry is -inf.
__device__ float row_max_d(const float* x, int64_t V, int32_t* red) {
  int32_t best = order_key(__float_as_int(neg_inf()));
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    best = max(best, order_key(__float_as_int(x[i])));
  }
  return __int_as_float(order_key(block_reduce(best, Red::kMax, red)));
}

__device__ int32_t count_finite(const float* x, int64_t V, int32_t* red) {
  int32_t n = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) n += x[i] != neg_inf() ? 1 : 0;
  return block_reduce(n, Red::kSum, red);
}

// The masses of blocked_mass: block b's sum of w over its ids in id order (double, one thread
// per block), then the block sums added in block order. Leaves cum[b] = the running total after
// block b (the host's partial sums, bit for bit) and returns the total on every thread.
// The running sum is one thread's, as the host's order demands; it reads the block sums 32 at
// a time into registers first: one memory latency per 32 additions, not one per addition.
// (That was not what a single row costs: 0.28 ms at temperature alone before and after,
// bench/results/cuda_sample_perf_h200_2026-12-01_stop12.txt; the row's one block is.)
__device__ double blocked_mass_d(const float* w, int64_t V, double* cum, Shared& sh) {
  const int64_t nb = (V + kMassBlock - 1) / kMassBlock;
  __syncthreads();  // w was written by every thread
  for (int64_t b = threadIdx.x; b < nb; b += blockDim.x) {
    double s = 0.0;
    const int64_t end = V < (b + 1) * kMassBlock ? V : (b + 1) * kMassBlock;
    for (int64_t i = b * kMassBlock; i < end; ++i) s += static_cast<double>(w[i]);
    cum[b] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    constexpr int kAhead = 32;
    double t = 0.0;
    for (int64_t b0 = 0; b0 < nb; b0 += kAhead) {
      double v[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) v[u] = b0 + u < nb ? cum[b0 + u] : 0.0;
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        if (b0 + u < nb) {
          t += v[u];
          cum[b0 + u] = t;
        }
      }
    }
    sh.total = t;
  }
  __syncthreads();
  return sh.total;
}

// The k-th largest finite value (k <= number of finite entries), by radix select over the
// unsigned order keys, 8 bits at a time from the top.
__device__ float kth_largest(const float* x, int64_t V, int32_t k, Shared& sh) {
  uint32_t prefix = 0;
  int need = k;  // rank still to find among keys matching the prefix
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sh.hist_radix[i] = 0;
    __syncthreads();
    const uint32_t mask = shift == 24 ? 0u : (0xFFFFFFFFu << (shift + 8));
    // Counts aggregated per warp before the shared atomic: a row's values share a few top
    // digits (sign and exponent), so per-element atomics pile onto a few bins. (No measurable
    // change in the batch-1 step, which the row's one block bounds.) Every lane runs every
    // iteration (the match needs the whole warp).
    const int lane = static_cast<int>(threadIdx.x & 31);
    for (int64_t i0 = 0; i0 < V; i0 += blockDim.x) {
      const int64_t i = i0 + threadIdx.x;
      int bin = -1;
      if (i < V && x[i] != neg_inf()) {
        const uint32_t u = static_cast<uint32_t>(order_key(__float_as_int(x[i]))) ^ 0x80000000u;
        if ((u & mask) == (prefix & mask)) bin = static_cast<int>((u >> shift) & 0xFF);
      }
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin >= 0 && lane == __ffs(peers) - 1) {
        atomicAdd(&sh.hist_radix[bin], static_cast<unsigned>(__popc(peers)));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      for (; d > 0; --d) {
        if (static_cast<int>(sh.hist_radix[d]) >= need) break;
        need -= static_cast<int>(sh.hist_radix[d]);
      }
      sh.prefix_digits = d;
      sh.need = need;
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sh.prefix_digits) << shift;
    need = sh.need;
    __syncthreads();
  }
  return __int_as_float(order_key(static_cast<int32_t>(prefix ^ 0x80000000u)));
}

// Bitonic sort of sh.cand[0, n) ascending (padded to a power of two with the largest key).
__device__ void sort_candidates(int n, Shared& sh) {
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + threadIdx.x; i < size; i += blockDim.x) sh.cand[i] = ~0ull;
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const int l = i ^ j;
        if (l > i) {
          const unsigned long long a = sh.cand[i], b = sh.cand[l];
          const bool up = (i & k) == 0;
          if ((a > b) == up) {
            sh.cand[i] = b;
            sh.cand[l] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

// top_p (apply_top_p). Returns false when the candidates do not fit shared memory.
__device__ bool top_p_d(float* x, float* w, int64_t V, float top_p, double* bs, Shared& sh) {
  const float m = row_max_d(x, V, sh.ired);
  if (m == neg_inf()) return true;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) w[i] = exp_nonpositive_d(x[i] - m);
  for (int i = threadIdx.x; i < kTopPBuckets; i += blockDim.x) sh.hist[i] = 0.0;
  const double total = blocked_mass_d(w, V, bs, sh);  // synchronises
  const int32_t nf = count_finite(x, V, sh.ired);
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    if (w[i] > 0.0f) atomicAdd(&sh.hist[__float_as_int(w[i]) >> 19], static_cast<double>(w[i]));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sh.threshold = static_cast<double>(top_p) * total;
    int fb = 0;
    double acc = 0.0;
    for (int b = kTopPBuckets - 1; b >= 0; --b) {
      acc += sh.hist[b];
      if (acc >= sh.threshold) {
        fb = b;
        break;
      }
    }
    sh.first_bucket = fb;
  }
  __syncthreads();
  // The histogram only picks candidates; the cut is exact. Retried over every finite token when
  // rounding made the bucket estimate fall short (as the host does).
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fb = attempt == 0 ? sh.first_bucket : 0;
    const float min_w = __int_as_float(fb << 19);
    if (threadIdx.x == 0) sh.counter = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      if (w[i] >= min_w && (fb > 0 || x[i] != neg_inf())) {
        const int slot = atomicAdd(&sh.counter, 1);
        if (slot < kMaxCandidates) {
          sh.cand[slot] = (static_cast<unsigned long long>(~static_cast<uint32_t>(
                               __float_as_int(w[i])))
                           << 32) |
                          static_cast<uint32_t>(i);
        }
      }
    }
    __syncthreads();
    const int n = sh.counter;
    if (n > kMaxCandidates) return false;
    sort_candidates(n, sh);
    if (threadIdx.x == 0) {
      double before = 0.0;
      int kept = 0;
      bool reached = false;
      for (int c = 0; c < n; ++c) {
        if (!(before < sh.threshold)) {
          reached = true;
          break;
        }
        ++kept;
        before += static_cast<double>(w[static_cast<uint32_t>(sh.cand[c])]);
      }
      if (!reached) reached = !(before < sh.threshold);
      sh.need = !reached && n < nf ? -1 : (kept == 0 ? 1 : kept);
    }
    __syncthreads();
    if (sh.need < 0) continue;  // attempt 2: every finite token
    const int32_t last = static_cast<int32_t>(static_cast<uint32_t>(sh.cand[sh.need - 1]));
    const float last_w = w[last];
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const bool keep = w[i] > last_w || (w[i] == last_w && i <= last);
      if (!keep) x[i] = neg_inf();
    }
    __syncthreads();
    return true;
  }
  return true;  // unreachable: attempt 2 takes every finite token, so the cut is reached
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(MatDesc logits, const SampleSpecDev* specs, float* xs, float* ws, double* bss,
                  int32_t* tokens) {
  grid_dependency_sync();
  __shared__ Shared sh;
  const int64_t r = blockIdx.x, V = logits.cols, nb = (V + kMassBlock - 1) / kMassBlock;
  float* x = xs + r * V;
  float* w = ws + r * V;
  double* bs = bss + r * nb;
  const SampleSpecDev s = specs[r];
  int32_t bad = 0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float v = logits.data[r * logits.ld + i];
    bad |= !(v < __int_as_float(0x7f800000)) ? 1 : 0;  // NaN or +inf
    x[i] = v;
  }
  if (block_reduce(bad, Red::kMax, sh.ired) != 0) {
    if (threadIdx.x == 0) tokens[r] = kSampleNonFiniteDev;
    return;
  }
  if (!s.greedy) {
    if (s.temperature != 1.0f) {
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const float q = __fdiv_rn(x[i], s.temperature);
        x[i] = q > kFltMax ? kFltMax : q;
      }
      __syncthreads();
    }
    if (s.min_p > 0.0f) {
      const float m = row_max_d(x, V, sh.ired);
      if (m != neg_inf()) {
        const double cut = static_cast<double>(m) + s.log_min_p;
        for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
          if (static_cast<double>(x[i]) < cut) x[i] = neg_inf();
        }
      }
      __syncthreads();
    }
    if (s.top_k > 0 && count_finite(x, V, sh.ired) > s.top_k) {
      const float kth = kth_largest(x, V, s.top_k, sh);
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        if (x[i] < kth) x[i] = neg_inf();
      }
      __syncthreads();
    }
    if (s.top_p < 1.0f && !top_p_d(x, w, V, s.top_p, bs, sh)) {
      if (threadIdx.x == 0) tokens[r] = kSampleToHostDev;
      return;
    }
  }
  const float m = row_max_d(x, V, sh.ired);
  if (m == neg_inf()) {
    if (threadIdx.x == 0) tokens[r] = kSampleNoTokenDev;
    return;
  }
  if (s.greedy) {  // the first id equal (as a float) to the max
    int32_t first = INT32_MAX;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      if (x[i] == m) first = min(first, static_cast<int32_t>(i));
    }
    first = block_reduce(first, Red::kMin, sh.ired);
    if (threadIdx.x == 0) tokens[r] = first;
    return;
  }
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) w[i] = exp_nonpositive_d(x[i] - m);
  __syncthreads();
  const double total = blocked_mass_d(w, V, bs, sh);  // bs: the running totals
  const double target = s.u * total;
  // The host walks the blocks in order and stops at the first whose running total passes the
  // target (sample_inverse_cdf); the running totals are bs, so that block is the smallest b with
  // bs[b] > target: a parallel search. Inside it the host's walk always ends at a positive id:
  // its partial sums reach the block's sum exactly, so before + partial reaches bs[b].
  int32_t first = INT32_MAX;
  for (int64_t b = threadIdx.x; b < nb; b += blockDim.x) {
    if (bs[b] > target) first = min(first, static_cast<int32_t>(b));
  }
  first = block_reduce(first, Red::kMin, sh.ired);
  if (threadIdx.x != 0) return;
  if (first != INT32_MAX) {
    const int64_t b = first;
    const double before = b > 0 ? bs[b - 1] : 0.0;
    const int64_t end = V < (b + 1) * kMassBlock ? V : (b + 1) * kMassBlock;
    double partial = 0.0;
    for (int64_t i = b * kMassBlock; i < end; ++i) {
      partial += static_cast<double>(w[i]);
      if (w[i] > 0.0f && before + partial > target) {
        tokens[r] = static_cast<int32_t>(i);
        return;
      }
    }
  }
  for (int64_t i = V - 1; i >= 0; --i) {  // u x total rounded up to total: the last positive
    if (w[i] > 0.0f) {
      tokens[r] = static_cast<int32_t>(i);
      return;
    }
  }
  tokens[r] = kSampleNoTokenDev;
}

}  // namespace

// Scratch layout: block sums [rows, nb] doubles first (aligned), then the working rows and
// the weights [rows, V] floats each.
int64_t sample_scratch_bytes(int64_t rows, int64_t vocab) {
  const int64_t nb = (vocab + kMassBlock - 1) / kMassBlock;
  return rows * (nb * static_cast<int64_t>(sizeof(double)) +
                 2 * vocab * static_cast<int64_t>(sizeof(float)));
}

void launch_sample(MatDesc logits, const SampleSpecDev* specs, void* scratch, int32_t* tokens,
                   cudaStream_t stream) {
  if (logits.rows == 0) return;
  const int64_t V = logits.cols, nb = (V + kMassBlock - 1) / kMassBlock;
  double* bs = static_cast<double*>(scratch);
  float* xs = reinterpret_cast<float*>(bs + logits.rows * nb);
  float* ws = xs + logits.rows * V;
  launch_kernel(sample_kernel, static_cast<unsigned>(logits.rows), kThreads, 0, stream, logits,
                specs, xs, ws, bs, tokens);
}

}  // namespace deepinfer::kernels::cuda
