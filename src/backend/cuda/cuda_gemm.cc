// CudaOps' matrix products: the kernel GEMV/GEMM of kernels/cuda, and the tensor-core path.
//
// Tensor cores (cuBLAS, BF16 operands, FP32 accumulation) are used for M > 16 when the product
// is exact in BF16: activations act-quantized to FP8 (E4M3 values times a power of two) and an
// FP8/FP4 weight with E8M0 block scales (again E4M3/E2M1 values times powers of two). That is
// the official semantics of quantized checkpoints, i.e. every production checkpoint. The weight
// is dequantized into scratch per call (no second resident copy of the model), which costs
// 2 bytes written and read per weight element: cheap next to the FLOPs at M > 16.
//
// Act-quantized rows (1 x 128 blocks) times an FP8 weight with 128 x 128 E8M0 blocks, from
// fp8_gemm_min_rows_ (16) rows on, take the block-scaled FP8 GEMM on the stored bytes instead
// (cuBLASLt, cublaslt_fp8.h: twice the BF16 rate and one read of W per call, no BF16 copy);
// FP4 weights, F32/BF16 scales and shapes it does not take keep the BF16 path above.
//
// For a few act-quantized rows and a wide FP8/FP4 E8M0 weight, the grouped MoE's tensor-core
// stage runs the product as one expert (linear_mma): it reads the stored codes in place, so it
// neither streams a dequantized copy nor runs the rows GEMV (4-7% of the copy bandwidth
// there). The same exact products, summed in another FP32 order. Its blocks are 16 weight rows
// each and walk the rows 8 at a time, so it wins only with many blocks and few rows
// (bench/results/cuda_linear_perf_h200_2026-12-01_stop12.txt, same-run A/B): N >= 4096 and
// M <= 32 (wq_b 32768x1024: 2.1-2.5x at M = 8..32; wo_b 4096x8192: 1.2-1.4x), or N >= 16384 and
// M <= 64 (wq_b: 1.4x at 64); narrower weights lose (wq_a 1024x4096: 0.5x). From 2 rows: at 4
// rows wq_b takes 0.0170 ms there against 0.0496 on the decode GEMV, wo_b 0.0172 against 0.0436
// (bench/results/cuda_linear_mma_small_m_h200_2026-12-03_stop31_call9.txt.xz); one row keeps the
// GEMV (0.0172 against the stage's 0.0160 for wq_b: close, and not yet through the op harness).
//
// FP32 activations (the head, compressor and router projections, wo_a, HF checkpoints) with a
// dense BF16 weight, or an E8M0-scaled FP8/FP4 one dequantized as above, take the split path:
// x = hi + mid + lo in BF16 (exactly: 8 of x's 24 significant bits each), y = W·hi + W·mid +
// W·lo, three GEMMs: not bit-identical to FP32 FMAs, but FP32-accurate. (Two pieces, 2^-16
// relative, moved V4.1's quantizer codes, which every V4.1 forward has: the tiny V4.1 model
// differed from the CPU by 2e-2 on 7-token prompts.) Everything else
// (F32 weights, F32/BF16 scales, M <= 16) stays on the kernels.
//
// cuBLAS is opened with dlopen when the first CudaOps is made, not linked: a CPU-only user of a
// CUDA-enabled build must not need (or map: ~200 MB of RSS) libcublas, and a machine without it
// still runs everything on the kernels.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_internal.h"
#include "backend/cuda/dl_library.h"
#include "base/check.h"

namespace deepinfer::backend::cuda {

namespace kc = kernels::cuda;

namespace {
constexpr int64_t kTensorCoreMinRows = 17;
// Dense BF16 weights need no dequantisation, so the tensor cores beat the rows GEMV (which
// reads a 1 GB head at ~16% of the copy bandwidth at M = 16) as soon as the M <= 4 GEMV, which
// streams at the copy bandwidth, no longer applies.
constexpr int64_t kDenseSplitMinRows = 5;

void cublas_check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "deepinfer: cuBLAS error in %s: status %d\n", what, static_cast<int>(s));
  std::abort();
}
}  // namespace

namespace {
// The four cuBLAS entry points used, resolved once.
struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;  // optional
  cublasStatus_t (*gemm_strided_batched_ex)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
      cudaDataType, int, long long, int, cublasComputeType_t,
      cublasGemmAlgo_t) = nullptr;  // optional: linear_grouped loops without it
  bool ok() const { return create && destroy && set_stream && gemm_ex; }
};

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    CublasApi a;
    void* lib = open_first_library({"libcublas.so.13", "libcublas.so"});
    if (lib == nullptr) {
      std::fprintf(stderr,
                   "deepinfer: cuBLAS (libcublas.so.13) not found: the GPU runs every product "
                   "on its own kernels, without tensor cores\n");
      return a;
    }
    resolve_symbol(lib, "cublasCreate_v2", a.create);
    resolve_symbol(lib, "cublasDestroy_v2", a.destroy);
    resolve_symbol(lib, "cublasSetStream_v2", a.set_stream);
    resolve_symbol(lib, "cublasGemmEx", a.gemm_ex);
    resolve_symbol(lib, "cublasSetWorkspace_v2", a.set_workspace);
    resolve_symbol(lib, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex);
    return a;
  }();
  return api;
}
}  // namespace

void CudaOps::init_cublas() {
  const CublasApi& api = cublas_api();
  cublasHandle_t h = nullptr;
  if (!api.ok() || api.create(&h) != CUBLAS_STATUS_SUCCESS) return;  // kernels cover every case
  cublas_check(api.set_stream(h, stream_), "cublasSetStream");
  // A workspace of our own: cuBLAS would otherwise allocate one lazily, which a CUDA graph
  // capture (run_recorded) cannot contain. 32 MiB is what cuBLAS asks for on Hopper.
  constexpr size_t kWorkspace = size_t{32} << 20;
  if (api.set_workspace != nullptr) {
    auto ws = DeviceBuffer::allocate(kWorkspace);
    if (ws.ok() && api.set_workspace(h, ws->data(), kWorkspace) == CUBLAS_STATUS_SUCCESS) {
      cublas_workspace_ = std::move(*ws);
    }
  }
  cublas_ = h;
  fp8_gemm_ = Fp8BlockGemm::open();
}

void CudaOps::destroy_cublas() {
  fp8_gemm_.reset();
  if (cublas_ != nullptr) cublas_api().destroy(cublas_);
  cublas_ = nullptr;
}

bool CudaOps::tensor_core_eligible(int64_t rows, const WeightRef& w, bool x_act_quantized) const {
  return cublas_ != nullptr && !batch_invariant_ && rows >= kTensorCoreMinRows && x_act_quantized &&
         w.quantized() && w.scale.dtype == DType::kF8E8M0;
}

namespace {
bool split_eligible(const cublasContext* h, int64_t rows, const WeightRef& w) {
  return h != nullptr && rows >= kDenseSplitMinRows && !w.quantized() &&
         w.weight.dtype == DType::kBF16 && w.weight.is_contiguous();
}

void gemm_bf16(cublasHandle_t h, const void* w, const void* x, int64_t M, int64_t N, int64_t K,
               Mat y, float beta) {
  // Row-major y[M, N] = x[M, K] · W[N, K]ᵀ is column-major yᵀ[N, M] = Wᵀᵀ · xᵀ.
  const float alpha = 1.0f;
  cublas_check(
      cublas_api().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                           static_cast<int>(K), &alpha, w, CUDA_R_16BF, static_cast<int>(K), x,
                           CUDA_R_16BF, static_cast<int>(K), &beta, y.data, CUDA_R_32F,
                           static_cast<int>(y.ld), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}
}  // namespace

bool mma_stage_weight(const WeightRef& w) {
  return w.quantized() && w.scale.dtype == DType::kF8E8M0 && w.k % 128 == 0 && w.n % 16 == 0 &&
         w.block_k > 0 && (w.block_k & (w.block_k - 1)) == 0;
}

namespace {
// The weights the block-scaled FP8 GEMM takes (Fp8BlockGemm::shape_ok checks the shapes).
bool fp8_gemm_weight(const WeightRef& w) {
  return w.format == WeightFormat::kFp8 && w.scale.dtype == DType::kF8E8M0 && w.block_n == 128 &&
         w.block_k == 128 && reinterpret_cast<uintptr_t>(w.weight.data) % 16 == 0;
}
}  // namespace

bool CudaOps::linear_mma_eligible(int64_t M, const WeightRef& w) const {
  const int64_t mma_rows = std::min<int64_t>(linear_mma_max_rows_, w.n >= 16384 ? 64 : 32);
  return !batch_invariant_ && M >= linear_mma_min_rows_ && M <= mma_rows && w.n >= 4096 &&
         mma_stage_weight(w);
}

bool CudaOps::fp8_gemm_eligible(int64_t M, const WeightRef& w, const Mat& y,
                                int quant_block) const {
  return fp8_gemm_ != nullptr && !batch_invariant_ && M >= fp8_gemm_min_rows_ &&
         quant_block == 128 && fp8_gemm_weight(w) && Fp8BlockGemm::shape_ok(w.n, w.k, y.ld) &&
         reinterpret_cast<uintptr_t>(y.data) % 16 == 0;
}

bool CudaOps::matmul_fp8(CMat x, const WeightRef& w, Mat y, bool round_out) {
  const int64_t M = x.rows, N = w.n, K = w.k;
  void* ws = cublas_workspace_.data();
  const size_t ws_bytes = ws != nullptr ? cublas_workspace_.size() : 0;
  // The weight's scales as FP32 (cuBLASLt's scale type), made per call in the act-quant launch:
  // a copy kept per weight would need tracking when its memory is freed and reused.
  const int64_t n_scales = w.scale.numel();
  float* w_scale = arena().alloc_n<float>(n_scales);
  uint8_t* codes = arena().alloc_n<uint8_t>(M * K);
  float* x_scale = arena().alloc_n<float>(M * (K / 128));
  Fp8GemmOperands o;
  o.x = codes, o.x_scale = x_scale;
  o.w = static_cast<const uint8_t*>(w.weight.data), o.w_scale = w_scale;
  o.y = y.data, o.M = M, o.N = N, o.K = K, o.ldy = y.ld;
  Fp8BlockGemm::Plan* plan = fp8_gemm_->plan(o, ws_bytes);
  if (plan == nullptr) return false;
  kc::launch_act_quant_fp8_codes(md(x), 128, codes, K, x_scale,
                                 static_cast<const uint8_t*>(w.scale.data), n_scales, w_scale,
                                 stream_);
  fp8_gemm_->run(*plan, o, stream_, ws, ws_bytes);
  if (round_out) kc::launch_round_bf16(md(y), stream_);
  return true;
}

void CudaOps::matmul(CMat x, const WeightRef& w, Mat y, int x_quant_block, bool x_bf16,
                     uint16_t* wb, uint16_t* xb, bool round_out) {
  DI_CHECK(x.cols == w.k && y.rows == x.rows && y.cols == w.n);
  const int64_t M = x.rows;
  const bool x_act_quantized = x_quant_block > 0;
  if (batch_invariant_) {  // one kernel for every M: the tiled GEMM's per-row sums ignore M
    kc::launch_linear_invariant(md(x), wd(w), md(y), stream_);
    if (round_out) kc::launch_round_bf16(md(y), stream_);
    return;
  }
  // The FP8 GEMM first: from its threshold on it beats the single-expert stage on the weights it
  // takes (wq_b 32768 x 1024: 0.025 vs 0.045 ms at 32 rows, 0.028 vs 0.081 at 64; wo_b alike:
  // bench/results/cuda_linear_perf_h200_2026-12-03_fp8gemm.txt).
  if (fp8_gemm_eligible(M, w, y, x_quant_block) && matmul_fp8(x, w, y, round_out)) return;
  if (x_act_quantized && linear_mma_eligible(M, w)) {
    linear_mma(x, w, y, 0, round_out);
    return;
  }
  const bool dense_bf16 = split_eligible(cublas_, M, w);
  const bool quantized = cublas_ != nullptr && M >= kTensorCoreMinRows && w.quantized() &&
                         w.scale.dtype == DType::kF8E8M0;
  if (!dense_bf16 && !quantized) {
    kc::launch_linear(md(x), wd(w), md(y), round_out, stream_, stream_gemv_);
    return;
  }
  matmul_tensor_cores(x, w, y, x_act_quantized || x_bf16, wb, xb, quantized);
  if (round_out) kc::launch_round_bf16(md(y), stream_);
}

void CudaOps::matmul_tensor_cores(CMat x, const WeightRef& w, Mat y, bool x_bf16, uint16_t* wb,
                                  uint16_t* xb, bool quantized) {
  const int64_t M = x.rows, N = w.n, K = w.k;
  const void* wmat = w.weight.data;
  if (quantized) {  // E4M3/E2M1 times a power of two: exact in BF16
    if (wb == nullptr) wb = arena().alloc_n<uint16_t>(N * K);
    kc::launch_weight_to_bf16(wd(w), wb, stream_);
    wmat = wb;
  }
  if (x_bf16) {  // one exact product: the split below would add W·0 twice (the same bits)
    if (xb == nullptr) xb = arena().alloc_n<uint16_t>(M * K);
    kc::launch_mat_to_bf16(md(x), xb, stream_);
    gemm_bf16(cublas_, wmat, xb, M, N, K, y, 0.0f);
    return;
  }
  // FP32 activations: x = hi + mid + lo exactly, y = W·hi + W·mid + W·lo.
  uint16_t* hi = arena().alloc_n<uint16_t>(M * K);
  uint16_t* mid = arena().alloc_n<uint16_t>(M * K);
  uint16_t* lo = arena().alloc_n<uint16_t>(M * K);
  kc::launch_mat_split_bf16(md(x), hi, mid, lo, stream_);
  gemm_bf16(cublas_, wmat, hi, M, N, K, y, 0.0f);
  gemm_bf16(cublas_, wmat, mid, M, N, K, y, 1.0f);
  gemm_bf16(cublas_, wmat, lo, M, N, K, y, 1.0f);
}

bool CudaOps::matmul_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y,
                             const LinearOpts& opts) {
  const CublasApi& api = cublas_api();
  const int64_t M = x.rows, N = w.n / groups, K = w.k;
  // BF16-valued x (x_bf16) times an E8M0-scaled FP8/FP4 W is exact in BF16 (tensor_core_eligible's
  // condition), or a dense BF16 W.
  const bool quantized = tensor_core_eligible(M, w, opts.x_bf16);
  const bool dense = cublas_ != nullptr && opts.x_bf16 && M >= kTensorCoreMinRows &&
                     !w.quantized() && w.weight.dtype == DType::kBF16 && w.weight.is_contiguous();
  if (api.gemm_strided_batched_ex == nullptr || !(quantized || dense)) return false;
  const void* wmat = w.weight.data;
  if (quantized) {  // E4M3/E2M1 times a power of two: exact in BF16
    uint16_t* wb = arena().alloc_n<uint16_t>(w.n * K);
    kc::launch_weight_to_bf16(wd(w), wb, stream_);
    wmat = wb;
  }
  uint16_t* xb = arena().alloc_n<uint16_t>(M * x.cols);  // dense [M, groups·K]
  kc::launch_mat_to_bf16(md(x), xb, stream_);
  // One strided-batched GEMM, not one GEMM per group on the same copies: with it the GPU-sampled
  // 64-row step of the 4-layer V4-Flash config was 0.97 of 8 separate linears' on an H100, with
  // per-group GEMMs 0.995 (bench/results/gpu_2026-12-07_stop43.txt).
  // Group g, column-major: yᵀ[g·N.., M] = W_gᵀᵀ · x_gᵀ, W_g = wmat + g·N·K (ld K), x_g = xb +
  // g·K (ld groups·K), y_g = y + g·N (ld y.ld).
  const float alpha = 1.0f, beta = 0.0f;
  cublas_check(api.gemm_strided_batched_ex(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                                           static_cast<int>(M), static_cast<int>(K), &alpha, wmat,
                                           CUDA_R_16BF, static_cast<int>(K), N * K, xb, CUDA_R_16BF,
                                           static_cast<int>(x.cols), K, &beta, y.data, CUDA_R_32F,
                                           static_cast<int>(y.ld), N, static_cast<int>(groups),
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
  if (opts.round_bf16) kc::launch_round_bf16(md(y), stream_);
  return true;
}

bool CudaOps::hc_dots_by_gemm(CMat streams, CMat fn) const {
  return cublas_ != nullptr && !batch_invariant_ && streams.rows >= hc_gemm_min_rows_ &&
         fn.cols == streams.cols;
}

void CudaOps::hc_dots_gemm(CMat streams, CMat fn, int rows, float* dots) {
  const int64_t M = streams.rows, K = streams.cols;
  // dots[m, r] = fn[r] · x_m, r < rows: row-major dots [M, rows + 1] is column-major
  // dotsᵀ [rows + 1, M] = fnᵀᵀ · xᵀ. FP32 operands, FP32 FMAs (pedantic: never TF32); the
  // last column, Σ x², from its own kernel.
  const float alpha = 1.0f, beta = 0.0f;
  cublas_check(cublas_api().gemm_ex(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, static_cast<int>(M),
                                    static_cast<int>(K), &alpha, fn.data, CUDA_R_32F,
                                    static_cast<int>(fn.ld), streams.data, CUDA_R_32F,
                                    static_cast<int>(streams.ld), &beta, dots, CUDA_R_32F, rows + 1,
                                    CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (mHC logits)");
  kc::launch_row_sumsq(md(streams), dots + rows, rows + 1, stream_);
}

Expected<DeviceBuffer> CudaOps::linear_mma_layout_table() {
  constexpr int64_t kMax = kLinearMmaLayoutRows;
  std::vector<int32_t> t(static_cast<size_t>(5 * kMax));
  for (int64_t m = 1; m <= kMax; ++m) {
    int32_t* l = t.data() + 4 * (m - 1);
    // count, offset, active, n_active
    l[0] = static_cast<int32_t>(m), l[1] = 0, l[2] = 0, l[3] = 1;
  }
  for (int64_t r = 0; r < kMax; ++r) t[static_cast<size_t>(4 * kMax + r)] = static_cast<int32_t>(r);
  DI_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::allocate(t.size() * sizeof(int32_t)));
  DI_CUDA_CHECK(
      cudaMemcpy(buf.data(), t.data(), t.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  return buf;
}

void CudaOps::linear_mma(CMat x, const WeightRef& w, Mat y, int quant_block, bool round_out) {
  const int64_t M = x.rows, N = w.n, K = w.k;
  DI_CHECK(M >= 1 && M <= kLinearMmaLayoutRows);
  // One expert whose w2 is W, every row a pair of it: row r reads input row r and writes output
  // row r (the layout made at creation for M rows: count M, offset 0, expert 0 active).
  const kc::GroupedExpert* table =
      cached_table(w.weight.data, {kc::GroupedExpert{kc::WeightDesc{}, kc::WeightDesc{}, wd(w)}});
  int32_t* layouts = linear_mma_layouts_.as<int32_t>();
  int32_t* l4 = layouts + 4 * (M - 1);
  kc::MoeLayout l;
  l.counts = l4;
  l.offsets = l4 + 1;
  l.active = l4 + 2;
  l.n_active = l4 + 3;
  l.row_pair = layouts + 4 * kLinearMmaLayoutRows;  // rows 0, 1, ...: every pair is its own row
  l.pair_row = l.row_pair;
  uint16_t* xb = arena().alloc_n<uint16_t>(M * K);
  kc::launch_bf16_paired(md(x), quant_block, xb, K, stream_);
  kc::MoeEpilogue ep;  // the plain dot, rounded to BF16 when asked; no routing weight
  ep.bf16_rounding = round_out;
  ep.weight_before_w2 = true;
  const int pair_tiles = moe_pair_tiles_ > 0 ? moe_pair_tiles_ : (M > 8 ? 4 : 1);
  kc::launch_moe_down_mma(xb, K, table, w.format == WeightFormat::kFp4, N, l, 1, nullptr, 0, 1, ep,
                          y.data, y.ld, pair_tiles, stream_);
}

}  // namespace deepinfer::backend::cuda
