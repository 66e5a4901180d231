// Sampling on the GPU (Ops::sample): the host Sampler's pipeline (src/sample/processors.cc),
// reproduced step for step so the token is the host's for the same logits row and uniform.
//
// A cluster of blocks per row (1-8, launch_sample's rule: 8 for the few rows of a decode step,
// one block per row when the rows fill the card): each block owns a run of whole 64-id mass
// blocks, and the row is worked on in global scratch (a 129k vocabulary does not fit shared
// memory). One block for a row bounded the batch-1 step: 0.09 / 0.28 / 0.50 ms for greedy,
// temperature, top-k 50 (bench/results/cuda_sample_perf_h200_2026-12-01_stop12.txt). Every
// cross-block step is order-free (integer maxima, minima and counts over the cluster through
// distributed shared memory) or runs on rank 0 alone in the host's order, so the token does not
// depend on the cluster's size. Each step is the host's arithmetic:
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
//                    mass is below top_p x total, masses in the host's fixed point (exact
//                    integers: processors.h top_p_mass / top_p_threshold): candidates from the
//                    mass histogram's buckets sorted in shared memory and cut in order; a row
//                    with more than kMaxCandidates of them (a flat row) finds its cut by a
//                    radix select over the 64-bit canonical keys weighted by mass instead;
//   inverse CDF      the first block whose cumulative mass exceeds u x total, then the first id
//                    inside it (sample_inverse_cdf's dense walk).
// The sequential parts (the running mass total, the walk inside the chosen block) run on one
// thread of rank 0 in the host's order; everything else is parallel and order-free (maxima,
// counts, integer masses, selections, the search for the block the walk stops in).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/sample/sample_slice.cuh"
#include "kernels/cuda/sample/top_p_mass.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kMassBlock = kSampleMassBlock;  // sample/processors.h
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
  int32_t cred[2];   // this block's share of a cluster reduction (alternating: see reduce)
  int32_t cred_out;  // the cluster's result, for every thread of the block
  union {
    unsigned long long cand[kMaxCandidates];  // rank 0: the cluster's top-p candidates
    double cum[kMaxCandidates];  // rank 0: the row's running mass totals (blocks <= 2048)
  };
  union {
    double hist[kTopPBuckets];  // this block's top-p mass histogram (rank 0: then the cluster's)
    struct {  // top-p's radix select by mass (a flat row), once the histogram is done
      unsigned long long part[2][256];  // this block's digit masses, alternating passes
      unsigned long long sum[256];      // the cluster's digit masses of the pass
    } radix_mass;
  };
  unsigned long long ured[32];                  // block_sum_u64's per-warp sums
  unsigned long long mass_part, threshold_fx;  // this block's fixed-point mass; the cut's
  unsigned long long radix_below;              // top_p_radix: mass of the keys under the prefix
  unsigned hist_radix[2][256];  // this block's digit counts, alternating passes
  unsigned radix_sum[256];      // the cluster's digit counts of the pass
  int32_t counter, nf, nf_all;
  double total, threshold;
  int32_t first_bucket, prefix_digits, need, last;
  float last_w;
};

namespace cg = cooperative_groups;

// One block's view of its row: the cluster, this block's rank and its ids [lo, hi) (whole mass
// blocks [b_lo, b_hi)), and the alternating slot of the next cluster reduction.
struct Part {
  cg::cluster_group cl;
  unsigned rank, size;
  int64_t V, nb, lo, hi, b_lo, b_hi;
  Shared& sh;
  int slot;
};

// Rank q's copy of a shared variable (distributed shared memory; q == rank: this block's own).
template <typename T>
__device__ __forceinline__ T* at_rank(Part& p, T* addr, unsigned q) {
  return p.cl.map_shared_rank(addr, q);
}

// A block-wide reduction of int32 (max, min or sum), the result returned to every thread.
enum class Red { kMax, kMin, kSum };
__device__ __forceinline__ int32_t combine(Red op, int32_t a, int32_t b) {
  return op == Red::kMax ? max(a, b) : op == Red::kMin ? min(a, b) : a + b;
}
__device__ __forceinline__ int32_t identity(Red op) {
  return op == Red::kMax ? INT32_MIN : op == Red::kMin ? INT32_MAX : 0;
}
__device__ int32_t block_reduce(int32_t v, Red op, int32_t* red) {
  for (int o = 16; o > 0; o >>= 1) v = combine(op, v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  const int nw = static_cast<int>(blockDim.x >> 5);
  int32_t t = red[0];
  for (int w = 1; w < nw; ++w) t = combine(op, t, red[w]);
  return t;
}

// The same over the row's cluster, the same value on every thread of every block. Each block
// posts its share in a slot that alternates between calls: a block writes slot s again only
// after the next reduction's cluster barrier, which every block reaches after reading s.
__device__ int32_t reduce(int32_t v, Red op, Part& p) {
  v = block_reduce(v, op, p.sh.ired);
  const int s = p.slot;
  p.slot ^= 1;
  if (threadIdx.x == 0) p.sh.cred[s] = v;
  p.cl.sync();
  if (threadIdx.x < 32) {
    int32_t t = threadIdx.x < p.size ? *at_rank(p, &p.sh.cred[s], threadIdx.x) : identity(op);
    for (int o = 16; o > 0; o >>= 1) t = combine(op, t, __shfl_xor_sync(0xffffffffu, t, o));
    if (threadIdx.x == 0) p.sh.cred_out = t;
  }
  __syncthreads();
  return p.sh.cred_out;
}

// Makes this block's global writes (working row, weights, mass sums) visible to the cluster's
// other blocks and waits for all of them; their reads of those values use __ldcg (L2), so no
// stale line of this SM's L1 is read.
__device__ __forceinline__ void cluster_publish(Part& p) {
  __threadfence();
  p.cl.sync();
}

// The row's maximum (row_max): -inf when every entry is -inf.
__device__ float row_max_d(const float* x, Part& p) {
  int32_t best = order_key(__float_as_int(neg_inf()));
  for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
    best = max(best, order_key(__float_as_int(x[i])));
  }
  return __int_as_float(order_key(reduce(best, Red::kMax, p)));
}

__device__ int32_t count_finite_local(const float* x, const Part& p) {
  int32_t n = 0;
  for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) n += x[i] != neg_inf() ? 1 : 0;
  return n;
}

// blocked_mass's block sums for this block's mass blocks: block b's w summed over its ids in
// id order (double, one thread per block) into cum[b].
__device__ void block_sums(const float* w, double* cum, const Part& p) {
  __syncthreads();  // w was written by every thread
  for (int64_t b = p.b_lo + threadIdx.x; b < p.b_hi; b += blockDim.x) {
    double s = 0.0;
    const int64_t end = p.V < (b + 1) * kMassBlock ? p.V : (b + 1) * kMassBlock;
#pragma unroll 4
    for (int64_t i = b * kMassBlock; i < end; ++i) s += static_cast<double>(w[i]);
    cum[b] = s;
  }
}

// Rank 0 (all its threads), once every block's sums are published: the row's block sums in its
// shared memory when they fit (V4's 129,280 ids make 2,020), else left in bs; returns where.
// Synchronises the block either way.
__device__ double* gather_sums(double* bs, Part& p) {
  const bool fits = p.nb <= kMaxCandidates;
  if (fits) {
    for (int64_t b = threadIdx.x; b < p.nb; b += blockDim.x) p.sh.cum[b] = __ldcg(bs + b);
  }
  __syncthreads();
  return fits ? p.sh.cum : bs;
}

// The block sums added in block order, on one thread (the host's order): cum[b] becomes the
// running total after block b (the host's partial sums, bit for bit), and the total is
// returned. A chain of dependent double additions, so the sums are read 16 at a time first
// (from shared memory, or L2 when gather_sums left them in global memory).
__device__ double running_total(double* cum, int64_t nb, bool in_shared) {
  constexpr int kAhead = 16;
  double t = 0.0;
  for (int64_t b0 = 0; b0 < nb; b0 += kAhead) {
    double v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      v[u] = b0 + u >= nb ? 0.0 : in_shared ? cum[b0 + u] : __ldcg(cum + b0 + u);
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (b0 + u < nb) {
        t += v[u];
        cum[b0 + u] = t;
      }
    }
  }
  return t;
}

// The k-th largest finite value (k <= number of finite entries), by radix select over the
// unsigned order keys, 8 bits at a time from the top: each block counts its ids' digits, every
// block adds the cluster's counts (integers: any order) and picks the same digit.
__device__ float kth_largest(const float* x, int32_t k, Part& p) {
  Shared& sh = p.sh;
  uint32_t prefix = 0;
  int need = k;  // rank still to find among keys matching the prefix
  for (int pass = 0, shift = 24; shift >= 0; ++pass, shift -= 8) {
    // Alternating buffers: this pass's counts are read by the other blocks until they reach the
    // next pass's cluster barrier, before which this block cannot clear them again.
    unsigned* hist = sh.hist_radix[pass & 1];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const uint32_t mask = shift == 24 ? 0u : (0xFFFFFFFFu << (shift + 8));
    // Counts aggregated per warp before the shared atomic: a row's values share a few top
    // digits (sign and exponent), so per-element atomics pile onto a few bins. Every lane runs
    // every iteration (the match needs the whole warp).
    const int lane = static_cast<int>(threadIdx.x & 31);
    for (int64_t i0 = p.lo; i0 < p.hi; i0 += blockDim.x) {
      const int64_t i = i0 + threadIdx.x;
      int bin = -1;
      if (i < p.hi && x[i] != neg_inf()) {
        const uint32_t u = static_cast<uint32_t>(order_key(__float_as_int(x[i]))) ^ 0x80000000u;
        if ((u & mask) == (prefix & mask)) bin = static_cast<int>((u >> shift) & 0xFF);
      }
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin >= 0 && lane == __ffs(peers) - 1) {
        atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
      }
    }
    p.cl.sync();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
      unsigned t = 0;
      for (unsigned q = 0; q < p.size; ++q) t += *at_rank(p, &hist[i], q);
      sh.radix_sum[i] = t;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      for (; d > 0; --d) {
        if (static_cast<int>(sh.radix_sum[d]) >= need) break;
        need -= static_cast<int>(sh.radix_sum[d]);
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

// A top-p candidate's sort key: weight descending, id ascending (the canonical order,
// top_p_mass.cuh); the weight's bits ride along, so rank 0 cuts without reading the other
// blocks' weights.
__device__ __forceinline__ unsigned long long cand_key(float w, int64_t i) {
  return top_p_key(static_cast<uint32_t>(__float_as_int(w)), static_cast<uint32_t>(i));
}
__device__ __forceinline__ float cand_weight(unsigned long long key) {
  return __int_as_float(static_cast<int32_t>(top_p_key_weight_bits(key)));
}

constexpr int32_t kNeedRetry = -1, kNeedRadix = -2;

// A block-wide sum of 64-bit integers, the result for thread 0.
__device__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  unsigned long long t = 0;
  if (threadIdx.x == 0) {
    for (unsigned w = 0; w < (blockDim.x >> 5); ++w) t += red[w];
  }
  return t;
}

// A flat row's cut (more candidates than shared memory holds): the token whose preceding mass
// is below the threshold and whose own mass reaches it, by radix select over the canonical
// keys, 8 bits at a time from the top, each digit weighted by its tokens' masses (integers:
// the cluster's sums in any order are exact). Every block picks the same digit; the result is
// rank 0's sh.last / sh.last_w for every block.
__device__ void top_p_radix(const float* w, unsigned long long threshold, Part& p) {
  Shared& sh = p.sh;
  unsigned long long prefix = 0, below = 0;  // the keys' prefix; mass of the keys under it
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (int pass = 0, shift = 56; shift >= 0; ++pass, shift -= 8) {
    // Alternating buffers, as in kth_largest.
    unsigned long long* part = sh.radix_mass.part[pass & 1];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) part[i] = 0;
    __syncthreads();
    const unsigned long long mask = shift == 56 ? 0ull : (~0ull << (shift + 8));
    for (int64_t i0 = p.lo; i0 < p.hi; i0 += blockDim.x) {
      const int64_t i = i0 + threadIdx.x;
      int bin = -1;
      unsigned long long m = 0;
      if (i < p.hi) {
        const float wi = w[i];
        const unsigned long long key = cand_key(wi, i);  // the canonical order
        if ((key & mask) == (prefix & mask)) {
          bin = static_cast<int>((key >> shift) & 0xFF);
          m = top_p_mass_of(wi);
        }
      }
      // The top digits (the weights' sign and exponent) are shared by a whole warp's ids in a
      // flat row: one atomic for the warp then, else one per id.
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (peers == 0xffffffffu) {
        for (int o = 16; o > 0; o >>= 1) m += __shfl_xor_sync(0xffffffffu, m, o);
        if (lane == 0 && bin >= 0 && m > 0) atomicAdd(&part[bin], m);
      } else if (bin >= 0 && m > 0) {
        atomicAdd(&part[bin], m);
      }
    }
    p.cl.sync();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
      unsigned long long t = 0;
      for (unsigned q = 0; q < p.size; ++q) t += *at_rank(p, &part[i], q);
      sh.radix_mass.sum[i] = t;
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // the digit whose masses carry the sum to the threshold
      sh.prefix_digits = top_p_radix_digit(sh.radix_mass.sum, below, threshold, &sh.radix_below);
    }
    __syncthreads();
    prefix |= static_cast<unsigned long long>(sh.prefix_digits) << shift;
    below = sh.radix_below;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sh.last = static_cast<int32_t>(static_cast<uint32_t>(prefix));
    sh.last_w = cand_weight(prefix);
  }
  __syncthreads();
}

// top_p (apply_top_p), the same on every block of the cluster.
__device__ void top_p_d(float* x, float* w, float top_p, Part& p) {
  Shared& sh = p.sh;
  Shared& s0 = *at_rank(p, &sh, 0);
  const float m = row_max_d(x, p);
  if (m == neg_inf()) return;
  unsigned long long mass = 0;
  for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
    w[i] = exp_nonpositive_d(x[i] - m);
    mass += top_p_mass_of(w[i]);
  }
  const unsigned long long block_mass = block_sum_u64(mass, sh.ured);
  for (int i = threadIdx.x; i < kTopPBuckets; i += blockDim.x) sh.hist[i] = 0.0;
  if (threadIdx.x == 0) {
    sh.counter = 0;
    sh.mass_part = block_mass;
  }
  __syncthreads();
  for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
    if (w[i] > 0.0f) atomicAdd(&sh.hist[__float_as_int(w[i]) >> 19], static_cast<double>(w[i]));
  }
  const int32_t nf = block_reduce(count_finite_local(x, p), Red::kSum, sh.ired);
  if (threadIdx.x == 0) sh.nf = nf;
  cluster_publish(p);  // every block's histogram, mass and finite count
  if (p.rank == 0) {
    // The cluster's histogram, each bucket added in rank order (it only picks candidates).
    for (int b = threadIdx.x; b < kTopPBuckets; b += blockDim.x) {
      double t = sh.hist[b];
      for (unsigned q = 1; q < p.size; ++q) t += *at_rank(p, &sh.hist[b], q);
      sh.hist[b] = t;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long total = 0;
      int32_t nf_all = 0;
      for (unsigned q = 0; q < p.size; ++q) {
        total += *at_rank(p, &sh.mass_part, q);
        nf_all += *at_rank(p, &sh.nf, q);
      }
      sh.nf_all = nf_all;
      sh.threshold_fx = top_p_threshold_of(top_p, total);
      const double estimate = ldexp(__ull2double_rn(sh.threshold_fx), -kTopPMassBits);
      int fb = 0;
      double acc = 0.0;
      for (int b = kTopPBuckets - 1; b >= 0; --b) {
        acc += sh.hist[b];
        if (acc >= estimate) {
          fb = b;
          break;
        }
      }
      sh.first_bucket = fb;
    }
  }
  cluster_publish(p);  // rank 0's threshold and first bucket
  const int first_bucket = s0.first_bucket;
  const unsigned long long threshold = s0.threshold_fx;
  // The histogram only picks candidates; the cut is exact. Retried over every finite token when
  // the histogram's double sums made the bucket estimate fall short (as the host does).
  bool cut = false;
  for (int attempt = 0; attempt < 2 && !cut; ++attempt) {
    const int fb = attempt == 0 ? first_bucket : 0;
    const float min_w = __int_as_float(fb << 19);
    // Every block appends its candidates to rank 0's list, one atomic per warp.
    const int lane = static_cast<int>(threadIdx.x & 31);
    for (int64_t i0 = p.lo; i0 < p.hi; i0 += blockDim.x) {
      const int64_t i = i0 + threadIdx.x;
      const bool take = i < p.hi && w[i] >= min_w && (fb > 0 || x[i] != neg_inf());
      const unsigned ballot = __ballot_sync(0xffffffffu, take);
      if (ballot == 0) continue;
      int base = 0;
      if (lane == __ffs(ballot) - 1) base = atomicAdd(&s0.counter, __popc(ballot));
      base = __shfl_sync(0xffffffffu, base, __ffs(ballot) - 1);
      const int slot = base + __popc(ballot & ((1u << lane) - 1u));
      if (take && slot < kMaxCandidates) s0.cand[slot] = cand_key(w[i], i);
    }
    p.cl.sync();  // rank 0's list is complete
    if (p.rank == 0) {
      const int n = sh.counter;
      if (n > kMaxCandidates) {
        if (threadIdx.x == 0) sh.need = kNeedRadix;
      } else {
        sort_candidates(n, sh);
        if (threadIdx.x == 0) {
          unsigned long long before = 0;
          int kept = 0;
          bool reached = false;
          for (int c = 0; c < n; ++c) {
            if (before >= threshold) {
              reached = true;
              break;
            }
            ++kept;
            before += top_p_mass_of(cand_weight(sh.cand[c]));
          }
          if (!reached) reached = before >= threshold;
          sh.need = !reached && n < sh.nf_all ? kNeedRetry : (kept == 0 ? 1 : kept);
          if (sh.need == kNeedRetry) {
            sh.counter = 0;
          } else {
            sh.last = static_cast<int32_t>(static_cast<uint32_t>(sh.cand[sh.need - 1]));
            sh.last_w = cand_weight(sh.cand[sh.need - 1]);
          }
        }
      }
    }
    p.cl.sync();  // rank 0's cut
    const int32_t need = s0.need;
    if (need == kNeedRadix) top_p_radix(w, threshold, p);
    cut = need != kNeedRetry;
  }
  // Every block reads rank 0's cut (the radix select left the same in every block: once rank 0
  // has it).
  p.cl.sync();
  const int32_t last = s0.last;
  const float last_w = s0.last_w;
  for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
    const bool keep = w[i] > last_w || (w[i] == last_w && i <= last);
    if (!keep) x[i] = neg_inf();
  }
  __syncthreads();
}

// The sampled token of the row (rank 0, every thread; the host's sample_inverse_cdf): the
// first block whose running total passes the target, a parallel search over cum, then the walk
// inside it on one thread. That walk always ends at a positive id: its partial sums reach the
// block's sum exactly, so before + partial reaches cum[b]. Past the blocks (u x total rounded
// up to total): the last positive id.
__device__ int32_t inverse_cdf(const float* w, const double* cum, bool in_shared, double target,
                               Part& p) {
  int32_t first = INT32_MAX;
  for (int64_t b = threadIdx.x; b < p.nb; b += blockDim.x) {
    const double c = in_shared ? cum[b] : __ldcg(cum + b);
    if (c > target) first = min(first, static_cast<int32_t>(b));
  }
  first = block_reduce(first, Red::kMin, p.sh.ired);
  if (threadIdx.x != 0) return 0;  // rank 0's thread 0 answers
  if (first != INT32_MAX) {
    const int64_t b = first;
    const double before = b == 0 ? 0.0 : in_shared ? cum[b - 1] : __ldcg(cum + b - 1);
    const int64_t end = p.V < (b + 1) * kMassBlock ? p.V : (b + 1) * kMassBlock;
    double partial = 0.0;
    for (int64_t i = b * kMassBlock; i < end; ++i) {
      const float wi = __ldcg(w + i);
      partial += static_cast<double>(wi);
      if (wi > 0.0f && before + partial > target) return static_cast<int32_t>(i);
    }
  }
  for (int64_t i = p.V - 1; i >= 0; --i) {
    if (__ldcg(w + i) > 0.0f) return static_cast<int32_t>(i);
  }
  return kSampleNoTokenDev;
}

// The row's draw: the cluster's ranks in blockIdx order (gridDim.x = rows x cluster size).
__device__ int32_t sample_row(const MatDesc& logits, const SampleSpecDev& s, float* x, float* w,
                              double* bs, int64_t r, Part& p) {
  Shared& sh = p.sh;
  int32_t bad = 0;
  for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
    const float v = logits.data[r * logits.ld + i];
    bad |= !(v < __int_as_float(0x7f800000)) ? 1 : 0;  // NaN or +inf
    x[i] = v;
  }
  if (reduce(bad, Red::kMax, p) != 0) return kSampleNonFiniteDev;
  if (!s.greedy) {
    if (s.temperature != 1.0f) {
      for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
        const float q = __fdiv_rn(x[i], s.temperature);
        x[i] = q > kFltMax ? kFltMax : q;
      }
    }
    if (s.min_p > 0.0f) {
      const float m = row_max_d(x, p);
      if (m != neg_inf()) {
        const double cut = static_cast<double>(m) + s.log_min_p;
        for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
          if (static_cast<double>(x[i]) < cut) x[i] = neg_inf();
        }
      }
    }
    if (s.top_k > 0 && reduce(count_finite_local(x, p), Red::kSum, p) > s.top_k) {
      const float kth = kth_largest(x, s.top_k, p);
      for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
        if (x[i] < kth) x[i] = neg_inf();
      }
    }
    if (s.top_p < 1.0f) top_p_d(x, w, s.top_p, p);
  }
  const float m = row_max_d(x, p);
  if (m == neg_inf()) return kSampleNoTokenDev;
  if (s.greedy) {  // the first id equal (as a float) to the max
    int32_t first = INT32_MAX;
    for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
      if (x[i] == m) first = min(first, static_cast<int32_t>(i));
    }
    return reduce(first, Red::kMin, p);
  }
  for (int64_t i = p.lo + threadIdx.x; i < p.hi; i += blockDim.x) {
    w[i] = exp_nonpositive_d(x[i] - m);
  }
  block_sums(w, bs, p);
  cluster_publish(p);
  if (p.rank != 0) return 0;         // rank 0's thread 0 answers
  double* cum = gather_sums(bs, p);  // synchronises
  if (threadIdx.x == 0) sh.total = running_total(cum, p.nb, cum != bs);
  __syncthreads();
  return inverse_cdf(w, cum, cum != bs, s.u * sh.total, p);
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(MatDesc logits, const SampleSpecDev* specs, float* xs, float* ws, double* bss,
                  int32_t* tokens) {
  grid_dependency_sync();
  __shared__ Shared sh;
  cg::cluster_group cl = cg::this_cluster();
  const unsigned size = cl.num_blocks();
  const int64_t r = blockIdx.x / size, V = logits.cols, nb = (V + kMassBlock - 1) / kMassBlock;
  const unsigned rank = cl.block_rank();
  const SampleSlice sl = sample_slice(V, size, rank);
  Part p{cl, rank, size, V, nb, sl.lo, sl.hi, sl.b_lo, sl.b_hi, sh, 0};
  const int32_t token = sample_row(logits, specs[r], xs + r * V, ws + r * V, bss + r * nb, r, p);
  if (rank == 0 && threadIdx.x == 0) tokens[r] = token;
  // No block leaves while another may still read its shared memory.
  cl.sync();
}

// Blocks per row: as many (up to 8, a portable cluster) as leave each block at least 8,192 ids
// and keep rows x blocks within the card's SMs, and as the card can co-schedule; `requested`
// (1, 2, 4 or 8; anything else: the rule) only as far as the card can co-schedule it.
unsigned cluster_size(int64_t rows, int64_t vocab, int requested) {
  static const int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n;
  }();
  if (requested != 1 && requested != 2 && requested != 4 && requested != 8) requested = 0;
  unsigned c = requested > 0 ? static_cast<unsigned>(requested) : 8u;
  if (requested == 0) {
    while (c > 1 && (rows * c > sms || vocab / c < 8192)) c >>= 1;
  }
  // Co-schedulable clusters of 2, 4, 8 blocks (index 1-3), asked once (ranks of one process on
  // cards of one kind may ask at once: atomics).
  static std::atomic<int> fits[4] = {-1, -1, -1, -1};
  while (c > 1) {
    const int k = c == 2 ? 1 : c == 4 ? 2 : 3;
    if (fits[k] < 0) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(c);
      cfg.blockDim = dim3(kThreads);
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = c;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      int n = 0;
      fits[k] = cudaOccupancyMaxActiveClusters(&n, sample_kernel, &cfg) == cudaSuccess && n > 0;
      cudaGetLastError();  // a refused query leaves no error behind
    }
    if (fits[k]) break;
    c >>= 1;
  }
  return c;
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
                   int cluster, cudaStream_t stream) {
  if (logits.rows == 0) return;
  const int64_t V = logits.cols, nb = (V + kMassBlock - 1) / kMassBlock;
  double* bs = static_cast<double*>(scratch);
  float* xs = reinterpret_cast<float*>(bs + logits.rows * nb);
  float* ws = xs + logits.rows * V;
  const unsigned c = cluster_size(logits.rows, V, cluster);
  launch_kernel_in_clusters(sample_kernel, static_cast<unsigned>(logits.rows) * c, kThreads, c, 0,
                            stream, logits, specs, xs, ws, bs, tokens);
}

}  // namespace deepinfer::kernels::cuda
