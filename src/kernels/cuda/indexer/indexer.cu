// Lightning indexer (spec §2.5) scores (the per-row top-k that picks the compressed rows from
// them is topk.cu).
//
// indexer_scores: one block per (token, 64 keys); the multi form gives every token its own paged
// key matrix (a descriptor table, one per row: the sequence's index-key pages) and skips blocks
// past the token's visible keys. The token's Hi·di query and Hi weights sit in shared memory,
// each warp scores one key at a time with its channels in registers (di <= 256), one warp
// reduction per head, heads summed in order in FP32 (with the official BF16 rounding points
// when asked). A key's score does not depend on which page holds it.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kKeysPerBlock = 64;
constexpr int kMaxDiRegs = 8;  // di <= 256

__global__ void __launch_bounds__(kThreads)
    indexer_scores_kernel(MatDesc q, int64_t n_heads, MatDesc weights, MatDesc shared_keys,
                          const PagedDesc* row_keys, const int32_t* visible, bool bf16_rounding,
                          MatDesc scores) {
  grid_dependency_sync();
  extern __shared__ float qs[];  // [n_heads * di] then [n_heads] weights
  const int64_t t = blockIdx.y;
  // row_keys (multi): row t's own paged key matrix, and only its visible keys are written.
  const PagedDesc paged = row_keys != nullptr ? row_keys[t] : PagedDesc{};
  const int64_t di = row_keys != nullptr ? paged.cols : shared_keys.cols;
  const int64_t key_rows = row_keys != nullptr ? paged.rows : shared_keys.rows;
  const int64_t vis = visible[t] < key_rows ? visible[t] : key_rows;
  const int64_t w0 = static_cast<int64_t>(blockIdx.x) * kKeysPerBlock;
  if (row_keys != nullptr && w0 >= vis) return;  // before the barrier: the whole block leaves
  float* ws = qs + n_heads * di;
  for (int64_t i = threadIdx.x; i < n_heads * di; i += blockDim.x) qs[i] = q.data[t * q.ld + i];
  for (int64_t i = threadIdx.x; i < n_heads; i += blockDim.x)
    ws[i] = weights.data[t * weights.ld + i];
  __syncthreads();
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int64_t w_limit = row_keys != nullptr ? vis : key_rows;
  for (int64_t w = w0 + wid; w < w0 + kKeysPerBlock && w < w_limit; w += nw) {
    float* out = scores.data + t * scores.ld + w;
    if (w >= vis) {
      if (lane == 0) *out = -__int_as_float(0x7f800000);
      continue;
    }
    const float* key = row_keys != nullptr
                           ? paged.pages[w / paged.page_rows] + (w % paged.page_rows) * di
                           : shared_keys.data + w * shared_keys.ld;
    float kr[kMaxDiRegs];
#pragma unroll
    for (int i = 0; i < kMaxDiRegs; ++i) {
      const int64_t c = lane + 32 * i;
      kr[i] = c < di ? key[c] : 0.0f;
    }
    float sum = 0.0f;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = qs + h * di;
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxDiRegs; ++i) {
        const int64_t c = lane + 32 * i;
        if (c < di) s = fmaf(qh[c], kr[i], s);
      }
      float dv = warp_sum(s);
      if (bf16_rounding) dv = bf16_round_d(dv);
      float prod = fmaxf(dv, 0.0f) * ws[h];
      if (bf16_rounding) prod = bf16_round_d(prod);
      sum += prod;
    }
    if (lane == 0) *out = bf16_rounding ? bf16_round_d(sum) : sum;
  }
}

}  // namespace

namespace {
void launch_scores(MatDesc q, int64_t n_heads, MatDesc weights, MatDesc keys,
                   const PagedDesc* row_keys, int64_t di, int64_t key_cols, const int32_t* visible,
                   bool bf16_rounding, MatDesc scores, cudaStream_t stream) {
  if (q.rows == 0 || key_cols == 0) return;
  const size_t smem = static_cast<size_t>(n_heads * di + n_heads) * sizeof(float);
  allow_dynamic_smem(reinterpret_cast<const void*>(indexer_scores_kernel), 160 * 1024);
  const dim3 grid(static_cast<unsigned>((key_cols + kKeysPerBlock - 1) / kKeysPerBlock),
                  static_cast<unsigned>(q.rows));
  launch_kernel(indexer_scores_kernel, grid, kThreads, smem, stream, q, n_heads, weights, keys,
                row_keys, visible, bf16_rounding, scores);
}
}  // namespace

void launch_indexer_scores(MatDesc q, int64_t n_heads, MatDesc weights, MatDesc keys,
                           const int32_t* visible, bool bf16_rounding, MatDesc scores,
                           cudaStream_t stream) {
  launch_scores(q, n_heads, weights, keys, nullptr, keys.cols, keys.rows, visible, bf16_rounding,
                scores, stream);
}

void launch_indexer_scores_multi(MatDesc q, int64_t n_heads, MatDesc weights,
                                 const PagedDesc* row_keys, int64_t di, const int32_t* visible,
                                 bool bf16_rounding, MatDesc scores, cudaStream_t stream) {
  launch_scores(q, n_heads, weights, MatDesc{}, row_keys, di, scores.cols, visible, bf16_rounding,
                scores, stream);
}

namespace {
__global__ void paged_row_addresses_kernel(const int32_t* sel, int64_t M, int64_t K,
                                           const PagedDesc* rows, const float** out, int64_t ld) {
  grid_dependency_sync();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * K) return;
  const int64_t t = i / K, k = i % K;
  const int32_t r = sel[i];
  const PagedDesc p = rows[t];
  out[t * ld + k] = r >= 0 && r < p.rows
                        ? p.pages[r / p.page_rows] + (r % p.page_rows) * p.cols
                        : nullptr;
}
}  // namespace

void launch_paged_row_addresses(const int32_t* sel, int64_t M, int64_t K, const PagedDesc* rows,
                                const float** out, int64_t ld, cudaStream_t stream) {
  if (M == 0 || K == 0) return;
  launch_kernel(paged_row_addresses_kernel, grid_for(M * K, 256), 256, 0, stream, sel, M, K, rows,
                out, ld);
}

}  // namespace deepinfer::kernels::cuda
