// CudaOps: argument checks, host/device staging and kernel launches for every op but the grouped
// MoE (cuda_ops_moe.cc). Each op resets the scratch arena, stages what it must, and enqueues.
#include "backend/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops_internal.h"
#include "backend/host_memory.h"
#include "base/check.h"
#include "base/options.h"
#include "kernels/cuda/launch.h"

namespace deepinfer::backend::cuda {

namespace kc = kernels::cuda;

kc::MatDesc md(CMat m) { return {const_cast<float*>(m.data), m.rows, m.cols, m.ld}; }
kc::MatDesc md(Mat m) { return {m.data, m.rows, m.cols, m.ld}; }

kc::WeightDesc wd(const WeightRef& w) {
  kc::WeightDesc d;
  d.n = w.n;
  d.k = w.k;
  d.w = w.weight.data;
  d.block_n = w.block_n;
  d.block_k = w.block_k;
  switch (w.format) {
    case WeightFormat::kDense:
      d.fmt = w.weight.dtype == DType::kBF16  ? kc::WFmt::kBf16
              : w.weight.dtype == DType::kF16 ? kc::WFmt::kF16
                                              : kc::WFmt::kF32;
      DI_CHECK(w.weight.dtype == DType::kBF16 || w.weight.dtype == DType::kF16 ||
               w.weight.dtype == DType::kF32);
      return d;
    case WeightFormat::kFp8:
      d.fmt = kc::WFmt::kFp8;
      break;
    case WeightFormat::kFp4:
      d.fmt = kc::WFmt::kFp4;
      break;
  }
  d.scale = w.scale.data;
  d.scale_ld = w.scale.shape[1];
  DI_CHECK(w.scale.dtype == DType::kF8E8M0 || w.scale.dtype == DType::kF32 ||
           w.scale.dtype == DType::kBF16);
  d.sfmt = w.scale.dtype == DType::kF8E8M0 ? kc::SFmt::kE8m0
           : w.scale.dtype == DType::kF32  ? kc::SFmt::kF32
                                           : kc::SFmt::kBf16;
  return d;
}

CudaOps::CudaOps(cudaStream_t stream, cudaStream_t alloc_stream)
    : stream_(stream), alloc_stream_(alloc_stream), arena_(stream), graph_arena_(stream) {
  init_cublas();
}

CudaOps::~CudaOps() {
  // Whichever thread destroys the engine: the streams and handles go back to their own device.
  bind_thread();
  drop_recordings();
  destroy_cublas();
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (alloc_stream_) cudaStreamDestroy(alloc_stream_);
}

Expected<std::unique_ptr<CudaOps>> CudaOps::create(int device, bool batch_invariant,
                                                   int64_t graph_max_rows) {
  DI_TRY(cuda_available(device));
  cudaStream_t s = nullptr, a = nullptr;
  cudaError_t e = cudaStreamCreate(&s);  // blocking: legacy-stream copies order after it
  // Non-blocking: a zero-fill there never waits for (or joins a capture of) the op stream.
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    return internal_error(std::string("cudaStreamCreate failed: ") + cudaGetErrorString(e));
  }
  std::unique_ptr<CudaOps> ops(new CudaOps(s, a));
  ops->device_ = device;
  DI_ASSIGN_OR_RETURN(ops->linear_mma_layouts_, linear_mma_layout_table());
  ops->batch_invariant_ = batch_invariant;
  ops->graph_max_rows_ = std::max<int64_t>(0, graph_max_rows);
  // Programmatic dependent launch (DEEPINFER_CUDA_PDL, kernels/cuda/launch.h): process-wide,
  // from sm_90 on.
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  const auto& env = env_options();
  kernels::cuda::set_programmatic_launch(major >= 9 && env.ok() && env->cuda_pdl);
  // Step outputs for the host (logits, hidden rows) in page-locked memory (host_memory.h),
  // portable to every device of the process; a refused lock leaves the memory pageable.
  set_host_memory_hooks({[](void* p, size_t bytes) {
                           if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) != cudaSuccess)
                             cudaGetLastError();
                         },
                         [](void* p) {
                           if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
                         }});
  return ops;
}

void CudaOps::bind_thread() { DI_CUDA_CHECK(cudaSetDevice(device_)); }

bool CudaOps::supports(Feature f) const {
  // Every op of the contract has a kernel, V4's and V4.1's (cuda_ops_v41.cc);
  // docs/cuda_backend.md lists the shape limits.
  return f != Feature::kCount;
}

void CudaOps::synchronize() {
  if (refuse_in_capture("a synchronisation")) return;
  DI_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* CudaOps::allocate(size_t bytes) {
  refuse_in_capture("an allocation (scratch that has not settled)");
  void* p = nullptr;
  const size_t n = std::max<size_t>(bytes, 256);
  const cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error: the context stays usable
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory("GPU memory exhausted: cudaMalloc of " + std::to_string(n) +
                      " bytes failed (" + cudaGetErrorString(e) + "); " + std::to_string(free_b) +
                      " of " + std::to_string(total_b) + " bytes free");
  }
  // On a stream of its own: a legacy-stream memset would join (and break) a graph capture of
  // the op stream running on another thread.
  DI_CUDA_CHECK(cudaMemsetAsync(p, 0, n, alloc_stream_));
  DI_CUDA_CHECK(cudaStreamSynchronize(alloc_stream_));
  return p;
}

void CudaOps::deallocate(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(deferred_mu_);
  if (any_capture_.load()) {  // cudaFree may synchronise the device: not while capturing
    deferred_frees_.push_back(p);
    return;
  }
  DI_CUDA_CHECK(cudaFree(p));
}

void CudaOps::free_deferred() {
  std::vector<void*> frees;
  {
    std::lock_guard<std::mutex> lock(deferred_mu_);
    frees.swap(deferred_frees_);
  }
  for (void* p : frees) DI_CUDA_CHECK(cudaFree(p));
}

void CudaOps::upload(void* dst, const void* src, size_t bytes) {
  if (refuse_in_capture("an upload")) return;
  // Queued on the op stream, so it lands after the ops that still read dst's old contents and
  // before the ones after it, without making the host wait for the stream (the legacy-stream
  // cudaMemcpy did: a blocking stream joins it, so every upload was a full synchronisation).
  // A pageable source is staged by the driver before the call returns: src is not read later.
  if (bytes) DI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
}

void* CudaOps::allocate_staging(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, std::max<size_t>(bytes, 64), cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    throw OutOfMemory("pinned host memory exhausted: cudaHostAlloc of " + std::to_string(bytes) +
                      " bytes failed");
  }
  return p;
}

void CudaOps::deallocate_staging(void* p) {
  if (p == nullptr) return;
  // cudaFreeHost synchronises the device, which a capture in progress does not allow; staging
  // is only freed between steps (its owner grows or goes), never inside a recorded unit.
  DI_CHECK(!any_capture_.load());
  DI_CUDA_CHECK(cudaFreeHost(p));
}

void CudaOps::upload_async(void* dst, const void* src, size_t bytes) {
  if (refuse_in_capture("an upload")) return;
  if (bytes) DI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaOps::download(void* dst, const void* src, size_t bytes) {
  if (refuse_in_capture("a download")) return;
  if (bytes) DI_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void CudaOps::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) {
    DI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
}

void CudaOps::fill_random(void* dst, int64_t n, const RandomFill& f) {
  kc::launch_random_fill(dst, n, f, stream_);
  DI_CUDA_CHECK(cudaGetLastError());
}

void* CudaOps::stage(const void* host, size_t bytes) {
  void* d = arena().alloc(bytes);
  if (refuse_in_capture("a host array staged to the device") || bytes == 0) return d;
  DI_CUDA_CHECK(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, stream_));
  return d;
}

template <typename T>
const T* CudaOps::on_device(const T* p, int64_t n) {
  if (p == nullptr || n == 0 || is_device_pointer(p)) return p;
  return static_cast<const T*>(stage(p, static_cast<size_t>(n) * sizeof(T)));
}
template const int32_t* CudaOps::on_device(const int32_t*, int64_t);
template const float* CudaOps::on_device(const float*, int64_t);
template const float* const* CudaOps::on_device(const float* const*, int64_t);

void CudaOps::store_ints(const int32_t* src, int32_t* dst, int64_t n) {
  if (n == 0) return;
  const bool dev = is_device_pointer(dst);
  if (!dev && refuse_in_capture("integers copied back to the host")) return;
  DI_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(int32_t),
                                dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost, stream_));
  if (!dev) synchronize();
}

void CudaOps::embed(const int32_t* ids, int64_t n, const WeightRef& table, Mat out) {
  DI_CHECK(!table.quantized() && out.rows == n && out.cols == table.k);
  arena().reset();
  kc::launch_embed(on_device(ids, n), wd(table), md(out), 1, false, stream_);
}
void CudaOps::embed_streams(const int32_t* ids, int64_t n, const WeightRef& table, int64_t streams,
                            bool round, Mat X) {
  DI_CHECK(!table.quantized() && X.rows == n && streams >= 1 && X.cols == streams * table.k);
  arena().reset();
  kc::launch_embed(on_device(ids, n), wd(table), md(X), streams, round, stream_);
}

void CudaOps::linear_impl(CMat x, const WeightRef& w, Mat y, bool act_quant, int act_block,
                          bool round_out, bool x_bf16) {
  DI_CHECK(x.cols == w.k && y.rows == x.rows && y.cols == w.n);
  if (act_quant && w.quantized()) {
    // Quantized on the way to the FP8 GEMM's codes, or to the single-expert stage's BF16 input
    // (cuda_gemm.cc: the order of the two).
    if (fp8_gemm_eligible(x.rows, w, y, act_block) && matmul_fp8(x, w, y, round_out)) return;
    if (linear_mma_eligible(x.rows, w)) {
      linear_mma(x, w, y, act_block, round_out);
      return;
    }
    // Batch 1-4 on FP8/FP4 weights: the decode GEMV quantizes x itself (matmul would reach the
    // same GEMV with the quantized copy: one launch fewer, the same bits).
    if (!batch_invariant_ && stream_gemv_ && fused_act_quant_ &&
        kc::launch_linear_quantized(md(x), wd(w), md(y), act_block, round_out, stream_)) {
      return;
    }
    Mat xq(arena().alloc_n<float>(x.rows * x.cols), x.rows, x.cols);
    kc::launch_act_quant_fp8_copy(md(x), md(xq), act_block, stream_);
    matmul(xq, w, y, act_block, true, nullptr, nullptr, round_out);
    return;
  }
  matmul(x, w, y, 0, x_bf16, nullptr, nullptr, round_out);
}

void CudaOps::linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& opts) {
  arena().reset();
  linear_impl(x, w, y, opts.act_quant, opts.act_block, opts.round_bf16, opts.x_bf16);
}

void CudaOps::linear_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y,
                             const LinearOpts& opts) {
  check_linear_grouped(x, w, groups, y);
  if (grouped_linear_ && groups > 1 && !batch_invariant_ && !(opts.act_quant && w.quantized())) {
    arena().reset();
    if (stream_gemv_ &&
        kc::launch_linear_grouped(md(x), wd(w), groups, md(y), opts.round_bf16, stream_)) {
      return;
    }
    if (matmul_grouped(x, w, groups, y, opts)) return;
  }
  Ops::linear_grouped(x, w, groups, y, opts);
}

void CudaOps::rms_norm(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) {
  rms_norm_impl(x, w, eps, group, y, false);
}
void CudaOps::rms_norm_rounded(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) {
  rms_norm_impl(x, w, eps, group, y, true);
}
void CudaOps::rms_norm_impl(CMat x, const WeightRef* w, float eps, int64_t group, Mat y,
                            bool round_out) {
  const int64_t g = group > 0 ? group : x.cols;
  DI_CHECK(x.cols % g == 0 && y.rows == x.rows && y.cols == x.cols);
  DI_CHECK(w == nullptr || (!w->quantized() && w->n * w->k == g));
  if (w) {
    const kc::WeightDesc d = wd(*w);
    kc::launch_rms_norm(md(x), &d, eps, group, md(y), round_out, stream_);
  } else {
    kc::launch_rms_norm(md(x), nullptr, eps, group, md(y), round_out, stream_);
  }
}

void CudaOps::round_bf16(Mat x) { kc::launch_round_bf16(md(x), stream_); }

void CudaOps::add(CMat a, CMat b, Mat out) {
  DI_CHECK(b.cols == a.cols && (b.rows == a.rows || b.rows == 1) && out.rows == a.rows &&
           out.cols == a.cols);
  kc::launch_add(md(a), md(b), md(out), stream_);
}
void CudaOps::add_streams(CMat b, int64_t streams, bool round, Mat X) {
  DI_CHECK(streams >= 1 && X.rows == b.rows && X.cols == streams * b.cols);
  kc::launch_add_streams(md(b), streams, round, md(X), stream_);
}

void CudaOps::scale(Mat x, float s) { kc::launch_scale(md(x), s, stream_); }

void CudaOps::copy_rows(CMat src, const int32_t* rows, Mat dst) {
  DI_CHECK(src.cols == dst.cols);
  DI_CHECK(rows != nullptr || dst.rows <= src.rows);
  arena().reset();
  kc::launch_copy_rows(md(src), on_device(rows, dst.rows), md(dst), stream_);
}

void CudaOps::rope(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                   std::span<const float> freqs, bool inverse) {
  rope_impl(x, n_heads, head_dim, positions, freqs, inverse, false);
}
void CudaOps::rope_rounded(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                           std::span<const float> freqs, bool inverse) {
  rope_impl(x, n_heads, head_dim, positions, freqs, inverse, true);
}
void CudaOps::rope_impl(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                        std::span<const float> freqs, bool inverse, bool round_out) {
  const int64_t nf = static_cast<int64_t>(freqs.size());
  DI_CHECK(x.cols == n_heads * head_dim && 2 * nf <= head_dim);
  arena().reset();
  kc::launch_rope(md(x), n_heads, head_dim, on_device(positions, x.rows),
                  on_device(freqs.data(), nf), nf, inverse, round_out, stream_);
}

void CudaOps::kv_rows_finish(Mat x, const WeightRef& w, float eps, const int32_t* positions,
                             std::span<const float> freqs, bool rounded, int64_t quant_cols,
                             int64_t quant_block) {
  const auto nf = static_cast<int64_t>(freqs.size());
  if (x.rows == 0) return;
  if (!fused_small_ops_ || w.quantized() || w.n * w.k != x.cols || quant_block <= 0 ||
      !kc::kv_rows_finish_supported(md(x), nf, quant_cols)) {
    Ops::kv_rows_finish(x, w, eps, positions, freqs, rounded, quant_cols, quant_block);
    return;
  }
  arena().reset();
  kc::launch_kv_rows_finish(md(x), wd(w), eps, on_device(positions, x.rows),
                            on_device(freqs.data(), nf), nf, rounded, quant_cols, quant_block,
                            stream_);
}

void CudaOps::q_heads_finish(Mat q, int64_t n_heads, int64_t head_dim, float eps,
                             const int32_t* positions, std::span<const float> freqs,
                             bool official) {
  const auto nf = static_cast<int64_t>(freqs.size());
  if (q.rows == 0 || n_heads == 0) return;
  if (!fused_small_ops_ || !official || q.cols != n_heads * head_dim || head_dim % 2 != 0 ||
      2 * nf > head_dim) {
    Ops::q_heads_finish(q, n_heads, head_dim, eps, positions, freqs, official);
    return;
  }
  arena().reset();
  kc::launch_q_heads_finish(md(q), n_heads, head_dim, eps, on_device(positions, q.rows),
                            on_device(freqs.data(), nf), nf, stream_);
}

namespace {
kc::HcDesc hc_desc(const HcParams& p, const float* base, const float* scale, int dot_tokens) {
  kc::HcDesc d;
  d.dot_tokens = dot_tokens;
  d.n = p.n;
  d.fn = md(p.fn);
  d.base = base;
  d.scale = scale;
  d.norm_eps = p.norm_eps;
  d.hc_eps = p.hc_eps;
  d.sinkhorn_iters = p.sinkhorn_iters;
  return d;
}
}  // namespace

void CudaOps::hc_pre(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre, Mat post,
                     Mat comb) {
  hc_pre_impl(streams, p, collapse_pre, y, pre, post, comb, false);
}
void CudaOps::hc_pre_rounded(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre,
                             Mat post, Mat comb) {
  hc_pre_impl(streams, p, collapse_pre, y, pre, post, comb, true);
}
void CudaOps::hc_pre_impl(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre,
                          Mat post, Mat comb, bool round_y, const WeightRef* norm, float eps,
                          Mat u) {
  const int n = p.n;
  DI_CHECK(collapse_pre.data == nullptr ||
           (collapse_pre.cols == n && collapse_pre.rows == streams.rows));
  DI_CHECK(pre.data == nullptr || (pre.cols == n && pre.rows == streams.rows));
  DI_CHECK(n >= 1 && n <= kc::kMaxHcStreams);
  const int64_t D = streams.cols / n;
  DI_CHECK(streams.cols == n * D && y.cols == D && post.cols == n && comb.cols == n * n);
  DI_CHECK(p.fn.cols == n * D && p.fn.rows >= (2 + n) * n);
  arena().reset();
  const kc::HcDesc d =
      hc_desc(p, on_device(p.base, (2 + n) * n), on_device(p.scale, 3), hc_dot_tokens_);
  const CMat fn = p.fn.rows_slice(0, (2 + n) * n);
  // The GEMM writes each dot once; hc_dots_kernel one partial sum per chunk of the stream values.
  const bool dots_ready = hc_dots_by_gemm(streams, fn);
  const int64_t per_dot = dots_ready ? 1 : kc::hc_dot_chunks(streams.cols);
  float* dots = arena().alloc_n<float>(streams.rows * ((2 + n) * n + 1) * per_dot);
  if (dots_ready) hc_dots_gemm(streams, fn, (2 + n) * n, dots);
  if (norm != nullptr) {
    kc::launch_hc_pre_norm(md(streams), d, md(collapse_pre), md(y), md(pre), md(post), md(comb),
                           dots, dots_ready, round_y, wd(*norm), eps, md(u), stream_);
  } else {
    kc::launch_hc_pre(md(streams), d, md(collapse_pre), md(y), md(pre), md(post), md(comb), dots,
                      dots_ready, round_y, stream_);
  }
}

void CudaOps::hc_pre_norm(CMat streams, const HcParams& p, CMat collapse_pre, const WeightRef& w,
                          float eps, bool rounded, Mat y, Mat pre, Mat post, Mat comb, Mat u) {
  if (!fused_small_ops_ || w.quantized() || w.n * w.k != y.cols || u.rows != y.rows ||
      u.cols != y.cols) {
    Ops::hc_pre_norm(streams, p, collapse_pre, w, eps, rounded, y, pre, post, comb, u);
    return;
  }
  hc_pre_impl(streams, p, collapse_pre, y, pre, post, comb, rounded, &w, eps, u);
}

void CudaOps::hc_post(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) {
  hc_post_impl(streams, o, post, comb, n, out, false);
}
void CudaOps::hc_post_rounded(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) {
  hc_post_impl(streams, o, post, comb, n, out, true);
}
void CudaOps::hc_post_impl(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out,
                           bool round_out) {
  DI_CHECK(n >= 1 && n <= kc::kMaxHcStreams);
  const int64_t D = o.cols;
  DI_CHECK(streams.cols == n * D && out.cols == n * D && post.cols == n && comb.cols == n * n);
  kc::launch_hc_post(md(streams), md(o), md(post), md(comb), n, md(out), round_out, stream_);
}

void CudaOps::hc_head(CMat streams, const HcParams& p, Mat y) {
  hc_head_impl(streams, p, y, false);
}
void CudaOps::hc_head_rounded(CMat streams, const HcParams& p, Mat y) {
  hc_head_impl(streams, p, y, true);
}
void CudaOps::hc_head_impl(CMat streams, const HcParams& p, Mat y, bool round_y) {
  const int n = p.n;
  DI_CHECK(n >= 1 && n <= kc::kMaxHcStreams);
  const int64_t D = streams.cols / n;
  DI_CHECK(y.cols == D && p.fn.cols == n * D && p.fn.rows >= n);
  arena().reset();
  const kc::HcDesc d = hc_desc(p, on_device(p.base, n), on_device(p.scale, 1), hc_dot_tokens_);
  float* dots = arena().alloc_n<float>(streams.rows * (n + 1) * kc::hc_dot_chunks(streams.cols));
  // Its n logits stay on hc_dots_kernel: at n = 4 the GEMM lost to that kernel's earlier form at
  // 256 rows (0.122 vs 0.059 ms, decode_bench --profile,
  // bench/results/model_cuda_h200_2026-12-03_stop31*.log).
  kc::launch_hc_head(md(streams), d, md(y), dots, round_y, stream_);
}

void CudaOps::sparse_attention(CMat q, int64_t n_heads, CMat kv, const int32_t* idx, int64_t L,
                               const float* sink, float scale, bool bf16_probs, Mat o) {
  arena().reset();
  kc::SparseKeys keys;
  keys.kv = md(kv);
  keys.idx = on_device(idx, q.rows * L);
  keys.d = kv.cols;
  launch_sparse(q, n_heads, keys, L, sink, scale, bf16_probs, o, false);
}

void CudaOps::sparse_attention_rows(CMat q, int64_t n_heads, const float* const* key_rows,
                                    int64_t L, int64_t d, const float* sink, float scale,
                                    bool bf16_probs, Mat o) {
  sparse_attention_rows_impl(q, n_heads, key_rows, L, d, sink, scale, bf16_probs, o, false);
}
void CudaOps::sparse_attention_rows_rounded(CMat q, int64_t n_heads, const float* const* key_rows,
                                            int64_t L, int64_t d, const float* sink, float scale,
                                            bool bf16_probs, Mat o) {
  sparse_attention_rows_impl(q, n_heads, key_rows, L, d, sink, scale, bf16_probs, o, true);
}
void CudaOps::sparse_attention_rows_impl(CMat q, int64_t n_heads, const float* const* key_rows,
                                         int64_t L, int64_t d, const float* sink, float scale,
                                         bool bf16_probs, Mat o, bool round_out) {
  arena().reset();
  kc::SparseKeys keys;
  keys.rows = on_device(key_rows, q.rows * L);
  keys.d = d;
  launch_sparse(q, n_heads, keys, L, sink, scale, bf16_probs, o, round_out);
}

void CudaOps::launch_sparse(CMat q, int64_t n_heads, const kc::SparseKeys& keys, int64_t L,
                            const float* sink, float scale, bool bf16_probs, Mat o,
                            bool round_out) {
  const int64_t d = keys.d;
  DI_CHECK(q.cols == n_heads * d && o.rows == q.rows && o.cols == q.cols);
  DI_CHECK(d <= 512 && L <= kc::kMaxSparseKeys);
  const float* dsink = on_device(sink, n_heads);
  // Official semantics (BF16 probabilities; queries and keys BF16 numbers): the tensor-core
  // kernels, outside batch-invariant mode (their sums are associated differently from the group
  // kernel's, which batch-invariant mode keeps for every row count, decode included).
  const bool tensor_cores = bf16_probs && sparse_mma_ && !batch_invariant_;
  // 32 heads and more (V4's 64) with rows too few to fill the card (decode at small batch):
  // the staged kernel's keys split across blocks, when set_sparse_staged_split is on (off by
  // default until its first GPU run; then the SIMT split below serves them).
  const int64_t staged_split =
      tensor_cores && sparse_staged_ && sparse_staged_split_ && sparse_split_
          ? kc::sparse_attention_staged_split_scratch(q.rows, n_heads, keys, L)
          : 0;
  if (staged_split > 0 && kc::launch_sparse_attention_staged_split(
                              md(q), n_heads, keys, L, dsink, scale, md(o), round_out,
                              arena().alloc_n<float>(staged_split), stream_)) {
    return;
  }
  // Few rows otherwise (fewer heads, FP32 probabilities): the SIMT kernel's keys split across
  // blocks, except in batch-invariant mode (the split changes the P·V sums' association with
  // the row count).
  const int64_t split =
      batch_invariant_ || !sparse_split_ ? 0
                                         : kc::sparse_attention_split_scratch(q.rows, n_heads, L, d);
  if (split > 0 &&
      kc::launch_sparse_attention_split(md(q), n_heads, keys, L, dsink, scale, bf16_probs, md(o),
                                        round_out, arena().alloc_n<float>(split), stream_)) {
    return;
  }
  // The tensor-core kernels: 64 heads a block from 32 heads, else 16.
  if (tensor_cores &&
      ((sparse_staged_ && kc::launch_sparse_attention_staged(md(q), n_heads, keys, L, dsink,
                                                             scale, md(o), round_out, stream_)) ||
       kc::launch_sparse_attention_mma(md(q), n_heads, keys, L, dsink, scale, md(o), round_out,
                                       stream_))) {
    return;
  }
  kc::launch_sparse_attention(md(q), n_heads, keys, L, dsink, scale, bf16_probs, md(o), round_out,
                              stream_);
}

const kc::PagedDesc* CudaOps::stage_paged(std::span<const PagedCMat> mats, int64_t cols) {
  // Every distinct page table once (consecutive rows of a sequence share one), then a
  // descriptor per row pointing into the staged copy.
  std::vector<const float*>& pages = row_key_pages_;
  std::vector<kc::PagedDesc>& table = row_key_table_;
  pages.clear();
  table.resize(mats.size());
  std::vector<int64_t> offset(mats.size());
  for (size_t t = 0; t < mats.size(); ++t) {
    const PagedCMat& k = mats[t];
    DI_CHECK(k.rows == 0 || (k.cols == cols && k.page_rows > 0));
    if (t > 0 && k.pages == mats[t - 1].pages && k.rows == mats[t - 1].rows) {
      offset[t] = offset[t - 1];
      continue;
    }
    offset[t] = static_cast<int64_t>(pages.size());
    pages.insert(pages.end(), k.pages, k.pages + k.num_pages());
  }
  if (pages.empty()) pages.push_back(nullptr);  // every row sees no row: a valid empty table
  auto* dpages =
      static_cast<const float* const*>(stage(pages.data(), pages.size() * sizeof(const float*)));
  for (size_t t = 0; t < mats.size(); ++t) {
    table[t] = {dpages + offset[t], mats[t].rows, cols, std::max<int64_t>(1, mats[t].page_rows)};
  }
  return static_cast<kc::PagedDesc*>(stage(table.data(), table.size() * sizeof(kc::PagedDesc)));
}

void CudaOps::paged_row_addresses(const int32_t* sel, int64_t K, std::span<const PagedCMat> rows,
                                  const float** out, int64_t ld) {
  const int64_t M = static_cast<int64_t>(rows.size());
  if (M == 0 || K == 0) return;
  DI_CHECK(is_device_pointer(out) && ld >= K);
  arena().reset();
  const int64_t cols = rows[0].cols;
  const kc::PagedDesc* table = stage_paged(rows, cols);
  kc::launch_paged_row_addresses(on_device(sel, M * K), M, K, table, out, ld, stream_);
}

void CudaOps::softmax_pool(std::span<const PoolSlot> slots, int64_t slots_per_row, Mat out) {
  DI_CHECK(slots_per_row > 0 && static_cast<int64_t>(slots.size()) == out.rows * slots_per_row);
  arena().reset();
  std::vector<kc::PoolSlotDev> host(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) host[i] = {slots[i].value, slots[i].gate};
  auto* dev =
      static_cast<kc::PoolSlotDev*>(stage(host.data(), host.size() * sizeof(kc::PoolSlotDev)));
  kc::launch_softmax_pool(dev, slots_per_row, md(out), stream_);
}

void CudaOps::scatter_rows(std::span<const float* const> src, std::span<float* const> dst,
                           int64_t cols) {
  DI_CHECK(src.size() == dst.size() && cols >= 0);
  if (src.empty() || cols == 0) return;
  arena().reset();
  const int64_t n = static_cast<int64_t>(src.size());
  // One staged table: the n sources, then the n destinations.
  std::vector<const void*>& table = scatter_table_;
  table.assign(src.begin(), src.end());
  table.insert(table.end(), dst.begin(), dst.end());
  auto** d = static_cast<float**>(stage(table.data(), table.size() * sizeof(const void*)));
  kc::launch_scatter_rows(d, d + n, n, cols, stream_);
}

void CudaOps::rms_norm_bf16(Mat x, int64_t group, float eps) {
  DI_CHECK(group > 0 && x.cols % group == 0);
  kc::launch_rms_norm_bf16(md(x), group, eps, stream_);
}

void CudaOps::hadamard(Mat x, int64_t n) {
  DI_CHECK(n > 0 && (n & (n - 1)) == 0 && n <= 1024 && x.cols % n == 0);
  if (n == 128) {
    hadamard128(x);
    return;
  }
  kc::launch_hadamard(md(x), n, 1.0f / std::sqrt(static_cast<float>(n)), stream_);
}

void CudaOps::hadamard128(Mat x) {
  DI_CHECK(x.cols % 128 == 0);
  kc::launch_hadamard128(md(x), stream_);
}

void CudaOps::fake_quant_fp8(Mat x, int64_t n, int64_t block) {
  DI_CHECK(n <= x.cols && block > 0);
  kc::launch_fake_quant_fp8(md(x), n, block, stream_);
}

void CudaOps::act_quant_fp8(Mat x, int64_t block) { fake_quant_fp8(x, x.cols, block); }

void CudaOps::fake_quant_fp4(Mat x, int64_t block) {
  DI_CHECK(block > 0);
  kc::launch_fake_quant_fp4(md(x), block, stream_);
}

void CudaOps::indexer_scores(CMat q, int64_t n_heads, CMat weights, CMat keys,
                             const int32_t* visible, bool bf16_rounding, Mat scores) {
  const int64_t di = keys.cols;
  DI_CHECK(q.cols == n_heads * di && weights.cols == n_heads && scores.cols == keys.rows &&
           scores.rows == q.rows);
  DI_CHECK(di <= 256 && (n_heads * di + n_heads) * 4 <= 160 * 1024);
  arena().reset();
  kc::launch_indexer_scores(md(q), n_heads, md(weights), md(keys), on_device(visible, q.rows),
                            bf16_rounding, md(scores), stream_);
}

void CudaOps::indexer_scores_multi(CMat q, int64_t n_heads, CMat weights,
                                   std::span<const PagedCMat> keys, const int32_t* visible,
                                   bool bf16_rounding, Mat scores) {
  DI_CHECK(static_cast<int64_t>(keys.size()) == q.rows && weights.rows == q.rows &&
           scores.rows == q.rows && weights.cols == n_heads && q.cols % n_heads == 0);
  const int64_t di = q.cols / n_heads;
  DI_CHECK(di <= 256 && (n_heads * di + n_heads) * 4 <= 160 * 1024);
  if (q.rows == 0) return;
  arena().reset();
  for (const PagedCMat& k : keys) DI_CHECK(k.rows <= scores.cols);
  const kc::PagedDesc* d = stage_paged(keys, di);
  const int32_t* dvis = on_device(visible, q.rows);
  // Official semantics (BF16 rounding points; queries and keys BF16 numbers) with runs of rows
  // that share a key matrix (prefill chunks), outside batch-invariant mode: the tensor-core
  // kernel over tiles of each run, when runs hold 64 rows or more (decode rows are runs of one).
  if (bf16_rounding && di == 128 && indexer_mma_ && !batch_invariant_) {
    std::vector<kc::IndexerTile>& tiles = indexer_tiles_;
    tiles.clear();
    int64_t in_runs = 0;
    for (int64_t t = 0; t < q.rows;) {
      const PagedCMat& k = keys[static_cast<size_t>(t)];
      int64_t u = t + 1;
      while (u < q.rows && keys[static_cast<size_t>(u)].pages == k.pages &&
             keys[static_cast<size_t>(u)].rows == k.rows &&
             keys[static_cast<size_t>(u)].page_rows == k.page_rows) {
        ++u;
      }
      for (int64_t r0 = t; k.rows > 0 && r0 < u; r0 += kc::kIndexerMmaTileRows) {
        tiles.push_back({r0, static_cast<int>(std::min<int64_t>(kc::kIndexerMmaTileRows, u - r0))});
      }
      if (u - t > 1) in_runs += u - t;
      t = u;
    }
    if (in_runs >= kc::kIndexerMmaTileRows) {
      const auto* dt = static_cast<const kc::IndexerTile*>(
          stage(tiles.data(), tiles.size() * sizeof(kc::IndexerTile)));
      if (kc::launch_indexer_scores_mma(md(q), n_heads, md(weights), d, dt,
                                        static_cast<int64_t>(tiles.size()), scores.cols, dvis,
                                        md(scores), stream_)) {
        return;
      }
    }
  }
  kc::launch_indexer_scores_multi(md(q), n_heads, md(weights), d, di, dvis, bf16_rounding,
                                  md(scores), stream_);
}

void CudaOps::topk(CMat scores, const int32_t* visible, int64_t k, int32_t* out) {
  arena().reset();
  const int32_t* vis = on_device(visible, scores.rows);
  if (is_device_pointer(out)) {
    kc::launch_topk(md(scores), vis, k, out, stream_);
    return;
  }
  int32_t* dev = arena().alloc_n<int32_t>(scores.rows * k);
  kc::launch_topk(md(scores), vis, k, dev, stream_);
  store_ints(dev, out, scores.rows * k);
}

void CudaOps::moe_route_score(CMat x, const WeightRef& gate, const float* bias, int top_k,
                              float route_scale, const RouteOpts& opts, int32_t* ids, Mat weights) {
  DI_CHECK(x.cols == gate.k && weights.cols == top_k && top_k <= gate.n);
  DI_CHECK(gate.n <= 1024 && top_k <= 32);
  arena().reset();
  Mat z(arena().alloc_n<float>(x.rows * gate.n), x.rows, gate.n);
  linear_impl(x, gate, z, false, 128);
  const float* b = on_device(bias, gate.n);
  const bool dev = is_device_pointer(ids);
  int32_t* dids = dev ? ids : arena().alloc_n<int32_t>(x.rows * top_k);
  const kc::RouteOptsDev o{opts.temperature, opts.normalize, opts.norm_floor};
  kc::launch_moe_route_topk(md(z), b, top_k, route_scale, o, dids, md(weights), stream_);
  if (!dev) store_ints(dids, ids, x.rows * top_k);
}

void CudaOps::moe_route_hash(CMat x, const int32_t* token_ids, const TensorView& tid2eid,
                             const WeightRef& gate, float route_scale, int32_t* ids, Mat weights) {
  DI_CHECK(tid2eid.rank() == 2 && (tid2eid.dtype == DType::kI32 || tid2eid.dtype == DType::kI64));
  const int k = static_cast<int>(tid2eid.shape[1]);
  DI_CHECK(weights.cols == k && x.cols == gate.k && gate.n <= 1024);
  arena().reset();
  const void* table = tid2eid.data;
  if (tid2eid.device != DeviceKind::kCuda && !is_device_pointer(table)) {
    table = stage(table, static_cast<size_t>(tid2eid.nbytes()));
  }
  const bool dev = is_device_pointer(ids);
  int32_t* dids = dev ? ids : arena().alloc_n<int32_t>(x.rows * k);
  kc::launch_moe_hash_ids(on_device(token_ids, x.rows), x.rows, table, tid2eid.dtype == DType::kI64,
                          k, dids, stream_);
  Mat z(arena().alloc_n<float>(x.rows * gate.n), x.rows, gate.n);
  linear_impl(x, gate, z, false, 128);
  kc::launch_moe_route_weights(md(z), dids, k, route_scale, md(weights), stream_);
  if (!dev) store_ints(dids, ids, x.rows * k);
}

static_assert(kc::kSampleNoTokenDev == kSampleNoToken &&
                  kc::kSampleNonFiniteDev == kSampleNonFinite,
              "the sampling kernel's codes are Ops::sample's");

void CudaOps::sample(CMat logits, std::span<const SampleSpec> specs, int32_t* tokens) {
  DI_CHECK(static_cast<int64_t>(specs.size()) == logits.rows);
  if (logits.rows == 0) return;
  arena().reset();
  std::vector<kc::SampleSpecDev> dev(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const SampleSpec& s = specs[i];
    dev[i] = {s.greedy ? 1 : 0, s.temperature, s.min_p, s.log_min_p, s.top_k, s.top_p, s.u};
  }
  const auto* dspecs =
      static_cast<const kc::SampleSpecDev*>(stage(dev.data(), dev.size() * sizeof(dev[0])));
  void* scratch =
      arena().alloc(static_cast<size_t>(kc::sample_scratch_bytes(logits.rows, logits.cols)));
  int32_t* dtok = arena().alloc_n<int32_t>(logits.rows);
  kc::launch_sample(md(logits), dspecs, scratch, dtok, sample_cluster_, stream_);
  store_ints(dtok, tokens, logits.rows);
}

void CudaOps::argmax_rows(CMat logits, int32_t* tokens, int32_t* ids, float* probs) {
  if (logits.rows == 0) return;
  kc::launch_argmax_rows(md(logits), tokens, ids, probs, stream_);
}

void CudaOps::swiglu(CMat a, CMat b, float limit, Mat out) {
  DI_CHECK(a.rows == b.rows && a.cols == b.cols && out.rows == a.rows && out.cols == a.cols);
  kc::launch_swiglu(md(a), md(b), limit, md(out), stream_);
}

}  // namespace deepinfer::backend::cuda
