// Sparse gathered MQA on the tensor cores for many heads (32 and more a token; V4 has 64), head
// dim 512, official semantics (BF16 queries, keys and probabilities, as sparse_attention_mma.cu:
// every product exact, only the FP32 summation order differs from the SIMT kernels).
//
// Why a second tensor-core kernel: sparse_attention_mma.cu takes 16 heads a block, so each of a
// token's 640 keys is read from memory and converted by 4 blocks, twice each (scores, then P·V),
// straight from global memory in the scores. On an H100 it ran 8.6-13x FlashMLA's time at
// 128-512 rows (stop 46). Here a block takes 64 heads, and each key is read from memory once a
// pass into a shared-memory chunk that every warp's mma reads through ldmatrix.
//
// Block = (query token, 64 heads), 16 warps. Keys in chunks of 32, staged as BF16 rows
// (register prefetch: the next chunk's loads are in flight while this one is multiplied).
//   scores   warp (head tile ht = w % 4, channel quarter kq = w / 4): D[16 heads, 32 keys] over
//            its 128 channels (8 mma steps), the partial sums to shared memory; thread i then
//            owns head i / 8, keys 4 (i % 8) .. + 3 of the chunk and adds the 4 quarters in
//            order, times the scale: z, the same bits in both passes.
//   pass 1   the max of z per head (a thread's running max, then over the head's 8 lanes).
//   pass 2   e = exp(z - max): the FP32 denominator, BF16 probabilities to shared memory; P·V
//            with warp (ht, channel quarter cq = w / 4) holding D[16 heads, 128 channels]:
//            P fragments and V (ldmatrix.trans: the key-major chunk is V's k-major B) per 16
//            keys. o = D / den.
// The max must be the whole row's before any probability is rounded (ops.h's bf16_probs
// contract), hence two passes over the keys rather than an online softmax; the second
// recomputes the scores (64 x 640 FP32 scores would not fit beside the chunk and queries).
//
// Few rows (decode: a token's 64 heads are one block, so batch 1 ran on one SM of 132) split
// the keys across blocks, in the same kernel's two passes as separate launches, so the
// probabilities stay those of the row's max:
//   max      split s runs pass 1 over its chunks: its max per head;
//   partial  split s takes the max over every split (the row's), runs pass 2 over its chunks:
//            the unnormalised P·V sums and its share of the denominator;
//   combine  o = (Σ sums in split order) / (Σ denominators + the sink's term).
// Scores, the max and every BF16 probability are the unsplit kernel's bits; only the FP32 sums
// over keys are associated per split (a shape-dependent split: not batch-invariant, as the SIMT
// split it replaces for 32+ heads).
#include <algorithm>

#include "kernels/cuda/attention/sparse_common.cuh"
#include "kernels/cuda/mma_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kD = 512;
constexpr int kHeads = 64;                // heads a block: 4 mma row tiles
constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 32;                // keys a staged chunk
constexpr int kLd = kD + 8;               // halves a staged row: 1,040 bytes, 4 banks apart, so
                                          // ldmatrix's 8 row reads hit distinct bank groups
constexpr int kSld = kChunk + 8;          // floats a partial-score row: the float2 stores of a
                                          // half warp (rows g, columns 2t) hit distinct banks
constexpr int kPld = kChunk + 8;          // halves a probability row (80 bytes)
constexpr int kQuarter = kD / 4;          // channels a warp takes in the scores and in P·V
constexpr int kQuarters = 4;
constexpr int kLoads = kChunk * kD / 4 / kThreads;  // float4 loads a thread stages per chunk: 8
constexpr int kTilesPV = kQuarter / 8;    // 16 output tiles of 8 channels a warp

constexpr size_t kQsBytes = size_t{kHeads} * kLd * sizeof(uint16_t);
constexpr size_t kKcBytes = size_t{kChunk} * kLd * sizeof(uint16_t);
constexpr size_t kSpBytes = size_t{kQuarters} * kHeads * kSld * sizeof(float);
constexpr size_t kPsBytes = size_t{kHeads} * kPld * sizeof(uint16_t);
constexpr size_t kDenBytes = size_t{kHeads} * sizeof(float);
constexpr size_t kFixedBytes = kQsBytes + kKcBytes + kSpBytes + kPsBytes + kDenBytes;
static_assert(kQsBytes % 16 == 0 && kKcBytes % 16 == 0 && kSpBytes % 16 == 0 &&
              kPsBytes % 16 == 0 && kDenBytes % 16 == 0);

size_t staged_smem_bytes(int64_t L) {
  return kFixedBytes + static_cast<size_t>(L) * sizeof(const float*);
}

// The chunk's keys this thread loads: key (tid / 128) + 4r, channels 4 (tid % 128) .. + 3 (a
// warp reads 512 contiguous bytes of one row). Keys past n are zeros.
struct ChunkLoader {
  float4 v[kLoads];
  __device__ __forceinline__ void load(const float* const* rows, int n, int chunk, int tid) {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      const int j = chunk * kChunk + (tid >> 7) + 4 * r;
      v[r] = j < n ? sparse_load4(rows[j] + 4 * (tid & 127)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  __device__ __forceinline__ void store(uint16_t* kc, int tid) const {
#pragma unroll
    for (int r = 0; r < kLoads; ++r) {
      uint16_t* dst = kc + ((tid >> 7) + 4 * r) * kLd + 4 * (tid & 127);
      *reinterpret_cast<uint2*>(dst) =
          make_uint2(pack_bf16(v[r].x, v[r].y), pack_bf16(v[r].z, v[r].w));
    }
  }
};

// This warp's partial scores of the staged chunk into sp[kq]: D[16 heads of tile ht, 32 keys]
// over channels 128 kq .. + 127. a_row / b_row: this lane's ldmatrix row addresses (shared, bytes) at the
// quarter's first channel (queries: row 16 ht + 8 (mi & 1) + r, channel 8 (mi >> 1); keys: key
// 8 (mi >> 1) + r, channel 8 (mi & 1); mi = lane / 8, r = lane % 8).
__device__ __forceinline__ void chunk_scores(unsigned a_row, unsigned b_row, float* sp_row) {
  float acc[4][4] = {};
#pragma unroll
  for (int s = 0; s < kQuarter / 16; ++s) {
    uint32_t a[4], b0[4], b1[4];
    ldmatrix_x4(a, a_row + 32 * s);
    ldmatrix_x4(b0, b_row + 32 * s);                // key tiles 0, 1: (b0, b1) each
    ldmatrix_x4(b1, b_row + 32 * kLd + 32 * s);     // key tiles 2, 3 (16 rows on)
    mma_bf16_16816(acc[0], a[0], a[1], a[2], a[3], b0[0], b0[1]);
    mma_bf16_16816(acc[1], a[0], a[1], a[2], a[3], b0[2], b0[3]);
    mma_bf16_16816(acc[2], a[0], a[1], a[2], a[3], b1[0], b1[1]);
    mma_bf16_16816(acc[3], a[0], a[1], a[2], a[3], b1[2], b1[3]);
  }
  // acc[kt]: (head g, key 8kt + 2t), (g, + 1), (g + 8, 8kt + 2t), (g + 8, + 1); sp_row is
  // (head g, key 2t) of this warp's quarter.
#pragma unroll
  for (int kt = 0; kt < 4; ++kt) {
    *reinterpret_cast<float2*>(sp_row + 8 * kt) = make_float2(acc[kt][0], acc[kt][1]);
    *reinterpret_cast<float2*>(sp_row + 8 * kSld + 8 * kt) = make_float2(acc[kt][2], acc[kt][3]);
  }
}

// z of this thread's 4 keys: the quarters' partial sums added in order, times the scale.
__device__ __forceinline__ void chunk_z(const float* sp_mine, float scale, float* z) {
  const float4 p0 = *reinterpret_cast<const float4*>(sp_mine);
  const float4 p1 = *reinterpret_cast<const float4*>(sp_mine + kHeads * kSld);
  const float4 p2 = *reinterpret_cast<const float4*>(sp_mine + 2 * kHeads * kSld);
  const float4 p3 = *reinterpret_cast<const float4*>(sp_mine + 3 * kHeads * kSld);
  z[0] = (((p0.x + p1.x) + p2.x) + p3.x) * scale;
  z[1] = (((p0.y + p1.y) + p2.y) + p3.y) * scale;
  z[2] = (((p0.z + p1.z) + p2.z) + p3.z) * scale;
  z[3] = (((p0.w + p1.w) + p2.w) + p3.w) * scale;
}

// What one launch of the kernel does: the whole attention, or one part of the split form.
enum class StagedPart { kWhole, kMax, kPartial };

// The split form's scratch, [splits][rows][n_heads] (partial: [..][512]) floats.
struct SplitParts {
  float* max = nullptr;
  float* den = nullptr;
  float* partial = nullptr;
};

template <StagedPart kPart>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_staged_kernel(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                   const float* sink, float scale, MatDesc o, bool round_out,
                                   SplitParts parts) {
  grid_dependency_sync();
  extern __shared__ uint4 smem_staged[];
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_staged);                         // [64][kLd]
  uint16_t* kc = reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(qs) + kQsBytes);  // [32][kLd]
  float* sp = reinterpret_cast<float*>(reinterpret_cast<char*>(kc) + kKcBytes);  // [4][64][kSld]
  uint16_t* ps = reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(sp) + kSpBytes);  // [64][kPld]
  float* den_s = reinterpret_cast<float*>(reinterpret_cast<char*>(ps) + kPsBytes);  // [64]
  const float** rows = reinterpret_cast<const float**>(reinterpret_cast<char*>(den_s) + kDenBytes);
  __shared__ int count;
  const int64_t tok = blockIdx.x, h0 = static_cast<int64_t>(blockIdx.y) * kHeads;
  const int hn = static_cast<int>(n_heads - h0 < kHeads ? n_heads - h0 : kHeads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  // The block's queries as BF16 (heads past hn zero).
  for (int i = tid; i < kHeads * kD / 4; i += kThreads) {
    const int h = i / (kD / 4), c = 4 * (i % (kD / 4));
    uint2 v = make_uint2(0u, 0u);
    if (h < hn) {
      const float4 x = sparse_load4(q.data + tok * q.ld + (h0 + h) * kD + c);
      v = make_uint2(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w));
    }
    *reinterpret_cast<uint2*>(qs + h * kLd + c) = v;
  }
  sparse_compact_rows(keys, tok, L, rows, &count);
  __syncthreads();
  const int n = count;
  if (kPart == StagedPart::kWhole && n == 0) {
    for (int64_t i = tid; i < int64_t{hn} * kD; i += kThreads) o.data[tok * o.ld + h0 * kD + i] = 0.0f;
    return;
  }
  // This block's chunks [c0, c1): all of them, or split blockIdx.z's share (maybe none).
  const int chunks = (n + kChunk - 1) / kChunk;
  const int per = (chunks + static_cast<int>(gridDim.z) - 1) / static_cast<int>(gridDim.z);
  const int c0 = min(chunks, static_cast<int>(blockIdx.z) * per), c1 = min(chunks, c0 + per);
  // Index of (split, token, head h0 + h) in the split form's scratch.
  const int64_t part_row = (static_cast<int64_t>(blockIdx.z) * gridDim.x + tok) * n_heads + h0;

  const int ht = warp & 3, quarter = warp >> 2, mi = lane >> 3, r = lane & 7;
  const int g = lane >> 2, t = lane & 3;
  // ldmatrix row addresses (shared state space, bytes).
  const unsigned a_row = smem_addr(qs + (16 * ht + 8 * (mi & 1) + r) * kLd + 8 * (mi >> 1) +
                                   kQuarter * quarter);
  const unsigned b_row =
      smem_addr(kc + (8 * (mi >> 1) + r) * kLd + 8 * (mi & 1) + kQuarter * quarter);
  float* sp_row = sp + (quarter * kHeads + 16 * ht + g) * kSld + 2 * t;
  const int my_h = tid >> 3, my_k = 4 * (tid & 7);  // this thread's head and keys in a chunk
  const float* sp_mine = sp + my_h * kSld + my_k;

  // Pass 1: the max of each head's scores (the split form: over this split's chunks, or taken
  // from every split's).
  ChunkLoader next;
  if (c0 < c1) next.load(rows, n, c0, tid);
  float m = -__int_as_float(0x7f800000);
  if constexpr (kPart != StagedPart::kPartial) {
    for (int c = c0; c < c1; ++c) {
      next.store(kc, tid);
      __syncthreads();  // kc holds chunk c; every reader of sp's last chunk is done
      if (c + 1 < c1) {
        next.load(rows, n, c + 1, tid);
      } else if (kPart == StagedPart::kWhole) {
        next.load(rows, n, c0, tid);  // pass 2's first chunk
      }
      chunk_scores(a_row, b_row, sp_row);
      __syncthreads();  // sp complete (and every reader of kc done)
      float z[4];
      chunk_z(sp_mine, scale, z);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (c * kChunk + my_k + i < n) m = fmaxf(m, z[i]);
      }
    }
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
    if constexpr (kPart == StagedPart::kMax) {
      if ((tid & 7) == 0 && my_h < hn) parts.max[part_row + my_h] = m;
      return;
    }
  } else {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * n_heads;  // one split's scratch
    const int64_t first = static_cast<int64_t>(tok) * n_heads + h0 + my_h;
    if (my_h < hn) {
      for (int s = 0; s < static_cast<int>(gridDim.z); ++s) m = fmaxf(m, parts.max[first + s * stride]);
    } else {
      m = 0.0f;  // a head past hn: zero queries, every score 0 (its sums are never stored)
    }
  }

  // Pass 2: the same scores, BF16 probabilities, P·V.
  float den = 0.0f;
  float acc[kTilesPV][4] = {};
  const unsigned pa_row = smem_addr(ps + (16 * ht + 8 * (mi & 1) + r) * kPld + 8 * (mi >> 1));
  const unsigned vb_row =
      smem_addr(kc + (8 * (mi & 1) + r) * kLd + 8 * (mi >> 1) + kQuarter * quarter);
  uint16_t* ps_mine = ps + my_h * kPld + my_k;
  for (int c = c0; c < c1; ++c) {
    __syncthreads();  // the last chunk's P·V readers of kc and ps are done
    next.store(kc, tid);
    __syncthreads();  // kc holds chunk c
    chunk_scores(a_row, b_row, sp_row);
    if (c + 1 < c1) next.load(rows, n, c + 1, tid);  // after the scores: fewer live registers
    __syncthreads();  // sp complete
    float z[4], e[4];
    chunk_z(sp_mine, scale, z);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      e[i] = c * kChunk + my_k + i < n ? expf(z[i] - m) : 0.0f;
      den += e[i];
    }
    *reinterpret_cast<uint2*>(ps_mine) = make_uint2(pack_bf16(e[0], e[1]), pack_bf16(e[2], e[3]));
    __syncthreads();  // ps complete
#pragma unroll
    for (int ks = 0; ks < kChunk / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, pa_row + 32 * ks);
#pragma unroll
      for (int np = 0; np < kTilesPV / 2; ++np) {
        // Matrices (keys 0-7, channels 16np..), (keys 8-15, same), (keys 0-7, 16np + 8..),
        // (keys 8-15, same), transposed: the B fragments of output tiles 2np and 2np + 1.
        uint32_t b[4];
        ldmatrix_x4_trans(b, vb_row + 32 * ks * kLd + 32 * np);
        mma_bf16_16816(acc[2 * np], a[0], a[1], a[2], a[3], b[0], b[1]);
        mma_bf16_16816(acc[2 * np + 1], a[0], a[1], a[2], a[3], b[2], b[3]);
      }
    }
  }
  den += __shfl_xor_sync(0xffffffffu, den, 1);
  den += __shfl_xor_sync(0xffffffffu, den, 2);
  den += __shfl_xor_sync(0xffffffffu, den, 4);
  if constexpr (kPart == StagedPart::kPartial) {
    // The split's share of the denominator; its sums go out unnormalised (combine divides).
    if ((tid & 7) == 0 && my_h < hn) parts.den[part_row + my_h] = den;
  } else {
    if ((tid & 7) == 0) den_s[my_h] = sink != nullptr && my_h < hn ? den + expf(sink[h0 + my_h] - m) : den;
    __syncthreads();
  }
  // acc[nt]: (head g, channel 8nt + 2t), (g, + 1), (g + 8, 8nt + 2t), (g + 8, + 1) of this warp's
  // head tile and channel quarter.
#pragma unroll
  for (int nt = 0; nt < kTilesPV; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = 16 * ht + g + (i >= 2 ? 8 : 0);
      if (h >= hn) continue;
      const int ch = kQuarter * quarter + 8 * nt + 2 * t + (i & 1);
      if constexpr (kPart == StagedPart::kPartial) {
        parts.partial[(part_row + h) * kD + ch] = acc[nt][i];
      } else {
        const float v = acc[nt][i] / den_s[h];
        o.data[tok * o.ld + (h0 + h) * kD + ch] = round_out ? bf16_round_d(v) : v;
      }
    }
  }
}

// The split form's last step, a block per (token, head) and 4 channels a thread: the row's max
// (every split's, in split order as the partial launch took it), the denominator and the sums
// added in split order. A row without keys (max -inf) is zeros, as in the whole kernel.
__global__ void __launch_bounds__(kD / 4)
    staged_combine_kernel(int64_t n_heads, int splits, const float* sink, SplitParts parts,
                          MatDesc o, bool round_out) {
  grid_dependency_sync();
  const int64_t tok = blockIdx.x, h = blockIdx.y, c = 4 * threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * n_heads, first = tok * n_heads + h;
  float m = -__int_as_float(0x7f800000), den = 0.0f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s = 0; s < splits; ++s) m = fmaxf(m, parts.max[first + s * stride]);
  float* dst = o.data + tok * o.ld + h * kD + c;  // o's rows may be any view: scalar stores
  if (m == -__int_as_float(0x7f800000)) {
    for (int i = 0; i < 4; ++i) dst[i] = 0.0f;
    return;
  }
  for (int s = 0; s < splits; ++s) {
    den += parts.den[first + s * stride];
    const float4 p = *reinterpret_cast<const float4*>(parts.partial + (first + s * stride) * kD + c);
    acc.x += p.x;
    acc.y += p.y;
    acc.z += p.z;
    acc.w += p.w;
  }
  if (sink != nullptr) den += expf(sink[h] - m);
  float v[4] = {acc.x / den, acc.y / den, acc.z / den, acc.w / den};
  if (round_out) {
    for (float& x : v) x = bf16_round_d(x);
  }
  for (int i = 0; i < 4; ++i) dst[i] = v[i];
}

// Splits of the keys for rows x head blocks: enough blocks for one wave of the card, at most
// kMaxSplits, at most one a chunk of L. The cap rather than L's chunk count bounds it for long
// rows, so the split (and the sums' association) is the same for widths L that differ only in
// absent keys, as the two key forms of one call do.
constexpr int64_t kMaxSplits = 16;
int staged_splits(int64_t rows, int64_t n_heads, int64_t L) {
  const int64_t blocks = rows * ((n_heads + kHeads - 1) / kHeads);
  const int64_t chunks = (L + kChunk - 1) / kChunk;
  const int64_t splits =
      std::min<int64_t>({device_sm_count() / std::max<int64_t>(blocks, 1), kMaxSplits, chunks});
  return splits >= 2 ? static_cast<int>(splits) : 0;
}

bool staged_shape_fits(int64_t n_heads, SparseKeys keys, int64_t L) {
  return keys.d == kD && n_heads >= kHeads / 2 && L <= kMaxSparseKeys;
}

}  // namespace

bool launch_sparse_attention_staged(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                    const float* sink, float scale, MatDesc o, bool round_out,
                                    cudaStream_t stream) {
  const int64_t L1 = L > 0 ? L : 1;
  if (!staged_shape_fits(n_heads, keys, L)) return false;
  if (q.rows == 0) return true;
  const auto kernel = sparse_attention_staged_kernel<StagedPart::kWhole>;
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel),
                     static_cast<int>(staged_smem_bytes(kMaxSparseKeys)));
  const dim3 grid(static_cast<unsigned>(q.rows),
                  static_cast<unsigned>((n_heads + kHeads - 1) / kHeads));
  launch_kernel(kernel, grid, kThreads, staged_smem_bytes(L1), stream, q, n_heads, keys, L, sink,
                scale, o, round_out, SplitParts{});
  return true;
}

int64_t sparse_attention_staged_split_scratch(int64_t rows, int64_t n_heads, SparseKeys keys,
                                              int64_t L) {
  if (!staged_shape_fits(n_heads, keys, L)) return 0;
  // Per split, row and head: kD sums, a max and a denominator (launch's layout below).
  return int64_t{staged_splits(rows, n_heads, L)} * rows * n_heads * (kD + 2);
}

bool launch_sparse_attention_staged_split(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                          const float* sink, float scale, MatDesc o,
                                          bool round_out, float* scratch, cudaStream_t stream) {
  if (!staged_shape_fits(n_heads, keys, L) || scratch == nullptr) return false;
  const int splits = staged_splits(q.rows, n_heads, L);
  if (splits == 0) return false;
  // The sums first (their float4 reads stay 16-byte aligned), then the maxima and denominators.
  const int64_t per_split = q.rows * n_heads;
  float* sums = scratch;
  float* maxima = sums + splits * per_split * kD;
  const SplitParts parts{maxima, maxima + splits * per_split, sums};
  const auto max_kernel = sparse_attention_staged_kernel<StagedPart::kMax>;
  const auto partial_kernel = sparse_attention_staged_kernel<StagedPart::kPartial>;
  for (const void* k : {reinterpret_cast<const void*>(max_kernel),
                        reinterpret_cast<const void*>(partial_kernel)}) {
    allow_dynamic_smem(k, static_cast<int>(staged_smem_bytes(kMaxSparseKeys)));
  }
  const dim3 grid(static_cast<unsigned>(q.rows),
                  static_cast<unsigned>((n_heads + kHeads - 1) / kHeads),
                  static_cast<unsigned>(splits));
  const size_t smem = staged_smem_bytes(L > 0 ? L : 1);
  launch_kernel(max_kernel, grid, kThreads, smem, stream, q, n_heads, keys, L, sink, scale, o,
                round_out, parts);
  launch_kernel(partial_kernel, grid, kThreads, smem, stream, q, n_heads, keys, L, sink, scale, o,
                round_out, parts);
  launch_kernel(staged_combine_kernel,
                dim3(static_cast<unsigned>(q.rows), static_cast<unsigned>(n_heads)), kD / 4, 0,
                stream, n_heads, splits, sink, parts, o, round_out);
  return true;
}

}  // namespace deepinfer::kernels::cuda
