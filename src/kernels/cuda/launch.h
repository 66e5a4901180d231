// Host-visible entry points of the CUDA kernels: POD parameter structs and launchers.
//
// Device code lives in the .cu files beside this header, one kernel family per translation unit
// (nvcc is slow; CI compiles all of it on every run). Everything here is plain C++ so the host
// side (src/backend/cuda, compiled by the C++ compiler with warnings as errors) can include it.
// Pointers are device pointers unless a comment says otherwise; launchers only enqueue on
// `stream` and never synchronise, so a sequence of them can later be captured into a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensor/random_fill.h"

namespace deepinfer::kernels::cuda {

// Storage of a weight as the kernels see it (backend::WeightRef flattened to POD).
enum class WFmt : int { kBf16 = 0, kF16 = 1, kF32 = 2, kFp8 = 3, kFp4 = 4 };
enum class SFmt : int { kE8m0 = 0, kF32 = 1, kBf16 = 2 };

struct WeightDesc {
  WFmt fmt = WFmt::kF32;
  const void* w = nullptr;      // [n, k] elements ([n, k/2] bytes for FP4)
  const void* scale = nullptr;  // [ceil(n/block_n), scale_ld] (quantized formats only)
  SFmt sfmt = SFmt::kE8m0;
  int64_t n = 0, k = 0;
  int block_n = 1, block_k = 1;
  int64_t scale_ld = 0;  // columns of the scale tensor
};

struct MatDesc {  // FP32 row-major with leading dimension
  float* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
};

// FP32 rows in pages of page_rows rows (backend::PagedCMat with a device page table): row r is
// pages[r / page_rows] + (r % page_rows) * cols.
struct PagedDesc {
  const float* const* pages = nullptr;
  int64_t rows = 0, cols = 0, page_rows = 1;
};

// Launches an empty kernel and waits: cudaSuccess when this build has machine code the device
// can run (cudaErrorNoKernelImageForDevice otherwise). Used by backend::cuda::cuda_available.
cudaError_t launch_probe();

// Raises `kernel`'s dynamic shared memory limit to `bytes` on the calling thread's current
// device, once per (kernel, device): cudaFuncSetAttribute is a property of one device, so a
// process with ranks on several GPUs needs it on each (a once-per-process static would leave
// every GPU but the first at the 48 KiB default, and its launches failing). Not a stream
// operation: allowed while a stream is captured. After the first call a locked set lookup per
// launch of those kernels (not timed; small next to a launch).
void allow_dynamic_smem(const void* kernel, int bytes);

// The calling thread's current device's SM count (cached per device; 132 when no device
// answers, an H100/H200's): what launchers size a single wave of one-block-per-SM kernels by.
int device_sm_count();

// Programmatic dependent launch (PDL, sm_90+; DEEPINFER_CUDA_PDL): every kernel of this library
// is launched with programmatic stream serialization and starts by waiting for the previous
// kernel of its stream (grid_dependency_sync, common.cuh), so the next kernel's launch overlaps
// the tail of the one before it instead of following its completion: in the decode step's long
// chain of small kernels that launch gap is a large part of each kernel's time. Off: plain
// stream order. Process-wide, set before the first launch (CudaOps does, from the knob); a CUDA
// graph keeps the form it was captured with.
void set_programmatic_launch(bool on);
bool programmatic_launch();
// Kernels launched through launch_kernel (common.cuh) since the process started: a benchmark's
// launches per step (run a step eagerly and take the difference; a CUDA graph replays the
// kernels its capture launched). cuBLAS / cuBLASLt calls are not counted.
uint64_t kernel_launches();
void count_kernel_launch(const void* kernel);
// Launches per kernel, for finding what a step launches (issue 19's launch budget): off by
// default (counting by kernel takes a lock per launch); on, every launch_kernel is counted under
// its kernel until it is switched off. The histogram holds (demangled kernel name without its
// parameter list, launches), most launched first; kernels of one name with different template
// arguments are told apart by their arguments.
void set_launch_histogram(bool on);
void reset_launch_histogram();
std::vector<std::pair<std::string, uint64_t>> launch_histogram();

// ---- gemm/ -------------------------------------------------------------------------------
// y[M, N] = x[M, K] · Wᵀ, FP32 accumulation. M <= 16: weight-streaming GEMV (16-byte loads,
// decode in registers). Larger M: tiled FP32 GEMM decoding W into shared memory.
// round_out: y rounded to BF16 (round-to-nearest-even), in the GEMVs' stores (M <= 16).
// stream_gemv false: M <= 4 on FP8/FP4 weights keeps the thread-group GEMV (benchmark A/B).
void launch_linear(MatDesc x, const WeightDesc& w, MatDesc y, bool round_out, cudaStream_t stream,
                   bool stream_gemv = true);
// The same product of act_quant_fp8(x, act_block) (Ops::linear's act quant), the quantization
// done inside the decode GEMV (one launch, the same bits as a quantized copy first). False, and
// nothing launched, where that form does not apply (M > 4, other weight formats, unaligned x):
// the caller quantizes a copy and calls launch_linear.
bool launch_linear_quantized(MatDesc x, const WeightDesc& w, MatDesc y, int act_block,
                             bool round_out, cudaStream_t stream);
// Ops::linear_grouped (W [groups·n, k], x [M, groups·k]) in one launch of the streaming GEMV,
// its form picked for the whole weight (a group's last bits may differ from launch_linear on its
// slices; a row's depend on that row only). False, and nothing launched, where that GEMV does not
// take it (M > 4, other weight formats, unaligned x): the caller loops.
bool launch_linear_grouped(MatDesc x, const WeightDesc& w, int64_t groups, MatDesc y,
                           bool round_out, cudaStream_t stream);
// The same product with one kernel for every M (the tiled GEMM): a row's bits never depend on
// how many rows there are (batch-invariant mode).
void launch_linear_invariant(MatDesc x, const WeightDesc& w, MatDesc y, cudaStream_t stream);

// BF16 copies for the tensor-core path (gemm/to_bf16.cu): w dequantized to a dense row-major
// [n, k] BF16 matrix; x [rows, cols] (any ld) to a dense [rows, cols] BF16 matrix.
void launch_weight_to_bf16(const WeightDesc& w, uint16_t* out, cudaStream_t stream);
void launch_mat_to_bf16(MatDesc x, uint16_t* out, cudaStream_t stream);
// x as BF16 [rows, out_ld] in the paired k order of the tensor-core MoE stages
// (moe/grouped_mma.cu: within each group of 8 columns, 0 4 1 5 2 6 3 7); quant_block > 0 first
// act-quantizes x to FP8 in blocks of that many columns (launch_fake_quant_fp8's bits), on the
// way, x itself unchanged. cols % 8 == 0.
void launch_bf16_paired(MatDesc x, int64_t quant_block, uint16_t* out, int64_t out_ld,
                        cudaStream_t stream);
// x = hi + mid + lo exactly (normal values), each dense [rows, cols] BF16.
void launch_mat_split_bf16(MatDesc x, uint16_t* hi, uint16_t* mid, uint16_t* lo,
                           cudaStream_t stream);

// ---- norm/ (row-wise and element-wise glue) ----------------------------------------------
// w: FP32/BF16/F16 dense per-channel weight of `group` (or cols) elements, or null.
// round_out: y rounded to BF16 in the store (Ops::rms_norm_rounded).
void launch_rms_norm(MatDesc x, const WeightDesc* w, float eps, int64_t group, MatDesc y,
                     bool round_out, cudaStream_t stream);
void launch_round_bf16(MatDesc x, cudaStream_t stream);
void launch_add(MatDesc a, MatDesc b, MatDesc out, cudaStream_t stream);
void launch_scale(MatDesc x, float s, cudaStream_t stream);
// dst[i] = src[rows[i]] (rows null = identity); rows is a device array.
void launch_copy_rows(MatDesc src, const int32_t* rows, MatDesc dst, cudaStream_t stream);
// dst[i][0, cols) <- src[i][0, cols) for i < n (device tables of row pointers).
void launch_scatter_rows(const float* const* src, float* const* dst, int64_t n, int64_t cols,
                         cudaStream_t stream);
// out[i] = table[ids[i]] (dense table; ids a device array) in each of out's `streams` column
// blocks of table.k channels, rounded to BF16 when round_out.
void launch_embed(const int32_t* ids, const WeightDesc& table, MatDesc out, int64_t streams,
                  bool round_out, cudaStream_t stream);
// x[:, s·b.cols + c] += b[:, c] for s < streams, then rounded to BF16 when round_out.
void launch_add_streams(MatDesc b, int64_t streams, bool round_out, MatDesc x, cudaStream_t stream);
void launch_swiglu(MatDesc a, MatDesc b, float limit, MatDesc out, cudaStream_t stream);
// x[r] *= s[r * s_ld + s_col] — per-row scale read from a device matrix (MoE gate weights);
// rows[r] picks the row of s (null = r).
void launch_scale_rows(MatDesc x, const float* s, int64_t s_ld, const int32_t* s_rows,
                       const int32_t* s_cols, cudaStream_t stream);
// out[rows[i]] += src[i] (rows device array, no duplicates within one launch; null = i).
void launch_scatter_add_rows(MatDesc src, const int32_t* rows, MatDesc out, cudaStream_t stream);

// ---- rope/ --------------------------------------------------------------------------------
// round_out: then every channel of x rounded to BF16 (RNE), in the same pass.
void launch_rope(MatDesc x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                 const float* freqs, int64_t n_freqs, bool inverse, bool round_out,
                 cudaStream_t stream);

// Ops::kv_rows_finish in one launch (rms_norm, rope(_rounded), fake_quant_fp8 over
// [0, quant_cols)), the three kernels' bits; supported: even x.cols, the RoPE channels and the
// quantized ones inside the row.
bool kv_rows_finish_supported(MatDesc x, int64_t n_freqs, int64_t quant_cols);
void launch_kv_rows_finish(MatDesc x, const WeightDesc& w, float eps, const int32_t* positions,
                           const float* freqs, int64_t n_freqs, bool rounded, int64_t quant_cols,
                           int64_t quant_block, cudaStream_t stream);

// Ops::q_heads_finish, official form, in one launch (rms_norm_bf16 per head_dim group, then
// rope_rounded), the two kernels' bits: one warp per (row, head).
void launch_q_heads_finish(MatDesc q, int64_t n_heads, int64_t head_dim, float eps,
                           const int32_t* positions, const float* freqs, int64_t n_freqs,
                           cudaStream_t stream);

// ---- quant/ -------------------------------------------------------------------------------
void launch_fake_quant_fp8(MatDesc x, int64_t n, int64_t block, cudaStream_t stream);
// out = the FP8 act-quantization round trip of x (all columns; launch_fake_quant_fp8's bits),
// x unchanged: a linear's act-quantized input in one launch.
void launch_act_quant_fp8_copy(MatDesc x, MatDesc out, int64_t block, cudaStream_t stream);
// x act-quantized as E4M3 codes [rows, codes_ld] plus scales [ceil(cols / block), rows] (FP32
// powers of two, row-contiguous per block column: cuBLASLt's VEC128_32F layout for block 128):
// code * scale is launch_fake_quant_fp8's value, bit for bit. x may hold such values already.
// In the same launch, w_n E8M0 weight scales as FP32 (w_f32; w_n 0: none).
void launch_act_quant_fp8_codes(MatDesc x, int64_t block, uint8_t* codes, int64_t codes_ld,
                                float* scales, const uint8_t* w_e8m0, int64_t w_n, float* w_f32,
                                cudaStream_t stream);
void launch_fake_quant_fp4(MatDesc x, int64_t block, cudaStream_t stream);
void launch_fake_quant_nvfp4(MatDesc x, int64_t block, cudaStream_t stream);
void launch_hadamard128(MatDesc x, cudaStream_t stream);
// Power-of-two n <= 1024; scale = the host's 1/sqrt(float(n)).
void launch_hadamard(MatDesc x, int64_t n, float scale, cudaStream_t stream);
// In place, per `group` channels (ops.h rms_norm_bf16).
void launch_rms_norm_bf16(MatDesc x, int64_t group, float eps, cudaStream_t stream);

// ---- hc/ ----------------------------------------------------------------------------------
struct HcDesc {
  int n = 4;
  MatDesc fn;  // [(2+n)n or n, n·D]
  const float* base = nullptr;
  const float* scale = nullptr;
  float norm_eps = 1e-6f, hc_eps = 1e-6f;
  int sinkhorn_iters = 20;
  // Tokens per block of the logits' partial sums (hc.cu hc_dots_kernel); 0: its own rule. Any
  // value gives the same bits (an A/B knob: CudaOps::set_hc_dot_tokens).
  int dot_tokens = 0;
};
inline constexpr int kMaxHcStreams = 8;
// Chunks of the logits' partial sums for k = n·D stream values: scratch of hc_pre / hc_head is
// rows · ((2+n)n + 1) · hc_dot_chunks(n·D) floats (hc_head: rows · (n + 1) · hc_dot_chunks(n·D)).
int64_t hc_dot_chunks(int64_t k);
// collapse (data may be null): V4.1's single pass, y = Σ collapse[m, i] X_i instead of the site's
// own pre; pre_out (data may be null) receives the site's pre [rows, n].
// dots_ready: scratch already holds the logits' dot products [rows, (2+n)n + 1] (the last
// column Σ x², launch_row_sumsq), e.g. from a GEMM; else the kernels make them as partial sums.
void launch_hc_pre(MatDesc streams, const HcDesc& p, MatDesc collapse, MatDesc y, MatDesc pre_out,
                   MatDesc post, MatDesc comb, float* scratch, bool dots_ready, bool round_y,
                   cudaStream_t stream);
// launch_hc_pre with round_y = rounded, then launch_rms_norm(y, w, eps, whole rows, u, rounded)
// in the same launch, those kernels' bits (Ops::hc_pre_norm).
void launch_hc_pre_norm(MatDesc streams, const HcDesc& p, MatDesc collapse, MatDesc y,
                        MatDesc pre_out, MatDesc post, MatDesc comb, float* scratch,
                        bool dots_ready, bool rounded, const WeightDesc& w, float eps, MatDesc u,
                        cudaStream_t stream);
// out[m · out_ld] = Σ_c x[m, c]² (FP32, a fixed per-row order).
void launch_row_sumsq(MatDesc x, float* out, int64_t out_ld, cudaStream_t stream);
// y [rows, D] = Σ_i pre[m, i] · X_i (V4.1's final collapse, DSpark's feature mean).
void launch_hc_collapse(MatDesc streams, MatDesc pre, int n, MatDesc y, cudaStream_t stream);
void launch_hc_post(MatDesc streams, MatDesc o, MatDesc post, MatDesc comb, int n, MatDesc out,
                    bool round_out, cudaStream_t stream);
void launch_hc_head(MatDesc streams, const HcDesc& p, MatDesc y, float* scratch, bool round_y,
                    cudaStream_t stream);
// V4.1 Engram gate (ops.h engram_gate), in place on streams [rows, n·D]; kv [rows, (n+1)·D],
// w [n, D].
void launch_engram_gate(MatDesc streams, MatDesc kv, MatDesc w, int n, float eps,
                        cudaStream_t stream);

// ---- sample/ ------------------------------------------------------------------------------
// backend::SampleSpec as the kernel reads it; codes of backend/ops.h plus "left to the host".
struct SampleSpecDev {
  int32_t greedy = 1;
  float temperature = 1.0f, min_p = 0.0f;
  double log_min_p = 0.0;
  int32_t top_k = 0;
  float top_p = 1.0f;
  double u = 0.0;
};
inline constexpr int32_t kSampleNoTokenDev = -1;
inline constexpr int32_t kSampleNonFiniteDev = -2;
int64_t sample_scratch_bytes(int64_t rows, int64_t vocab);
// tokens: device [rows]; scratch: device, sample_scratch_bytes (8-byte aligned). cluster: blocks
// per row (1, 2, 4 or 8; 0: the kernel's rule, 8 for the few rows of a decode step); the same
// tokens whatever it is (an A/B knob: CudaOps::set_sample_cluster).
void launch_sample(MatDesc logits, const SampleSpecDev* specs, void* scratch, int32_t* tokens,
                   int cluster, cudaStream_t stream);

// Ops::argmax_rows: tokens / ids / probs device [rows] (ids, probs may be null).
void launch_argmax_rows(MatDesc logits, int32_t* tokens, int32_t* ids, float* probs,
                        cudaStream_t stream);

// ---- attention/ ---------------------------------------------------------------------------
// Shared memory holds one query's L scores and key addresses; L up to kMaxSparseKeys.
inline constexpr int64_t kMaxSparseKeys = 8192;
// The keys of one sparse attention call, [rows, L] per query: by index into one matrix (kv and
// idx, -1 = absent) or by address (rows: d-float rows anywhere in device memory, nullptr =
// absent; kv unused). The kernels compact either into key addresses, so both forms run the
// same arithmetic.
struct SparseKeys {
  MatDesc kv;
  const int32_t* idx = nullptr;
  const float* const* rows = nullptr;
  int64_t d = 0;
};
// round_out: o rounded to BF16 in the store (Ops::sparse_attention_rows_rounded).
void launch_sparse_attention(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                             const float* sink, float scale, bool bf16_probs, MatDesc o,
                             bool round_out, cudaStream_t stream);
// The same attention on the tensor cores (attention/sparse_attention_mma.cu): head dim 512,
// probabilities BF16-rounded, and the queries and key rows BF16 numbers (the official
// semantics' promise; products are then exact). Returns false, launching nothing, when the
// shape does not fit (d != 512, or L too long for its shared memory).
bool launch_sparse_attention_mma(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                 const float* sink, float scale, MatDesc o, bool round_out,
                                 cudaStream_t stream);
// The same attention for 32 heads and more (attention/sparse_attention_staged.cu): 64 heads a
// block, each key chunk staged once in shared memory for all of them; the same contract as
// launch_sparse_attention_mma (head dim 512, BF16 probabilities, queries and keys BF16 numbers).
// Returns false, launching nothing, when the shape does not fit (d != 512, fewer than 32 heads).
bool launch_sparse_attention_staged(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                    const float* sink, float scale, MatDesc o, bool round_out,
                                    cudaStream_t stream);
// The staged kernel with the keys split across blocks, for grids under one wave of the card
// (decode at small batch): three launches (each split's max, then its P·V sums under the row's
// max, then their combination), the same probabilities as the unsplit kernel, sums associated
// per split (not batch-invariant). scratch: sparse_attention_staged_split_scratch floats of
// device memory, 0 when the shape does not fit or calls for no split; returns false, launching
// nothing, in those cases or when scratch is null.
int64_t sparse_attention_staged_split_scratch(int64_t rows, int64_t n_heads, SparseKeys keys,
                                              int64_t L);
bool launch_sparse_attention_staged_split(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                          const float* sink, float scale, MatDesc o,
                                          bool round_out, float* scratch, cudaStream_t stream);
// The same attention with the keys split across blocks (attention/sparse_attention_split.cu),
// for grids that would not fill the card. scratch: sparse_attention_split_scratch floats of
// device memory; that count is 0 when the shape does not call for a split. Returns false (and
// launches nothing) when it does not apply; then launch_sparse_attention serves the call. The
// split depends on the row count: not batch-invariant in the P·V sums.
int64_t sparse_attention_split_scratch(int64_t rows, int64_t n_heads, int64_t L, int64_t d);
bool launch_sparse_attention_split(MatDesc q, int64_t n_heads, SparseKeys keys, int64_t L,
                                   const float* sink, float scale, bool bf16_probs, MatDesc o,
                                   bool round_out, float* scratch, cudaStream_t stream);
struct PoolSlotDev {
  const float* value;
  const float* gate;
};
void launch_softmax_pool(const PoolSlotDev* slots, int64_t slots_per_row, MatDesc out,
                         cudaStream_t stream);

// ---- indexer/ -----------------------------------------------------------------------------
void launch_indexer_scores(MatDesc q, int64_t n_heads, MatDesc weights, MatDesc keys,
                           const int32_t* visible, bool bf16_rounding, MatDesc scores,
                           cudaStream_t stream);
// The same scores with row t reading its own paged key matrix row_keys[t] (a device table of
// q.rows descriptors, all di wide); only the visible keys of each row are written.
void launch_indexer_scores_multi(MatDesc q, int64_t n_heads, MatDesc weights,
                                 const PagedDesc* row_keys, int64_t di, const int32_t* visible,
                                 bool bf16_rounding, MatDesc scores, cudaStream_t stream);
// indexer_scores_multi on the tensor cores (indexer/indexer_mma.cu), with the BF16 rounding
// points and di = 128, over tiles of up to 64 consecutive rows that read one key matrix
// (row_keys[row0], the staged per-row table): the queries and keys must be BF16 numbers (the
// official semantics' promise), at most 64 heads. Only visible keys are written, as by the multi
// form. Returns false, launching nothing, when the queries are not 16-byte aligned rows.
inline constexpr int kIndexerMmaTileRows = 64;  // rows of a tile, at most
struct IndexerTile {
  int64_t row0 = 0;
  int rows = 0;
};
bool launch_indexer_scores_mma(MatDesc q, int64_t n_heads, MatDesc weights,
                               const PagedDesc* row_keys, const IndexerTile* tiles, int64_t n_tiles,
                               int64_t key_cols, const int32_t* visible, MatDesc scores,
                               cudaStream_t stream);
// out[t·ld + k] = the address of row sel[t·K + k] of rows[t] (nullptr where sel < 0), for
// t < M, k < K (Ops::paged_row_addresses). rows: a device table of M descriptors.
void launch_paged_row_addresses(const int32_t* sel, int64_t M, int64_t K, const PagedDesc* rows,
                                const float** out, int64_t ld, cudaStream_t stream);
// Ops::topk (indexer/topk.cu): the radix select for rows longer than kTopkRankCountMaxCols
// columns and k <= kTopkRadixMaxK, the exact rank count otherwise. visible, out: device arrays.
inline constexpr int64_t kTopkRankCountMaxCols = 256;
inline constexpr int64_t kTopkRadixMaxK = 4096;
void launch_topk(MatDesc scores, const int32_t* visible, int64_t k, int32_t* out,
                 cudaStream_t stream);
// Each path on its own (the same results), for the perf harness's same-run comparison. The radix
// select hands k > kTopkRadixMaxK to the rank count.
void launch_topk_radix(MatDesc scores, const int32_t* visible, int64_t k, int32_t* out,
                       cudaStream_t stream);
void launch_topk_rank_count(MatDesc scores, const int32_t* visible, int64_t k, int32_t* out,
                            cudaStream_t stream);
// V4.1 candidate blocks (ops.h): visible, out device arrays; scratch device floats, at least
// candidate_blocks_scratch_floats(rows, cols, block_size).
int64_t candidate_blocks_scratch_floats(int64_t rows, int64_t cols, int64_t block_size);
void launch_candidate_blocks(MatDesc scores, const int32_t* visible, int64_t block_size,
                             int64_t n_blocks, int32_t* out, float* scratch, cudaStream_t stream);
void launch_restrict_to_blocks(MatDesc scores, const int32_t* visible, const int32_t* blocks,
                               int64_t n_blocks, int64_t block_size, cudaStream_t stream);

// ---- moe/ ---------------------------------------------------------------------------------
// From router logits z [M, E] (the gate GEMM's output): p = sqrt(softplus(z)), ids = top_k of
// p + bias (ties: lower id), weights = p_ids / Σ p_ids · route_scale. bias may be null.
// backend::RouteOpts as the kernel reads it (V4's rule by default).
struct RouteOptsDev {
  float temperature = 1.0f;
  bool normalize = true;
  float norm_floor = 0.0f;
};
void launch_moe_route_topk(MatDesc z, const float* bias, int top_k, float route_scale,
                           const RouteOptsDev& opts, int32_t* ids, MatDesc weights,
                           cudaStream_t stream);
// Same weights for given ids [M, k] (hash routing).
void launch_moe_route_weights(MatDesc z, const int32_t* ids, int k, float route_scale,
                              MatDesc weights, cudaStream_t stream);
// Grouped experts (moe/grouped.cu): the layout on the device, then one launch per stage.
struct GroupedExpert {
  WeightDesc w1, w3, w2;  // w1/w3 [I, D], w2 [D, I]
};
struct MoeLayout {              // device scratch
  int32_t* counts = nullptr;    // [E] pairs per expert
  int32_t* offsets = nullptr;   // [E] first grouped row of each expert
  int32_t* pair_row = nullptr;  // [M·k] grouped row of pair t·k + j (-1: skipped id)
  int32_t* row_pair = nullptr;  // [M·k] pair of each grouped row
  int32_t* active = nullptr;    // [E] experts with pairs, ascending; n_active of them
  int32_t* n_active = nullptr;  // [1]
};
struct MoeEpilogue {
  float swiglu_limit = 10.0f;
  bool bf16_rounding = false;
  bool weight_before_w2 = true;
};
// One block; the counts and cursors of `experts` <= kMoeLayoutMaxExperts live in its shared
// memory (48 KiB).
inline constexpr int kMoeLayoutMaxExperts = 6144;
void launch_moe_layout(const int32_t* ids, int64_t pairs, int experts, MoeLayout l,
                       cudaStream_t stream);
// h[row] = epilogue(x[token]·w1ᵀ, x[token]·w3ᵀ) for every grouped row; max_active bounds the
// number of active experts (min(E, pairs)). K % 32 == 0, rows 16-byte aligned.
void launch_moe_gate_up(MatDesc x, const GroupedExpert* experts, int64_t inter, MoeLayout l,
                        int max_active, const float* gates, int64_t gates_ld, int top_k,
                        MoeEpilogue ep, float* h, int64_t h_ld, cudaStream_t stream);
void launch_moe_down(const float* h, int64_t h_ld, const GroupedExpert* experts, int64_t dim,
                     MoeLayout l, int max_active, const float* gates, int64_t gates_ld, int top_k,
                     MoeEpilogue ep, float* y, int64_t y_ld, cudaStream_t stream);
// The same two stages on the tensor cores (moe/grouped_mma.cu), for act-quantized inputs given
// as BF16 copies in the paired order (launch_bf16_paired: x [M, ld x_ld], h [pairs, ld h_ld];
// exact) and FP4 / FP8 weights with E8M0
// scales: K % 128 == 0, the stage's rows (inter, dim) % 16 == 0, ld % 8 == 0.
// fp4: every expert's w1 and w3 (gate-up) or w2 (down) is FP4, else every one is FP8.
// pair_tiles > 1: each weight decode serves 4 tiles of 8 pairs (many pairs per expert:
// prefill); 1: one tile (fewer registers, twice the blocks per SM); >= 8, FP4 weights and
// rows % 64 == 0: 64 weight rows per block and 8 tiles per decode, the inputs staged in shared
// memory (grouped_mma_wide.cu). The same bits every way.
void launch_moe_gate_up_mma(const uint16_t* x, int64_t x_ld, const GroupedExpert* experts,
                            bool fp4, int64_t inter, MoeLayout l, int max_active,
                            const float* gates, int64_t gates_ld, int top_k, MoeEpilogue ep,
                            float* h, int64_t h_ld, int pair_tiles, cudaStream_t stream);
void launch_moe_down_mma(const uint16_t* h, int64_t h_ld, const GroupedExpert* experts, bool fp4,
                         int64_t dim, MoeLayout l, int max_active, const float* gates,
                         int64_t gates_ld, int top_k, MoeEpilogue ep, float* y, int64_t y_ld,
                         int pair_tiles, cudaStream_t stream);
// out[t] (=|+=) Σ over t's pairs in ascending (expert, slot) of y[pair_row], rounded to BF16 in
// the store when round_out.
void launch_moe_combine(const float* y, int64_t y_ld, const int32_t* ids, MoeLayout l, int top_k,
                        bool accumulate, MatDesc out, bool round_out, cudaStream_t stream);
// ids[t, j] = tid2eid[token_ids[t], j] (I32 or I64 table [V, k]).
void launch_moe_hash_ids(const int32_t* token_ids, int64_t m, const void* tid2eid, bool tid2eid_i64,
                         int k, int32_t* ids, cudaStream_t stream);

// ---- init/ -------------------------------------------------------------------------------
// n elements of `f` (f.elem_bytes each, little-endian) at dst: random_fill_bits(f, i), the host
// fill's bits (tensor/random_fill.h). For the weights of `--load-format dummy`.
void launch_random_fill(void* dst, int64_t n, const RandomFill& f, cudaStream_t stream);

}  // namespace deepinfer::kernels::cuda
