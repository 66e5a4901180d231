// CudaOps: the op contract (backend/ops.h) on an NVIDIA GPU (sm_90a Hopper, sm_100a Blackwell).
//
// Operand rules (docs/cuda_backend.md):
//  * Mat/CMat data, HcParams::fn and weights (WeightRef views) are DEVICE memory: upload weights
//    once with upload_weight (they stay FP8/FP4/BF16 on the GPU) and allocate activations with
//    cudaMalloc / DeviceBuffer.
//  * Integer inputs (ids, positions, idx, visible, token_ids, rows), small float parameter arrays
//    (rope freqs, sink, router bias, HcParams::base/scale), the PoolSlot table and tid2eid may be
//    host OR device memory: host arrays are copied into the op's scratch on the op's stream
//    (is_device_pointer decides), device arrays are used in place. The plan/run split will hand
//    device arrays prepared before the step, so decode steps stay graph-capturable.
//  * Integer outputs (topk out, router ids) follow the pointer: written in place when device
//    memory, else copied back to the host array and the stream synchronised.
//  * Every op enqueues on stream() and returns without waiting (except the host-output and
//    moe_experts id grouping cases above). The stream is a blocking stream, so legacy
//    default-stream copies (cudaMemcpy) order after the ops.
// Shape limits beyond the contract (checked with DI_CHECK, listed in docs/cuda_backend.md):
// attention head dim <= 512 and L <= 8192; indexer head dim <= 256; mHC n <= 8; <= 1024
// experts and top_k <= 32 in routing.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cublaslt_fp8.h"
#include "backend/cuda/device.h"
#include "backend/ops.h"
#include "kernels/cuda/launch.h"

struct cublasContext;  // cuBLAS' handle type, kept out of this header

namespace deepinfer::backend::cuda {

// A weight the tensor-core grouped stages read in place (moe/grouped_mma.cu): FP4 / FP8 codes
// with E8M0 scales, K % 128 == 0, rows % 16 == 0, block_k a power of two (a shift per pass).
bool mma_stage_weight(const WeightRef& w);

class CudaOps : public Ops {
 public:
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  // Fails (never aborts) when there is no usable GPU: see cuda_available().
  // batch_invariant (DEEPINFER_BATCH_INVARIANT): every op computes a row the same way whatever
  // the number of rows, so a request's bits never depend on its batch: linear always on the
  // tiled kernel (no GEMV / cuBLAS switch by M), MoE always grouped. Slower at small M.
  // graph_max_rows (DEEPINFER_CUDA_GRAPH_MAX_ROWS): run_recorded records CUDA graphs of units of
  // at most this many rows; 0 = never (every op eager).
  static Expected<std::unique_ptr<CudaOps>> create(int device = 0, bool batch_invariant = false,
                                                   int64_t graph_max_rows = 0);
  bool batch_invariant() const { return batch_invariant_; }
  void bind_thread() override;

  // Recorded replay (cuda_graphs.cc). A key's first run is eager on the graph arena (its scratch
  // settles), the second is captured into a CUDA graph, later runs launch the graph. A capture
  // that meets a host staging, a synchronisation or an allocation is refused: that key runs
  // eagerly from then on (warned once, counted in record_stats).
  int64_t record_max_rows() const override { return graph_max_rows_; }
  void run_recorded(uint64_t key, const std::function<void()>& body) override;
  void drop_recordings() override;
  // Off: run_recorded runs every unit eagerly (record_max_rows unchanged, so the model keeps
  // the same padded step form): the A/B of benchmarks and the bitwise check of replays.
  void set_replay(bool on) { replay_ = on; }
  // Quantized linears of act-quantized rows that the FP8 GEMM does not take take the
  // tensor-core stage of the grouped MoE (FP8/FP4 codes read in place, cuda_gemm.cc) for
  // 5 <= M <= min(this, 32 or 64 by the weight's width) rows (0: never; then M <= 16 runs the
  // rows GEMV and more rows cuBLAS on a dequantized copy): the benchmarks' A/B.
  void set_linear_mma_max_rows(int64_t rows) { linear_mma_max_rows_ = rows; }
  // The fewest rows that take that stage (one row stays on the decode GEMV): benchmark A/B.
  void set_linear_mma_min_rows(int64_t rows) { linear_mma_min_rows_ = rows; }
  // Rows from which act-quantized FP8 linears take the block-scaled FP8 GEMM (cuBLASLt) instead
  // of cuBLAS on a dequantised BF16 copy (cuda_gemm.cc); large: never (benchmark A/B).
  void set_fp8_gemm_min_rows(int64_t rows) { fp8_gemm_min_rows_ = rows; }
  // Tiles of 8 pairs per weight decode in the grouped tensor-core stages: 0 chooses by pairs
  // per expert (8 = the wide form from 16 on average, else 1), 1, 4 or 8 force one (benchmark
  // A/B; the bits are the same).
  void set_moe_pair_tiles(int tiles) { moe_pair_tiles_ = tiles; }
  // Off: 1-4 rows on FP8/FP4 weights take the thread-group GEMV instead of the streaming one
  // (kernels/cuda/gemm/gemv_stream.cu): the benchmarks' A/B.
  void set_stream_gemv(bool on) { stream_gemv_ = on; }
  // On: that GEMV quantizes x itself (launch_linear_quantized) instead of reading an
  // act-quantized copy made by a launch of its own: one launch fewer per such linear, the same
  // bits, but slower (its per-block scale prologue costs more than the launch it saves:
  // docs/cuda_backend.md), so off by default; the benchmarks' A/B and the harness's check.
  void set_fused_act_quant(bool on) { fused_act_quant_ = on; }
  // Off: ops a kernel of this library does in one pass where their defaults take several
  // (kv_rows_finish: norm, RoPE and FP8 round trip; q_heads_finish: per-head norm and RoPE;
  // hc_pre_norm: mHC pre-mix and norm) run as those several ops, with the same bits: the
  // benchmarks' A/B of the launches fused away (issue 19's launch count). The op harness
  // compares each fused op with its separate ops on the same backend, bit for bit.
  void set_fused_small_ops(bool on) { fused_small_ops_ = on; }
  // Off: linear_grouped runs one linear per group (Ops' default) instead of its one-launch GEMV
  // and strided-batched GEMM: the benchmarks' A/B (--ungrouped-linear).
  void set_grouped_linear(bool on) { grouped_linear_ = on; }
  // Off: sparse attention with BF16 probabilities (official semantics) stays on the SIMT group
  // kernel instead of the tensor-core one (kernels/cuda/attention/sparse_attention_mma.cu): the
  // benchmarks' A/B.
  void set_sparse_mma(bool on) { sparse_mma_ = on; }
  // Whether 32+ heads take the staged 64-head tensor-core kernel (default; few rows: its
  // split-key form) or what ran before it (the 16-head kernel; few rows: the SIMT split): the
  // A/B of the perf harness's "16-head blocks" line and of --sparse-16-head.
  void set_sparse_staged(bool on) { sparse_staged_ = on; }
  // On: few rows of 32+ heads (decode at small batch) split their keys on the staged kernel
  // (launch_sparse_attention_staged_split) instead of the SIMT kernel
  // (launch_sparse_attention_split). Off by default until its first GPU run (written in stop
  // 47 while no GPU was lent): ops_cuda_test runs the staged op case again with it on
  // ("sparse_attention_staged_split_cuda"); the perf harness's "staged split" line and
  // --staged-sparse-split are its A/B.
  void set_sparse_staged_split(bool on) { sparse_staged_split_ = on; }
  // Off: few rows skip the split-key forms (the staged kernel's, or
  // launch_sparse_attention_split's) and take the kernel they would take with many: the perf
  // harness's "no split" line, the split's crossover.
  void set_sparse_split(bool on) { sparse_split_ = on; }
  // Off: indexer_scores_multi with the BF16 rounding points stays on the SIMT kernel instead of
  // the tensor-core one for runs of rows sharing keys (kernels/cuda/indexer/indexer_mma.cu).
  void set_indexer_mma(bool on) { indexer_mma_ = on; }
  // Rows from which mHC's logits are one cuBLAS FP32 GEMM per site (hc_dots_gemm) instead of
  // hc_dots_kernel's partial sums; large: never (benchmark A/B).
  void set_hc_gemm_min_rows(int64_t rows) { hc_gemm_min_rows_ = rows; }
  // Tokens per block of mHC's logit partial sums (kernels/cuda/hc/hc.cu); 0 (default): the
  // kernel's rule (~1,024 blocks). The same bits either way: the benchmarks' A/B.
  void set_hc_dot_tokens(int tokens) { hc_dot_tokens_ = tokens; }
  // Blocks per sampled row (kernels/cuda/sample/sample.cu: 1, 2, 4 or 8); 0 (default): the
  // kernel's rule. The same tokens either way: the benchmarks' A/B (1 = one block per row).
  void set_sample_cluster(int blocks) { sample_cluster_ = blocks; }
  // Which forms of the block-scaled FP8 GEMM cuBLASLt takes at this shape (cublaslt_fp8.h probe).
  std::string fp8_gemm_probe(int64_t M, int64_t N, int64_t K) {
    return fp8_gemm_ ? fp8_gemm_->probe(M, N, K, cublas_workspace_.data(), cublas_workspace_.size())
                     : "no cuBLASLt";
  }
  struct RecordStats : RecordingCounts {
    std::string last_refusal;  // why the last refused capture was refused
  };
  const RecordStats& record_stats() const { return record_stats_; }
  int64_t recording_setups() const override { return record_stats_.setups; }
  RecordingCounts recording_counts() const override { return record_stats_; }

  const char* name() const override { return "cuda"; }
  bool supports(Feature f) const override;
  cudaStream_t stream() const { return stream_; }

  void embed(const int32_t* ids, int64_t n, const WeightRef& table, Mat out) override;
  void embed_streams(const int32_t* ids, int64_t n, const WeightRef& table, int64_t streams,
                     bool round, Mat X) override;
  void linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& opts) override;
  // One launch of the decode GEMV for 1-4 rows (its form picked for the whole weight), one
  // dequantisation and one strided-batched cuBLAS GEMM from 17 rows on BF16 numbers (x_bf16);
  // act-quantized groups, batch-invariant mode and other shapes loop over linear.
  void linear_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y,
                      const LinearOpts& opts) override;
  void rms_norm(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) override;
  void rms_norm_rounded(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) override;
  void round_bf16(Mat x) override;
  void add(CMat a, CMat b, Mat out) override;
  void add_streams(CMat b, int64_t streams, bool round, Mat X) override;
  void scale(Mat x, float s) override;
  void copy_rows(CMat src, const int32_t* rows, Mat dst) override;
  void hc_pre_norm(CMat streams, const HcParams& p, CMat collapse_pre, const WeightRef& w,
                   float eps, bool rounded, Mat y, Mat pre, Mat post, Mat comb, Mat u) override;
  void kv_rows_finish(Mat x, const WeightRef& w, float eps, const int32_t* positions,
                      std::span<const float> freqs, bool rounded, int64_t quant_cols,
                      int64_t quant_block) override;
  void q_heads_finish(Mat q, int64_t n_heads, int64_t head_dim, float eps, const int32_t* positions,
                      std::span<const float> freqs, bool official) override;
  void rope_rounded(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                    std::span<const float> freqs, bool inverse) override;
  void rope(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
            std::span<const float> freqs, bool inverse) override;
  void hc_pre(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre, Mat post,
              Mat comb) override;
  void hc_post(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) override;
  void hc_post_rounded(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) override;
  void hc_pre_rounded(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre, Mat post,
                      Mat comb) override;
  void hc_head(CMat streams, const HcParams& p, Mat y) override;
  void hc_head_rounded(CMat streams, const HcParams& p, Mat y) override;
  void sparse_attention(CMat q, int64_t n_heads, CMat kv, const int32_t* idx, int64_t L,
                        const float* sink, float scale, bool bf16_probs, Mat o) override;
  void softmax_pool(std::span<const PoolSlot> slots, int64_t slots_per_row, Mat out) override;
  void hadamard128(Mat x) override;
  void fake_quant_fp8(Mat x, int64_t n, int64_t block) override;
  void act_quant_fp8(Mat x, int64_t block) override;
  void fake_quant_fp4(Mat x, int64_t block) override;
  // V4.1 (cuda_ops_v41.cc).
  void hc_collapse(CMat streams, CMat pre, int n, Mat y) override;
  void fake_quant_nvfp4(Mat x, int64_t block) override;
  void candidate_blocks(CMat scores, const int32_t* visible, int64_t block_size, int64_t n_blocks,
                        int32_t* out) override;
  void restrict_to_blocks(Mat scores, const int32_t* visible, const int32_t* blocks,
                          int64_t n_blocks, int64_t block_size) override;
  void engram_gate(Mat streams, CMat kv, CMat w, int n, float eps) override;
  void indexer_scores(CMat q, int64_t n_heads, CMat weights, CMat keys, const int32_t* visible,
                      bool bf16_rounding, Mat scores) override;
  void sparse_attention_rows(CMat q, int64_t n_heads, const float* const* key_rows, int64_t L,
                             int64_t d, const float* sink, float scale, bool bf16_probs,
                             Mat o) override;
  void sparse_attention_rows_rounded(CMat q, int64_t n_heads, const float* const* key_rows,
                                     int64_t L, int64_t d, const float* sink, float scale,
                                     bool bf16_probs, Mat o) override;
  void paged_row_addresses(const int32_t* sel, int64_t K, std::span<const PagedCMat> rows,
                           const float** out, int64_t ld) override;
  void indexer_scores_multi(CMat q, int64_t n_heads, CMat weights, std::span<const PagedCMat> keys,
                            const int32_t* visible, bool bf16_rounding, Mat scores) override;
  void topk(CMat scores, const int32_t* visible, int64_t k, int32_t* out) override;
  void scatter_rows(std::span<const float* const> src, std::span<float* const> dst,
                    int64_t cols) override;
  void moe_route_score(CMat x, const WeightRef& gate, const float* bias, int top_k,
                       float route_scale, const RouteOpts& opts, int32_t* ids,
                       Mat weights) override;
  void moe_route_hash(CMat x, const int32_t* token_ids, const TensorView& tid2eid,
                      const WeightRef& gate, float route_scale, int32_t* ids, Mat weights) override;
  void swiglu(CMat a, CMat b, float limit, Mat out) override;
  void moe_experts(CMat x, const int32_t* ids, CMat weights, int top_k,
                   std::span<const ExpertWeights> experts, const MoeOpts& opts, Mat out) override;
  void rms_norm_bf16(Mat x, int64_t group, float eps) override;
  void hadamard(Mat x, int64_t n) override;
  // On the GPU (kernels/cuda/sample/sample.cu); a row whose top_p candidates do not fit the
  // kernel's shared memory is downloaded and drawn on the host (Ops::sample).
  void sample(CMat logits, std::span<const SampleSpec> specs, int32_t* tokens) override;
  void argmax_rows(CMat logits, int32_t* tokens, int32_t* ids, float* probs) override;

  // Memory: device memory (cudaMalloc, zero-filled). upload/download are cudaMemcpy on the
  // legacy stream, which the blocking op stream orders with; copy is async on the op stream.
  bool host_memory() const override { return false; }
  DeviceKind device_kind() const override { return DeviceKind::kCuda; }
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  // On the op stream by a kernel (kernels/cuda/init/random_fill.cu): the host fill's bits.
  void fill_random(void* dst, int64_t n, const RandomFill& f) override;
  // Staging: pinned host memory (cudaHostAlloc); upload_async is cudaMemcpyAsync from it on
  // the op stream, a DMA the host does not wait for.
  void* allocate_staging(size_t bytes) override;
  void deallocate_staging(void* p) override;
  void upload_async(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;

 private:
  explicit CudaOps(cudaStream_t stream, cudaStream_t alloc_stream);
  // The scratch arena of the running op: the graph arena inside recorded units (its memory must
  // not move under a graph), else the eager one.
  DeviceArena& arena() { return *active_arena_; }
  // True on the thread that is capturing a graph right now.
  bool capturing() const;
  // Marks the running capture unusable (the first reason is kept) when capturing; returns
  // whether it was. Callers then skip the host-side step a graph cannot replay.
  bool refuse_in_capture(const char* why);
  // A device copy of `bytes` of host data in the op's scratch (a refused capture when
  // capturing: a graph would replay the bytes of the capture, not the caller's next ones).
  void* stage(const void* host, size_t bytes);
  void free_deferred();
  // Device descriptors of paged matrices (their page tables staged once per distinct table),
  // every one `cols` wide; in the op's scratch.
  const kernels::cuda::PagedDesc* stage_paged(std::span<const PagedCMat> mats, int64_t cols);
  // Both forms of sparse attention, keys resolved to device memory.
  void launch_sparse(CMat q, int64_t n_heads, const kernels::cuda::SparseKeys& keys, int64_t L,
                     const float* sink, float scale, bool bf16_probs, Mat o, bool round_out);
  void sparse_attention_rows_impl(CMat q, int64_t n_heads, const float* const* key_rows, int64_t L,
                                  int64_t d, const float* sink, float scale, bool bf16_probs, Mat o,
                                  bool round_out);
  // A device copy of n elements at p (p itself when already device memory).
  template <typename T>
  const T* on_device(const T* p, int64_t n);
  // Linear with the contract's act_quant rule, on already-device operands.
  // round_out: y rounded to BF16 (LinearOpts::round_bf16).
  void linear_impl(CMat x, const WeightRef& w, Mat y, bool act_quant, int act_block,
                   bool round_out = false, bool x_bf16 = false);
  // rms_norm / hc_post, their output rounded to BF16 in the store when round_out.
  void rms_norm_impl(CMat x, const WeightRef* w, float eps, int64_t group, Mat y, bool round_out);
  void hc_head_impl(CMat streams, const HcParams& p, Mat y, bool round_y);
  void hc_post_impl(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out, bool round_out);
  void rope_impl(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                 std::span<const float> freqs, bool inverse, bool round_out);
  // hc_pre (round_y: hc_pre_rounded); with `norm`, rms_norm of y with it and eps into u in the
  // same launch (hc_pre_norm, round_y rounding u too).
  void hc_pre_impl(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre, Mat post,
                   Mat comb, bool round_y, const WeightRef* norm = nullptr, float eps = 0.0f,
                   Mat u = {});
  // Writes n ints from device `src` to `dst` (device: async copy; host: copy + synchronise).
  void store_ints(const int32_t* src, int32_t* dst, int64_t n);
  // y = x · Wᵀ on already-device operands: FP8 or BF16 tensor cores (cuda_gemm.cc), else the
  // kernels. x_quant_block > 0: x holds act_quant_fp8 values of blocks of that many columns (0:
  // not act-quantized); x_bf16: x holds BF16 numbers (implied by x_quant_block > 0). wb / xb:
  // BF16 scratch of w.n·w.k / x.rows·w.k elements for the BF16 tensor-core path (null: taken
  // from the arena).
  void matmul(CMat x, const WeightRef& w, Mat y, int x_quant_block, bool x_bf16, uint16_t* wb,
              uint16_t* xb, bool round_out);
  // The block-scaled FP8 GEMM takes this product: x act-quantized (or to be) in 1 x quant_block
  // blocks, M rows, output y.
  bool fp8_gemm_eligible(int64_t M, const WeightRef& w, const Mat& y, int quant_block) const;
  // y = x · Wᵀ on it, x act-quantized on the way to its codes (values already act-quantized in
  // 1 x 128 blocks give the same codes). False, nothing queued, when cuBLASLt offers no
  // algorithm for the shape.
  bool matmul_fp8(CMat x, const WeightRef& w, Mat y, bool round_out);
  // The single-expert tensor-core stage takes this product (act-quantized x, M rows).
  bool linear_mma_eligible(int64_t M, const WeightRef& w) const;
  // Whether mHC's logit dots of these streams are one cuBLAS FP32 GEMM (hc_dots_gemm): from
  // hc_gemm_min_rows_ rows outside batch-invariant mode.
  bool hc_dots_by_gemm(CMat streams, CMat fn) const;
  // Those dots (and Σ x² in the last column) into dots [M, rows + 1] (hc_dots_by_gemm holds).
  void hc_dots_gemm(CMat streams, CMat fn, int rows, float* dots);
  // matmul's cuBLAS paths: a quantized weight dequantised to BF16 (quantized), else a dense BF16
  // weight times the exact three-part split of x.
  void matmul_tensor_cores(CMat x, const WeightRef& w, Mat y, bool x_bf16, uint16_t* wb,
                           uint16_t* xb, bool quantized);
  bool tensor_core_eligible(int64_t rows, const WeightRef& w, bool x_act_quantized) const;
  // linear_grouped on the tensor cores (x_bf16, from kTensorCoreMinRows rows, FP8/FP4 E8M0 or
  // dense BF16 W): the whole W dequantised once, x converted once, one strided-batched GEMM.
  // False, nothing queued, where it does not apply.
  bool matmul_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y, const LinearOpts& opts);
  void init_cublas();
  void destroy_cublas();
  // moe_experts for shapes the grouped kernels do not take (cuda_ops_moe.cc).
  void moe_experts_by_expert(CMat x, const int32_t* ids, CMat weights, int top_k,
                             std::span<const ExpertWeights> experts, const MoeOpts& opts, Mat out);
  // Device copy of the experts' weight descriptors, made once per expert list (the model's
  // weights never move while it is loaded).
  const kernels::cuda::GroupedExpert* expert_table(std::span<const ExpertWeights> experts);
  // The device copy of descriptor list `t` kept under `key` (uploaded again only when the
  // descriptors changed: a capture refuses that).
  const kernels::cuda::GroupedExpert* cached_table(const void* key,
                                                   std::vector<kernels::cuda::GroupedExpert> t);
  // y = x · Wᵀ on the grouped MoE tensor-core stage as one expert (cuda_gemm.cc). quant_block
  // > 0: x is act-quantized on the way (else it holds act-quantized values already).
  void linear_mma(CMat x, const WeightRef& w, Mat y, int quant_block, bool round_out);
  // That stage's layouts of one expert with M = 1 .. kLinearMmaLayoutRows rows (counts, offset,
  // active, n_active per M, then the rows 0 .. max - 1), uploaded once at creation: a product
  // needs no layout launch.
  static constexpr int64_t kLinearMmaLayoutRows = 64;
  static Expected<DeviceBuffer> linear_mma_layout_table();
  DeviceBuffer linear_mma_layouts_;

  cudaStream_t stream_ = nullptr;
  cudaStream_t alloc_stream_ = nullptr;  // zero-fills of allocate(), never captured
  DeviceArena arena_;
  DeviceArena graph_arena_;  // scratch of recorded units only
  DeviceArena* active_arena_ = &arena_;
  int64_t graph_max_rows_ = 0;
  bool replay_ = true;
  struct Recording {
    int eager_runs = 0;
    bool refused = false;
    cudaGraphExec_t exec = nullptr;
    uint64_t arena_generation = 0;  // graph_arena_'s generation when captured
  };
  std::unordered_map<uint64_t, Recording> recordings_;
  RecordStats record_stats_;
  std::atomic<bool> any_capture_{false};
  std::atomic<std::thread::id> capture_thread_{};
  const char* refusal_ = nullptr;  // why the running capture is unusable
  // Held by deallocate() around its check and cudaFree, and by the start of a capture: no
  // cudaFree is in flight on another thread when a capture begins.
  std::mutex deferred_mu_;
  std::vector<void*> deferred_frees_;       // freed while a capture ran (cudaFree may synchronise)
  DeviceBuffer cublas_workspace_;           // fixed, so cuBLAS never allocates inside a capture
  cublasContext* cublas_ = nullptr;         // null: no tensor-core path (creation failed)
  std::unique_ptr<Fp8BlockGemm> fp8_gemm_;  // null: libcublasLt missing (BF16 path instead)
  int64_t fp8_gemm_min_rows_ = 16;
  int moe_pair_tiles_ = 0;
  bool stream_gemv_ = true;
  bool fused_act_quant_ = false;
  bool fused_small_ops_ = true;
  bool grouped_linear_ = true;
  bool sparse_mma_ = true;
  bool sparse_staged_ = true;
  bool sparse_staged_split_ = false;
  bool sparse_split_ = true;
  bool indexer_mma_ = true;
  std::vector<kernels::cuda::IndexerTile> indexer_tiles_;  // scratch of indexer_scores_multi
  int64_t hc_gemm_min_rows_ = 128;
  int hc_dot_tokens_ = 0;
  int sample_cluster_ = 0;
  bool batch_invariant_ = false;
  int device_ = 0;  // the GPU this backend's memory, streams and handles live on
  struct ExpertTable {
    std::vector<kernels::cuda::GroupedExpert> host;  // the descriptors uploaded (stale check)
    DeviceBuffer device;
  };
  std::unordered_map<const void*, ExpertTable> expert_tables_;
  int64_t linear_mma_max_rows_ = 64;
  int64_t linear_mma_min_rows_ = 2;
  std::vector<kernels::cuda::PagedDesc> row_key_table_;  // indexer_scores_multi's staging
  std::vector<const float*> row_key_pages_;              // (its page tables, concatenated)
  std::vector<const void*> scatter_table_;               // scatter_rows' staging
};

}  // namespace deepinfer::backend::cuda
