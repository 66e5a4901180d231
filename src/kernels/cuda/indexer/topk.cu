// Ops::topk (backend/ops.h): per row, the k best of scores[t, 0:visible[t]) in descending order,
// ties to the lower index, -1 past the picks; -inf (and NaN) scores are never picked. Two
// kernels, one block per row each, and launch_topk picks between them:
//
// radix select (rows longer than kTopkRankCountMaxCols, k <= kTopkRadixMaxK). Each score becomes
// an order-preserving 32-bit key (topk_key.cuh). The k-th largest key is found 8 bits at a time
// from the top: one pass over the row per digit builds a 256-bin histogram of the keys that
// match the digits found so far (shared-memory bins; counts aggregated per warp first, because a
// row's scores share their top digits and per-element atomics would pile onto a few bins), and
// the digit whose bin holds the k-th key is kept. A pass stops the search early when that bin
// holds exactly the picks still needed (every key from the bin up is picked). A last pass
// gathers every key above the threshold and, of the keys equal to it, the ones with the lowest
// indices (a block-wide count in index order: the oracle's tie rule decides which equal scores
// make the cut). A bitonic sort of the picks in shared memory then gives the contract's order.
// O(visible) per pass (at most 4 + 1 passes) plus O(k log² k) for the sort.
//
// rank count (short rows, where its single pass costs less than the select's passes and the
// sort; and k past kTopkRadixMaxK, whose picks would not fit shared memory): element i's rank is
// the number of elements that are larger, or equal with a lower index, which is the stable
// descending order with no sort state. O(visible²) per row.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/indexer/topk_key.cuh"

namespace deepinfer::kernels::cuda {
namespace {

__device__ int64_t clamp_visible_d(int64_t v, int64_t cols) {
  return v < 0 ? 0 : (v > cols ? cols : v);
}

// ---- rank count --------------------------------------------------------------------------
constexpr int kRankThreads = 512;
constexpr int kRankTile = 2048;

// NaN compares false with everything, so its rank would be 0 and it would be picked first: it is
// read as -inf instead (never picked), as the radix select does.
__device__ __forceinline__ float nan_as_neg_inf(float v) { return isnan(v) ? -INFINITY : v; }

__global__ void __launch_bounds__(kRankThreads)
    topk_rank_count_kernel(MatDesc scores, const int32_t* visible, int64_t k, int32_t* out) {
  grid_dependency_sync();
  __shared__ float tile[kRankTile];
  const int64_t t = blockIdx.x;
  const int64_t vis = clamp_visible_d(visible[t], scores.cols);
  const float* s = scores.data + t * scores.ld;
  int32_t* o = out + t * k;
  for (int64_t j = (vis < k ? vis : k) + threadIdx.x; j < k; j += blockDim.x) o[j] = -1;
  for (int64_t ib = 0; ib < vis; ib += blockDim.x) {
    const int64_t i = ib + threadIdx.x;
    const float si = i < vis ? nan_as_neg_inf(s[i]) : 0.0f;
    int64_t rank = 0;
    for (int64_t j0 = 0; j0 < vis; j0 += kRankTile) {
      const int64_t len = (vis - j0) < kRankTile ? (vis - j0) : kRankTile;
      __syncthreads();
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x) tile[j] = nan_as_neg_inf(s[j0 + j]);
      __syncthreads();
      if (i < vis) {
        for (int64_t j = 0; j < len; ++j) {
          const float sj = tile[j];
          rank += (sj > si || (sj == si && j0 + j < i)) ? 1 : 0;
        }
      }
    }
    // -inf scores rank after every finite one and are never picked: their slots say -1.
    if (i < vis && rank < k) o[rank] = si == -INFINITY ? -1 : static_cast<int32_t>(i);
  }
}

// ---- radix select ------------------------------------------------------------------------
constexpr int kRadixThreads = 1024;
constexpr int kWarps = kRadixThreads / 32;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kTopShift = 32 - kDigitBits;
static_assert(kBins % 32 == 0 && kBins <= kRadixThreads, "the digit search gives a bin a thread");
static_assert(kWarps <= 32, "block_rank scans the warp counts in one warp");

struct RadixShared {
  unsigned hist[kBins];
  // A pick is (key << 32) | ~index: descending order of these is the contract's order (larger
  // score first, then the lower index), and no pick is 0, which pads the sort.
  unsigned long long picks[kTopkRadixMaxK];
  unsigned warp_counts[kWarps];
  unsigned warp_offsets[kWarps];
  unsigned block_total;
  unsigned digit, need, digit_count;  // the digit search's answer, broadcast
  unsigned n_above;                   // the gather's slot counter
};

__device__ __forceinline__ unsigned long long pack_pick(uint32_t key, int64_t i) {
  return (static_cast<unsigned long long>(key) << 32) | (~static_cast<uint32_t>(i));
}
__device__ __forceinline__ int32_t pick_index(unsigned long long p) {
  return static_cast<int32_t>(~static_cast<uint32_t>(p));
}

// Which keys are picked: every pickable key >= lo, and of the keys equal to tie_key (< lo) the
// tie_take with the lowest indices, which go to picks[tie_base, tie_base + tie_take).
struct Threshold {
  uint32_t lo = 1;
  uint32_t tie_key = kTopkNeverKey;
  unsigned tie_take = 0, tie_base = 0;
};

// Histogram of digit (key >> shift) & (kBins - 1) over the pickable keys whose digits above
// `shift` equal prefix's.
__device__ void digit_histogram(const float* s, int64_t vis, int shift, uint32_t prefix,
                                RadixShared& sh) {
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) sh.hist[b] = 0;
  __syncthreads();
  const uint32_t above_digit = shift == kTopShift ? 0u : ~0u << (shift + kDigitBits);
  const int lane = static_cast<int>(threadIdx.x & 31);
  // Every lane runs every iteration (the bound is block-uniform): __match_any_sync needs the
  // whole warp.
  for (int64_t i0 = 0; i0 < vis; i0 += blockDim.x) {
    const int64_t i = i0 + threadIdx.x;
    int bin = -1;
    if (i < vis) {
      const uint32_t key = topk_key(s[i]);
      if (key != kTopkNeverKey && (key & above_digit) == prefix)
        bin = static_cast<int>((key >> shift) & (kBins - 1));
    }
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (bin >= 0 && lane == __ffs(peers) - 1)
      atomicAdd(&sh.hist[bin], static_cast<unsigned>(__popc(peers)));
  }
  __syncthreads();
}

// The k-th largest pickable key of the row, as a Threshold (k = min(k, pickable keys)).
__device__ Threshold select_threshold(const float* s, int64_t vis, unsigned k, RadixShared& sh) {
  Threshold th;
  if (vis <= k) return th;  // every pickable score is picked
  const int lane = static_cast<int>(threadIdx.x & 31), wid = static_cast<int>(threadIdx.x >> 5);
  uint32_t prefix = 0;
  unsigned need = 0, n_pick = 0;
  for (int shift = kTopShift; shift >= 0; shift -= kDigitBits) {
    digit_histogram(s, vis, shift, prefix, sh);
    // Thread b < kBins owns bin b: its count and the count of the bins above it (suffix sums
    // by shuffles within a warp of bins, then across the kBins / 32 warps).
    unsigned count = 0, above = 0;
    if (threadIdx.x < kBins) {
      count = sh.hist[threadIdx.x];
      unsigned suffix = count;
      for (int off = 1; off < 32; off <<= 1) {
        const unsigned v = __shfl_down_sync(0xffffffffu, suffix, off);
        if (lane + off < 32) suffix += v;
      }
      if (lane == 0) sh.warp_counts[wid] = suffix;
      above = suffix - count;
    }
    __syncthreads();
    unsigned total = 0;
    for (int w = 0; w < kBins / 32; ++w) {
      total += sh.warp_counts[w];
      if (w > wid) above += sh.warp_counts[w];
    }
    if (shift == kTopShift) {  // the first pass counts the pickable keys
      n_pick = total < k ? total : k;
      need = n_pick;
      if (n_pick == total) return th;  // all of them (none: -inf rows)
    }
    if (threadIdx.x < kBins && above < need && need <= above + count) {  // exactly one bin
      sh.digit = threadIdx.x;
      sh.need = need - above;
      sh.digit_count = count;
    }
    __syncthreads();
    prefix |= sh.digit << shift;
    need = sh.need;
    if (sh.digit_count == need) {  // the whole bin is picked: no tie to break
      th.lo = prefix;
      return th;
    }
  }
  // Every digit found: prefix is the k-th largest key, held by more keys than are still needed.
  th.lo = prefix + 1;  // no overflow: +inf's key is the largest, 0xff800000
  th.tie_key = prefix;
  th.tie_take = need;
  th.tie_base = n_pick - need;
  return th;
}

// Among the threads of the block (in thread order), the number below this one whose flag is set;
// *total: the number set in the whole block.
__device__ unsigned block_rank(bool flag, RadixShared& sh, unsigned* total) {
  const int lane = static_cast<int>(threadIdx.x & 31), wid = static_cast<int>(threadIdx.x >> 5);
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  if (lane == 0) sh.warp_counts[wid] = static_cast<unsigned>(__popc(ballot));
  __syncthreads();
  if (wid == 0) {
    const unsigned mine = lane < kWarps ? sh.warp_counts[lane] : 0u;
    unsigned inclusive = mine;
    for (int off = 1; off < 32; off <<= 1) {
      const unsigned v = __shfl_up_sync(0xffffffffu, inclusive, off);
      if (lane >= off) inclusive += v;
    }
    if (lane < kWarps) sh.warp_offsets[lane] = inclusive - mine;
    if (lane == 31) sh.block_total = inclusive;
  }
  __syncthreads();
  *total = sh.block_total;
  return sh.warp_offsets[wid] + static_cast<unsigned>(__popc(ballot & ((1u << lane) - 1u)));
}

// Writes the picks of th to sh.picks (unordered) and returns how many there are.
__device__ unsigned gather(const float* s, int64_t vis, const Threshold& th, RadixShared& sh) {
  if (threadIdx.x == 0) sh.n_above = 0;
  __syncthreads();
  unsigned ties_taken = 0;  // block-uniform
  for (int64_t i0 = 0; i0 < vis; i0 += blockDim.x) {
    const int64_t i = i0 + threadIdx.x;
    const uint32_t key = i < vis ? topk_key(s[i]) : kTopkNeverKey;
    if (key != kTopkNeverKey && key >= th.lo)
      sh.picks[atomicAdd(&sh.n_above, 1u)] = pack_pick(key, i);
    if (ties_taken < th.tie_take) {  // block-uniform, so block_rank's barriers are safe
      const bool tie = key == th.tie_key;
      unsigned in_block = 0;
      const unsigned rank = ties_taken + block_rank(tie, sh, &in_block);
      if (tie && rank < th.tie_take) sh.picks[th.tie_base + rank] = pack_pick(key, i);
      ties_taken += in_block;
    }
  }
  __syncthreads();
  return sh.n_above + th.tie_take;
}

// Bitonic sort of sh.picks[0, n) into descending order, padded to a power of two with 0 (below
// every pick).
__device__ void sort_picks_descending(unsigned n, RadixShared& sh) {
  unsigned size = 1;
  while (size < n) size <<= 1;
  for (unsigned i = n + threadIdx.x; i < size; i += blockDim.x) sh.picks[i] = 0;
  __syncthreads();
  for (unsigned run = 2; run <= size; run <<= 1) {
    for (unsigned stride = run >> 1; stride > 0; stride >>= 1) {
      for (unsigned pair = threadIdx.x; pair < size / 2; pair += blockDim.x) {
        const unsigned i = (pair / stride) * 2 * stride + pair % stride, l = i + stride;
        const unsigned long long a = sh.picks[i], b = sh.picks[l];
        // Runs alternate direction so that each pair of runs forms a bitonic sequence; the last
        // run (the whole array) is descending.
        const bool descending = (i & run) == 0;
        if (descending ? a < b : a > b) {
          sh.picks[i] = b;
          sh.picks[l] = a;
        }
      }
      __syncthreads();
    }
  }
}

__global__ void __launch_bounds__(kRadixThreads)
    topk_radix_kernel(MatDesc scores, const int32_t* visible, int k, int32_t* out) {
  grid_dependency_sync();
  __shared__ RadixShared sh;
  const int64_t t = blockIdx.x;
  const int64_t vis = clamp_visible_d(visible[t], scores.cols);
  const float* s = scores.data + t * scores.ld;
  int32_t* o = out + t * k;
  const Threshold th = select_threshold(s, vis, static_cast<unsigned>(k), sh);
  const unsigned n_pick = gather(s, vis, th, sh);
  sort_picks_descending(n_pick, sh);
  for (int j = threadIdx.x; j < k; j += blockDim.x)
    o[j] = static_cast<unsigned>(j) < n_pick ? pick_index(sh.picks[j]) : -1;
}

}  // namespace

void launch_topk_rank_count(MatDesc scores, const int32_t* visible, int64_t k, int32_t* out,
                            cudaStream_t stream) {
  if (scores.rows == 0 || k == 0) return;
  launch_kernel(topk_rank_count_kernel, static_cast<unsigned>(scores.rows), kRankThreads, 0, stream,
                scores, visible, k, out);
}

void launch_topk_radix(MatDesc scores, const int32_t* visible, int64_t k, int32_t* out,
                       cudaStream_t stream) {
  if (scores.rows == 0 || k == 0) return;
  if (k > kTopkRadixMaxK) {  // the picks would not fit shared memory
    launch_topk_rank_count(scores, visible, k, out, stream);
    return;
  }
  launch_kernel(topk_radix_kernel, static_cast<unsigned>(scores.rows), kRadixThreads, 0, stream,
                scores, visible, static_cast<int>(k), out);
}

void launch_topk(MatDesc scores, const int32_t* visible, int64_t k, int32_t* out,
                 cudaStream_t stream) {
  if (scores.cols <= kTopkRankCountMaxCols || k > kTopkRadixMaxK) {
    launch_topk_rank_count(scores, visible, k, out, stream);
  } else {
    launch_topk_radix(scores, visible, k, out, stream);
  }
}

}  // namespace deepinfer::kernels::cuda
