// Lightning indexer scores on the tensor cores (mma.sync m16n8k16, BF16 in, FP32 accumulate) for
// runs of query rows that read the same paged index keys (a prefill chunk of one sequence), with
// the official BF16 rounding points: the queries and keys are BF16 numbers there (MXFP4 fake
// quant with power-of-two scales), so every product of a head's dot is exact and only the dot's
// FP32 summation order differs from indexer.cu's warp reduction, before the same BF16 rounding;
// ReLU, the weight, its rounding and the sum over heads in head order are the same code.
//
// Block = (a tile of up to 64 rows of one run, 64 keys), 4 warps: warp w takes rows 16w ..
// 16w + 15 (one mma row tile) and all 64 keys (8 tiles of 8). The keys are converted to BF16 in
// shared memory once, with the tile's weights; per head the tile's queries arrive in shared
// memory (FP32, converted as the fragments are read) and each warp runs the head's dot as 8 mma
// steps of 16 channels per key tile, thread t of a quad taking channels 16s + 4t .. + 3 of step
// s in both operands (the order inside a step is free), then folds ReLU · weight into its
// per-(row, key) sums. Keys at or past a row's visible count are not written (the multi form's
// contract), and a block past every row's visible keys leaves at once.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/mma_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kDi = 128;
constexpr int kRows = kIndexerMmaTileRows, kKeys = 64;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kLd = kDi + 16;  // halves per staged row: 72 words, so a half warp's 8-byte reads
                               // (8g + 2t words) hit 32 distinct banks
constexpr int kKeyTiles = kKeys / 8;

constexpr int kQld = kDi + 16;  // floats per staged query row: the float4 reads of a quarter
                                // warp (16g + 4t words) hit distinct bank groups
constexpr int kMaxHeads = 64;   // the weights of the tile sit in shared memory
constexpr size_t kQBytes = size_t{2} * kRows * kQld * sizeof(float);
constexpr size_t kKBytes = size_t{kKeys} * kLd * sizeof(uint16_t);
constexpr size_t kWBytes = size_t{kRows} * kMaxHeads * sizeof(float);
constexpr size_t kSmem = kQBytes + kKBytes + kWBytes;

// The queries of head h (FP32, as stored) go to shared memory by cp.async, two buffers: head
// h + 1 is in flight while head h is multiplied (staging each head synchronously left the block
// waiting on L2 latency per head, ~11 us of its ~12). Rows past the tile's are not copied:
// their mma rows are independent and never written.
__global__ void __launch_bounds__(kThreads)
    indexer_scores_mma_kernel(MatDesc q, int64_t n_heads, MatDesc weights,
                              const PagedDesc* row_keys, const IndexerTile* tiles,
                              const int32_t* visible, MatDesc scores) {
  grid_dependency_sync();
  extern __shared__ uint4 smem_idx[];
  float* qf = reinterpret_cast<float*>(smem_idx);                                  // [2][64][kQld]
  uint16_t* ks = reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(qf) + kQBytes);  // [64][kLd]
  float* ws = reinterpret_cast<float*>(reinterpret_cast<char*>(ks) + kKBytes);  // [64][n_heads]
  __shared__ int32_t vis_s[kRows];
  __shared__ int max_vis;
  const IndexerTile tile = tiles[blockIdx.y];
  const PagedDesc keys = row_keys[tile.row0];
  const int64_t key0 = static_cast<int64_t>(blockIdx.x) * kKeys;
  if (threadIdx.x == 0) max_vis = 0;
  __syncthreads();
  if (threadIdx.x < kRows) {
    int v = 0;
    if (static_cast<int>(threadIdx.x) < tile.rows) {
      const int64_t vv = visible[tile.row0 + threadIdx.x];
      v = static_cast<int>(vv < keys.rows ? vv : keys.rows);
    }
    vis_s[threadIdx.x] = v;
    atomicMax(&max_vis, v);
  }
  __syncthreads();
  if (key0 >= max_vis) return;  // block-uniform: nothing visible here
  const int heads = static_cast<int>(n_heads);

  const auto stage_head = [&](int h, int buf) {
    float* dst = qf + buf * kRows * kQld;
    for (int i = threadIdx.x; i < tile.rows * (kDi / 4); i += kThreads) {
      const int r = i / (kDi / 4), c = 4 * (i % (kDi / 4));
      cp_async16(dst + r * kQld + c, q.data + (tile.row0 + r) * q.ld + h * kDi + c);
    }
    cp_async_commit();
  };
  stage_head(0, 0);
  // The tile's keys as BF16 (zeros past the visible ones) and its weights, loads first.
  {
    constexpr int kPerThread = kKeys * kDi / 2 / kThreads;  // channel pairs per thread
    float2 v[kPerThread];
#pragma unroll
    for (int m = 0; m < kPerThread; ++m) {
      const int i = threadIdx.x + kThreads * m, r = i / (kDi / 2), c = 2 * (i % (kDi / 2));
      const int64_t w = key0 + r;
      v[m] = w < max_vis ? *reinterpret_cast<const float2*>(
                               keys.pages[w / keys.page_rows] + (w % keys.page_rows) * kDi + c)
                         : make_float2(0.0f, 0.0f);
    }
#pragma unroll
    for (int m = 0; m < kPerThread; ++m) {
      const int i = threadIdx.x + kThreads * m, r = i / (kDi / 2), c = 2 * (i % (kDi / 2));
      *reinterpret_cast<uint32_t*>(ks + r * kLd + c) = pack_bf16(v[m].x, v[m].y);
    }
    for (int i = threadIdx.x; i < tile.rows * heads; i += kThreads) {
      const int r = i / heads, h = i % heads;
      ws[r * heads + h] = weights.data[(tile.row0 + r) * weights.ld + h];
    }
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int r_lo = 16 * warp + g, r_hi = r_lo + 8;
  float sum[kKeyTiles][4] = {};
  for (int h = 0; h < heads; ++h) {
    if (h + 1 < heads) {
      stage_head(h + 1, (h + 1) & 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // head h's queries (and, the first time, the keys and weights) are in
    const float* qa = qf + (h & 1) * kRows * kQld + r_lo * kQld + 4 * t;
    float acc[kKeyTiles][4] = {};
#pragma unroll
    for (int s = 0; s < kDi / 16; ++s) {
      const float4 lo = *reinterpret_cast<const float4*>(qa + 16 * s);
      const float4 hi = *reinterpret_cast<const float4*>(qa + 8 * kQld + 16 * s);
      const uint32_t a0 = pack_bf16(lo.x, lo.y), a2 = pack_bf16(lo.z, lo.w);
      const uint32_t a1 = pack_bf16(hi.x, hi.y), a3 = pack_bf16(hi.z, hi.w);
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
        const uint2 b = *reinterpret_cast<const uint2*>(ks + (8 * nt + g) * kLd + 4 * t + 16 * s);
        mma_bf16_16816(acc[nt], a0, a1, a2, a3, b.x, b.y);
      }
    }
    // indexer.cu's per-head fold: dot rounded, ReLU · weight rounded, summed in head order.
    const float w_lo = r_lo < tile.rows ? ws[r_lo * heads + h] : 0.0f;
    const float w_hi = r_hi < tile.rows ? ws[r_hi * heads + h] : 0.0f;
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float dv = bf16_round_d(acc[nt][i]);
        sum[nt][i] += bf16_round_d(fmaxf(dv, 0.0f) * (i >= 2 ? w_hi : w_lo));
      }
    }
    __syncthreads();  // every warp is done with buffer h & 1 before head h + 2 refills it
  }
  // sum[nt]: (row r_lo, key 8nt + 2t), (r_lo, 8nt + 2t + 1), (r_hi, 2t), (r_hi, 2t + 1).
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = i >= 2 ? r_hi : r_lo;
      const int64_t w = key0 + 8 * nt + 2 * t + (i & 1);
      if (r < tile.rows && w < vis_s[r]) {
        scores.data[(tile.row0 + r) * scores.ld + w] = bf16_round_d(sum[nt][i]);
      }
    }
  }
}

}  // namespace

bool launch_indexer_scores_mma(MatDesc q, int64_t n_heads, MatDesc weights,
                               const PagedDesc* row_keys, const IndexerTile* tiles, int64_t n_tiles,
                               int64_t key_cols, const int32_t* visible, MatDesc scores,
                               cudaStream_t stream) {
  // cp.async reads 16-byte query chunks: rows 16-byte aligned.
  if (n_heads > kMaxHeads || q.ld % 4 != 0 || reinterpret_cast<uintptr_t>(q.data) % 16 != 0) {
    return false;
  }
  if (n_tiles == 0 || key_cols == 0) return true;
  allow_dynamic_smem(reinterpret_cast<const void*>(indexer_scores_mma_kernel),
                     static_cast<int>(kSmem));
  const dim3 grid(static_cast<unsigned>((key_cols + kKeys - 1) / kKeys),
                  static_cast<unsigned>(n_tiles));
  launch_kernel(indexer_scores_mma_kernel, grid, kThreads, kSmem, stream, q, n_heads, weights,
                row_keys, tiles, visible, scores);
  return true;
}

}  // namespace deepinfer::kernels::cuda
