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

__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_staged_kernel(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                   const float* sink, float scale, MatDesc o, bool round_out) {
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
  if (n == 0) {
    for (int64_t i = tid; i < int64_t{hn} * kD; i += kThreads) o.data[tok * o.ld + h0 * kD + i] = 0.0f;
    return;
  }
  const int chunks = (n + kChunk - 1) / kChunk;

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

  // Pass 1: the max of each head's scores.
  ChunkLoader next;
  next.load(rows, n, 0, tid);
  float m = -__int_as_float(0x7f800000);
  for (int c = 0; c < chunks; ++c) {
    next.store(kc, tid);
    __syncthreads();  // kc holds chunk c; every reader of sp's last chunk is done
    next.load(rows, n, c + 1 < chunks ? c + 1 : 0, tid);  // then pass 2's first chunk
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

  // Pass 2: the same scores, BF16 probabilities, P·V.
  float den = 0.0f;
  float acc[kTilesPV][4] = {};
  const unsigned pa_row = smem_addr(ps + (16 * ht + 8 * (mi & 1) + r) * kPld + 8 * (mi >> 1));
  const unsigned vb_row =
      smem_addr(kc + (8 * (mi & 1) + r) * kLd + 8 * (mi >> 1) + kQuarter * quarter);
  uint16_t* ps_mine = ps + my_h * kPld + my_k;
  for (int c = 0; c < chunks; ++c) {
    __syncthreads();  // the last chunk's P·V readers of kc and ps are done
    next.store(kc, tid);
    __syncthreads();  // kc holds chunk c
    chunk_scores(a_row, b_row, sp_row);
    if (c + 1 < chunks) next.load(rows, n, c + 1, tid);  // after the scores: fewer live registers
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
  if ((tid & 7) == 0) den_s[my_h] = sink != nullptr && my_h < hn ? den + expf(sink[h0 + my_h] - m) : den;
  __syncthreads();
  // acc[nt]: (head g, channel 8nt + 2t), (g, + 1), (g + 8, 8nt + 2t), (g + 8, + 1) of this warp's
  // head tile and channel quarter.
#pragma unroll
  for (int nt = 0; nt < kTilesPV; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = 16 * ht + g + (i >= 2 ? 8 : 0);
      if (h >= hn) continue;
      const int ch = kQuarter * quarter + 8 * nt + 2 * t + (i & 1);
      const float v = acc[nt][i] / den_s[h];
      o.data[tok * o.ld + (h0 + h) * kD + ch] = round_out ? bf16_round_d(v) : v;
    }
  }
}

}  // namespace

bool launch_sparse_attention_staged(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                    const float* sink, float scale, MatDesc o, bool round_out,
                                    cudaStream_t stream) {
  const int64_t L1 = L > 0 ? L : 1;
  if (keys.d != kD || n_heads < kHeads / 2 || L > kMaxSparseKeys) return false;
  if (q.rows == 0) return true;
  allow_dynamic_smem(reinterpret_cast<const void*>(sparse_attention_staged_kernel),
                     static_cast<int>(staged_smem_bytes(kMaxSparseKeys)));
  const dim3 grid(static_cast<unsigned>(q.rows),
                  static_cast<unsigned>((n_heads + kHeads - 1) / kHeads));
  launch_kernel(sparse_attention_staged_kernel, grid, kThreads, staged_smem_bytes(L1), stream, q,
                n_heads, keys, L, sink, scale, o, round_out);
  return true;
}

}  // namespace deepinfer::kernels::cuda
