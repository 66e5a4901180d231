// The backend op contract: every numerical operation the DeepSeek-V4 family's forward passes
// need (V4 and V4.1; the V4.1-only ops are features a backend may lack, see Feature).
//
// Shaped after ggml's backend vtable + supports_op: one abstract class, one implementation per
// backend (cpu/ref = the FP32 oracle, cpu/opt = threaded, cuda/ = CudaOps), each op checked
// against the oracle by one list of op cases (tests/ops/cases, run on every CPU backend by
// ops_test and on CudaOps by tests/ops/cuda's ops_cuda_test). Activations are FP32
// matrices (mat.h); weights stay in their checkpoint format (weight_ref.h) and are dequantized
// inside the kernels. The maths of each op is written next to it with its spec section
// (/work/shared/spec/deepseek_v4_family.md). BF16 rounding of intermediate activations is NOT
// done inside the ops unless an option says so: the model calls round_bf16 at the reference's
// rounding points (spec §2.0), so the same ops serve the HF-matching FP32 path too.
//
// Shape errors are bugs of the caller (the model validated the checkpoint at load), so ops check
// them with DI_CHECK; an unsupported feature is reported up front through supports()/require().
// Outputs never alias inputs unless the op says so. Integer inputs are int32 host-side arrays for
// the CPU backends (host or device arrays for a device backend).
//
// Memory: every float operand (Mat/CMat, weights, the float parameter arrays) lives in the
// backend's memory, which the model allocates and fills only through the memory section at the
// end of the class (allocate / upload / download). The defaults there are host memory, so the
// CPU backends inherit them; a GPU backend overrides them with device memory. That is the one
// seam that lets the same model code run on either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "backend/mat.h"
#include "backend/weight_ref.h"
#include "base/check.h"
#include "base/status.h"
#include "sample/sample_spec.h"
#include "tensor/random_fill.h"

namespace deepinfer::backend {

// What a backend can do. Formats and options are features, so a backend can support an op only
// partly and say which part is missing (FlashMLA-style "first implementation whose features
// match, else name what is missing").
enum class Feature : uint8_t {
  kDenseBf16,
  kDenseF16,
  kDenseF32,     // dense weight storage types
  kFp8Weights,   // FP8 E4M3 + block scales (E8M0/F32/BF16)
  kFp4Weights,   // FP4 E2M1 packed + 1x32 scales
  kActQuantFp8,  // linear/moe_experts act_quant
  kSparseAttention,
  kAttentionSink,
  kBf16Probs,
  kHyperConnections,  // hc_pre / hc_post / hc_head
  kCompressorPool,    // softmax_pool
  kIndexer,
  kIndexerBf16,  // indexer_scores (+ BF16 rounding points), topk
  kHadamard128,
  kFakeQuantFp8,
  kFakeQuantFp4,
  kMoeRouting,
  kMoeExperts,
  // V4.1 (spec §6): single-pass mHC (hc_pre's collapse_pre / pre, hc_collapse), NVFP4 fake-quant,
  // the CSA2 candidate blocks (candidate_blocks, restrict_to_blocks), the Engram gate, router
  // options beyond V4's (RouteOpts).
  kHcSinglePass,
  kFakeQuantNvfp4,
  kCandidateBlocks,
  kEngramGate,
  kRouterOptions,
  kCount
};
const char* feature_name(Feature f);

// Options of linear (spec §2.0).
struct LinearOpts {
  // Quantize x to FP8 E4M3 per 1 x act_block block along K with a power-of-two scale before the
  // product (official semantics for FP8/FP4 weights; ignored for dense weights).
  bool act_quant = false;
  int act_block = 128;
  // y rounded to BF16 (round-to-nearest-even) after the product: the official rounding point
  // after a projection (model Numerics), in the product's own store where the backend can.
  bool round_bf16 = false;
  // The caller guarantees x's values are BF16 numbers (it rounded them): a backend may take the
  // product on BF16 operands as it is, exact, where it would otherwise split FP32 x into exact
  // BF16 parts (CUDA's tensor-core path: one GEMM instead of three, the same bits). Ignored
  // with act_quant.
  bool x_bf16 = false;
};

// YaRN parameters of make_rope_freqs (spec §2.6). No magnitude scaling (mscale = 1).
struct YarnParams {
  float factor = 1.0f;       // rope_factor (16 for V4-Flash compressed layers)
  int64_t original_len = 0;  // original_seq_len (65536)
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};
// YaRN ramp bounds (low, high) as the reference computes them, clamped to [0, rope_dim - 1].
struct YarnRange {
  int low;
  int high;
};
YarnRange yarn_range(float theta, int rope_dim, const YarnParams& yarn);
// f_i = theta^(-2i/rope_dim), i < rope_dim/2; with YaRN: f_i <- f_i(1-ramp_i) + f_i/factor ramp_i,
// ramp_i = clamp((i - low)/(high - low), 0, 1). FP32 like the reference table.
std::vector<float> make_rope_freqs(float theta, int rope_dim, const YarnParams* yarn = nullptr);

// mHC parameters of one site (spec §2.2), FP32 as stored.
struct HcParams {
  int n = 4;                     // hc_mult: number of residual streams
  CMat fn;                       // [(2+n)n, nD] for hc_pre; [n, nD] for hc_head
  const float* base = nullptr;   // [(2+n)n] or [n]
  const float* scale = nullptr;  // [3] or [1]
  float norm_eps = 1e-6f;
  float hc_eps = 1e-6f;
  int sinkhorn_iters = 20;  // hc_pre only
};

// One slot of softmax_pool: a value row and its gate-logit row (`ape` already added), each
// `width` floats. value == nullptr marks a missing slot (weight 0; e.g. window -1 of CSA row 0).
struct PoolSlot {
  const float* value = nullptr;
  const float* gate = nullptr;
};

struct ExpertWeights {
  WeightRef w1, w3, w2;  // w1/w3 [I, D], w2 [D, I]
};

// Router options (spec §2.7, §6.7 item 5). The defaults are V4's rule.
struct RouteOpts {
  float temperature = 1.0f;  // V4.1 gate_temp: z = W·x / temperature before the score function
  // Normalise the selected weights (p / (Σ p + norm_floor))? V4: always, floor 0; V4.1: only
  // when top_k > 1, floor 1e-20.
  bool normalize = true;
  float norm_floor = 0.0f;
  bool operator==(const RouteOpts&) const = default;
};

struct MoeOpts {
  float swiglu_limit = 10.0f;    // <= 0: no clamp
  bool weight_before_w2 = true;  // official: h = g_e * swiglu before w2; HF: g_e * w2(h)
  bool act_quant = false;        // FP8 activation quant before each FP8/FP4 GEMM
  int act_block = 128;
  // Official BF16 rounding points: w1/w3 outputs, h before w2, each expert's output (summed in
  // FP32 afterwards). Off = FP32 throughout (HF on FP32 checkpoints).
  bool bf16_rounding = false;
  bool accumulate = false;  // out += result instead of out = result
  // out rounded to BF16 as it is stored (after the accumulation): the official rounding point
  // after the MoE, in the op's own store instead of a pass of its own.
  bool round_out = false;
  // Every id is 0 (one expert for every row, weight g[t, 0]: the shared expert). A device
  // backend then need not read the ids back to group the rows (no host synchronisation).
  bool single_expert = false;
};

using sample::kSampleNonFinite;
using sample::kSampleNoToken;
using sample::SampleSpec;

// Thrown by Ops::allocate when the backend's memory is exhausted; the message names the backend,
// the size asked for and what is free. It is the one failure an op can meet at run time (the
// contract has no error channel), so it unwinds to the model's API boundary, which returns a
// ResourceExhausted status (model.h) and leaves the process and the other sequences intact.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual const char* name() const = 0;
  virtual bool supports(Feature f) const = 0;

  // out[i, :] = table[ids[i], :] as FP32. table: dense [V, D]; out [n, D].
  virtual void embed(const int32_t* ids, int64_t n, const WeightRef& table, Mat out) = 0;
  // The same rows in each of X's `streams` column blocks of D channels (X [n, streams·D]: the
  // mHC streams' input), rounded to BF16 when `round` (the official rounding point after the
  // embedding). Default: embed into the first block, round it, copy it into the others; a
  // device backend does it in one pass.
  virtual void embed_streams(const int32_t* ids, int64_t n, const WeightRef& table, int64_t streams,
                             bool round, Mat X) {
    const int64_t D = table.k;
    const Mat first = X.cols_slice(0, D);
    embed(ids, n, table, first);
    if (round) round_bf16(first);
    for (int64_t s = 1; s < streams; ++s) copy_rows(first, nullptr, X.cols_slice(s * D, D));
  }

  // y[M, N] = x[M, K] · Wᵀ, W [N, K] in any WeightFormat, FP32 accumulation (spec §2.0).
  // With opts.act_quant and a quantized W: x is first replaced by act_quant_fp8(x, act_block).
  virtual void linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& opts = {}) = 0;
  // A block-diagonal product of `groups` groups (V4's grouped output projection wo_a): W
  // [groups·n, k], x [M, groups·k], y [M, groups·n], and group g computes
  // y[:, g·n, (g+1)·n) = x[:, g·k, (g+1)·k) · W[g·n, (g+1)·n)ᵀ, each with linear's rules.
  // Default: one linear per group (the same bits); a device backend does it in one launch.
  virtual void linear_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y,
                              const LinearOpts& opts = {}) {
    check_linear_grouped(x, w, groups, y);
    const int64_t n = w.n / groups, k = w.k;
    for (int64_t g = 0; g < groups; ++g) {
      linear(x.cols_slice(g * k, k), w.slice_rows(g * n, n), y.cols_slice(g * n, n), opts);
    }
  }
  // linear_grouped's shape contract (an override checks it before its own paths).
  static void check_linear_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y) {
    DI_CHECK(groups > 0 && w.n % groups == 0 && x.cols == groups * w.k && y.cols == w.n &&
             y.rows == x.rows);
  }

  // y = x · 1/sqrt(mean(x²) + eps) [⊙ w], per row (group == 0) or per group of `group`
  // consecutive channels (per-head q norm, spec §2.3 step 3). w: dense [group or cols] or null.
  // y may alias x.
  virtual void rms_norm(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) = 0;

  // x <- bf16(x), round-to-nearest-even, in place.
  virtual void round_bf16(Mat x) = 0;

  // An op followed by round_bf16 of its output (the official BF16 rounding points after a norm
  // and after the mHC pre- and post-mix): a backend may round in the op's own store instead of
  // a pass of its own. Defaults: the two calls. Linear has LinearOpts::round_bf16.
  virtual void rms_norm_rounded(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) {
    rms_norm(x, w, eps, group, y);
    round_bf16(y);
  }
  virtual void hc_post_rounded(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) {
    hc_post(streams, o, post, comb, n, out);
    round_bf16(out);
  }
  // hc_pre with y (only) rounded.
  virtual void hc_pre_rounded(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre,
                              Mat post, Mat comb) {
    hc_pre(streams, p, collapse_pre, y, pre, post, comb);
    round_bf16(y);
  }
  // A block half's entry (spec §2.2): hc_pre (hc_pre_rounded when `rounded`) into y, then
  // rms_norm of y with w and eps over whole rows into u (rms_norm_rounded when `rounded`). A
  // backend may do both in one pass. Default: the two ops.
  virtual void hc_pre_norm(CMat streams, const HcParams& p, CMat collapse_pre, const WeightRef& w,
                           float eps, bool rounded, Mat y, Mat pre, Mat post, Mat comb, Mat u) {
    if (rounded) {
      hc_pre_rounded(streams, p, collapse_pre, y, pre, post, comb);
      rms_norm_rounded(y, &w, eps, 0, u);
    } else {
      hc_pre(streams, p, collapse_pre, y, pre, post, comb);
      rms_norm(y, &w, eps, 0, u);
    }
  }

  // Glue the model needs so it never touches activation memory itself (a device backend's Mat
  // points to device memory). add: out = a + b, where b has a.rows rows or 1 row (broadcast,
  // e.g. the compressor's ape); out may alias a. scale: x *= s. copy_rows: dst[i] = src[rows[i]]
  // (rows null = identity), e.g. gathering tokens or writing cache rows.
  virtual void add(CMat a, CMat b, Mat out) = 0;
  virtual void scale(Mat x, float s) = 0;
  virtual void copy_rows(CMat src, const int32_t* rows, Mat dst) = 0;
  // X_s += b in each of X's `streams` column blocks of b.cols channels (b [M, D], X [M,
  // streams·D]), then X rounded to BF16 when `round`. Default: the adds and the rounding.
  virtual void add_streams(CMat b, int64_t streams, bool round, Mat X) {
    const int64_t D = b.cols;
    for (int64_t s = 0; s < streams; ++s) {
      const Mat xs = X.cols_slice(s * D, D);
      add(xs, b, xs);
    }
    if (round) round_bf16(X.cols_slice(0, streams * D));
  }

  // Interleaved RoPE on the LAST rope_dim = 2·freqs.size() channels of each of the n_heads
  // head_dim-wide heads of row i (spec §2.6): (x_2j + i x_2j+1) *= e^{±i·pos_i·f_j},
  // angle = float(pos)·f_j in FP32; inverse = conjugate rotation (spec §2.3 inverse RoPE).
  virtual void rope(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                    std::span<const float> freqs, bool inverse) = 0;
  // rope, then every channel of x rounded to BF16 (the official rounding point after it): a
  // backend may round in the rotation's own pass. Default: the two calls.
  virtual void rope_rounded(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                            std::span<const float> freqs, bool inverse) {
    rope(x, n_heads, head_dim, positions, freqs, inverse);
    round_bf16(x);
  }

  // A K=V row's finishing chain (spec §2.3 step 3; V4.1 §6.7 item 6), in place on every row of
  // x (one head of x.cols channels): rms_norm with w and eps, RoPE on the last 2·freqs.size()
  // channels at the row's position, each rounded to BF16 when `rounded` (rms_norm_rounded,
  // rope_rounded), then the FP8 round trip of channels [0, quant_cols) in blocks of quant_block
  // (fake_quant_fp8; quant_cols 0: none). A backend may do it in one pass. Default: the ops.
  virtual void kv_rows_finish(Mat x, const WeightRef& w, float eps, const int32_t* positions,
                              std::span<const float> freqs, bool rounded, int64_t quant_cols,
                              int64_t quant_block) {
    if (rounded) {
      rms_norm_rounded(x, &w, eps, 0, x);
      rope_rounded(x, 1, x.cols, positions, freqs, false);
    } else {
      rms_norm(x, &w, eps, 0, x);
      rope(x, 1, x.cols, positions, freqs, false);
    }
    if (quant_cols > 0) fake_quant_fp8(x, quant_cols, quant_block);
  }

  // The queries' per-head finishing chain of V4 (spec §2.3 step 3), in place on the n_heads
  // head_dim-wide heads of every row: the per-head norm (official: rms_norm_bf16 with group
  // head_dim; else rms_norm without weight over groups of head_dim), then RoPE on each head's last
  // 2·freqs.size() channels (official: rope_rounded; else rope). A backend may do it in one pass.
  // Default: the two ops.
  virtual void q_heads_finish(Mat q, int64_t n_heads, int64_t head_dim, float eps,
                              const int32_t* positions, std::span<const float> freqs,
                              bool official) {
    if (official) {
      rms_norm_bf16(q, head_dim, eps);
      rope_rounded(q, n_heads, head_dim, positions, freqs, false);
    } else {
      rms_norm(q, nullptr, eps, head_dim, q);
      rope(q, n_heads, head_dim, positions, freqs, false);
    }
  }

  // mHC pre-mix (spec §2.2 steps 1-6) for streams [M, n·D] (stream i = cols [iD, (i+1)D)):
  // ρ = 1/sqrt(mean(x²)+norm_eps); μ = (fn·x)·ρ; pre = sigmoid(μ_pre·s0+b)+hc_eps;
  // post = 2·sigmoid(μ_post·s1+b); C = μ_comb·s2+b then Sinkhorn (softmax_row + eps, col-norm,
  // then iters-1 × (row-norm, col-norm), each norm dividing by (sum + hc_eps));
  // y = Σ_i c_i X_i with c = this site's pre (V4), or the rows of collapse_pre [M, n] when its
  // data is not null (V4.1 single-pass mHC, spec §6.1: the previous site's pre). Outputs y [M, D],
  // post [M, n], comb [M, n·n] (row-major C_ij), and this site's pre [M, n] when pre.data is not
  // null (kHcSinglePass covers both V4.1 parts).
  virtual void hc_pre(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre, Mat post,
                      Mat comb) = 0;

  // y [M, D] = Σ_i pre[m, i] · X_i for streams [M, n·D], FP32 (V4.1's final collapse with the last
  // site's pre, and the DSpark target features' mean over the streams). Default: host loop.
  virtual void hc_collapse(CMat streams, CMat pre, int n, Mat y);

  // X'_k = post_k · o + Σ_j C_jk · X_j (note the transpose). out [M, n·D] may alias streams.
  virtual void hc_post(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) = 0;

  // Head collapse: pre_i = sigmoid(μ_i·scale[0] + base_i) + hc_eps, y = Σ pre_i X_i (spec §2.2).
  virtual void hc_head(CMat streams, const HcParams& p, Mat y) = 0;
  // hc_head, then y rounded to BF16 (the official rounding point before the head's norm).
  virtual void hc_head_rounded(CMat streams, const HcParams& p, Mat y) {
    hc_head(streams, p, y);
    round_bf16(y);
  }

  // Sparse MQA with sink (spec §2.3 "Attention kernel"). q [M, H·d]; kv [R, d] is both key and
  // value; idx [M, L] (row stride L) indexes kv rows, -1 = absent. For each query t and head h:
  // z_j = (q_h·k_j)·scale; den = Σ_j e^{z_j−M} + e^{sink_h−M}; o_h = Σ_j e^{z_j−M}/den · k_j.
  // M = max_j z_j; sink null = no sink term; no valid key = zero output. bf16_probs: the
  // reference kernel's cast: o_h = Σ_j bf16(e^{z_j−M}) · k_j / den, den from the FP32 values;
  // it also promises (the official semantics) that q and the key rows are BF16 numbers, so a
  // backend may multiply them on BF16 tensor cores with exact products (CUDA does); other
  // inputs are then rounded to BF16 first.
  virtual void sparse_attention(CMat q, int64_t n_heads, CMat kv, const int32_t* idx, int64_t L,
                                const float* sink, float scale, bool bf16_probs, Mat o) = 0;

  // sparse_attention with the keys named by address instead of by index: query t attends to the
  // rows key_rows[t·L + j], j < L (addresses of d-float rows in this backend's memory, nullptr =
  // absent), in that order. The same value, bit for bit, as sparse_attention over a matrix of
  // those rows with idx naming them in the same order: the model reads its cache rows in place
  // through it, with no gather. key_rows is an array in this backend's memory (host memory for
  // the CPU backends). The default (host memory) gathers each query's rows and runs
  // sparse_attention on them.
  virtual void sparse_attention_rows(CMat q, int64_t n_heads, const float* const* key_rows,
                                     int64_t L, int64_t d, const float* sink, float scale,
                                     bool bf16_probs, Mat o);
  // sparse_attention_rows, then o rounded to BF16 (the official rounding point after the
  // attention): a backend may round in the kernel's store. Default: the two calls.
  virtual void sparse_attention_rows_rounded(CMat q, int64_t n_heads, const float* const* key_rows,
                                             int64_t L, int64_t d, const float* sink, float scale,
                                             bool bf16_probs, Mat o) {
    sparse_attention_rows(q, n_heads, key_rows, L, d, sink, scale, bf16_probs, o);
    round_bf16(o);
  }

  // The addresses of selected rows, for sparse_attention_rows: out[t·ld + k] = the address of
  // row sel[t·K + k] of rows[t] (a paged matrix: the query's sequence's compressed rows), or
  // nullptr where sel is negative, for t < rows.size(), k < K. sel (a top-k's output) and out
  // are this backend's memory, so a device backend never returns the selection to the host;
  // rows and its page tables are host arrays (as indexer_scores_multi's). The default reads sel
  // in host memory.
  virtual void paged_row_addresses(const int32_t* sel, int64_t K, std::span<const PagedCMat> rows,
                                   const float** out, int64_t ld);

  // Compressor pooling (spec §2.4). out row r pools slots[r·spr, (r+1)·spr): per channel c,
  // out[r,c] = Σ_s softmax_s(gate_s[c]) · value_s[c] over the present slots; no present slot
  // = zero row. out [rows, width] with rows = slots.size() / spr.
  virtual void softmax_pool(std::span<const PoolSlot> slots, int64_t slots_per_row, Mat out) = 0;

  // In place, each 128-wide chunk of every row: x <- H₁₂₈ x · 128^-1/2 (Sylvester order).
  virtual void hadamard128(Mat x) = 0;

  // In place quantize->dequantize to FP8 E4M3 over channels [0, n) of every row, in blocks of
  // `block` channels: amax = max(|x|, 1e-4), s = 2^ceil(log2(amax/448)),
  // x <- e4m3(clamp(x/s, ±448)) · s (RNE). Channels >= n untouched (the rope slice, spec §2.3).
  virtual void fake_quant_fp8(Mat x, int64_t n, int64_t block) = 0;
  // act_quant_fp8(x, block) = fake_quant_fp8(x, x.cols, block): the activation quant of linear.
  virtual void act_quant_fp8(Mat x, int64_t block) = 0;
  // In place E2M1 round trip in blocks of `block` (32) over all channels (MXFP4):
  // amax = max(|x|, 6·2^-126), s = 2^ceil(log2(amax/6)), x <- e2m1_rne(clamp(x/s, ±6)) · s.
  virtual void fake_quant_fp4(Mat x, int64_t block) = 0;
  // In place NVFP4 round trip in blocks of `block` (16) over all channels (V4.1 compressed KV):
  // s = e4m3_rne(max(amax, 6·2^-9) / 6), x <- e2m1_rne(clamp(x/s, ±6)) · s (backend/quant.h).
  // Default: host loop.
  virtual void fake_quant_nvfp4(Mat x, int64_t block);

  // Lightning indexer (spec §2.5): scores[t, w] = Σ_h ω[t,h] · ReLU(q[t,h,:]·keys[w,:]) for
  // w < visible[t], -inf for w >= visible[t]. q [M, Hi·di], weights [M, Hi], keys [R, di],
  // scores [M, R]. bf16_rounding (the official reference's BF16 tensor arithmetic): the dot and
  // ω·ReLU(dot) are rounded to BF16, the sum over heads accumulates in FP32 and is rounded once;
  // it also promises (the official semantics) that q and the keys are BF16 numbers, so a backend
  // may take the dots on BF16 tensor cores with exact products (CUDA does in
  // indexer_scores_multi, for runs of rows sharing keys).
  virtual void indexer_scores(CMat q, int64_t n_heads, CMat weights, CMat keys,
                              const int32_t* visible, bool bf16_rounding, Mat scores) = 0;

  // Top-k of scores[t, 0:visible[t]) per row, descending (ties: lower index first), written to
  // out [M, k] (row stride k); positions past min(k, visible[t]) are -1, and so are picks whose
  // score is -inf (rows restrict_to_blocks masked out: never picked). +0 and -0 are equal (a tie).
  // NaN scores (the indexer never writes one) are unspecified on the CPU backends; CudaOps never
  // picks them, as if they were -inf.
  virtual void topk(CMat scores, const int32_t* visible, int64_t k, int32_t* out) = 0;

  // V4.1 hierarchical selection, level one (spec §6.2, §6.7 item 3): row t's blocks are the runs
  // of block_size rows of scores[t, 0:visible[t]); a block's score is its max; the block holding
  // row visible[t] - 1 scores +inf; out [M, n_blocks] (row stride n_blocks) = the n_blocks best
  // blocks (ties: lower block first) in ascending block order, -1 past the blocks row t has.
  // Default: host loop over host memory.
  virtual void candidate_blocks(CMat scores, const int32_t* visible, int64_t block_size,
                                int64_t n_blocks, int32_t* out);
  // Level two's mask: scores[t, r] = -inf for every r < visible[t] whose block (r / block_size)
  // is not among blocks[t, 0:n_blocks) (candidate_blocks' output), in place. Default: host loop.
  virtual void restrict_to_blocks(Mat scores, const int32_t* visible, const int32_t* blocks,
                                  int64_t n_blocks, int64_t block_size);

  // Score routing (spec §2.7, §6.7 item 5): z = W_g·x / opts.temperature (FP32),
  // p = sqrt(softplus(z)); ids = top_k(p + bias) (bias may be null; ties: lower id first);
  // weights = p_ids / (Σ p_ids + opts.norm_floor) · route_scale when opts.normalize, else
  // p_ids · route_scale. ids [M, top_k], weights [M, top_k]. Options other than the defaults
  // need kRouterOptions.
  virtual void moe_route_score(CMat x, const WeightRef& gate, const float* bias, int top_k,
                               float route_scale, const RouteOpts& opts, int32_t* ids,
                               Mat weights) = 0;
  // Hash routing: ids = tid2eid[token_ids[t]] (I32 or I64 [V, k]); same weight formula, no bias.
  virtual void moe_route_hash(CMat x, const int32_t* token_ids, const TensorView& tid2eid,
                              const WeightRef& gate, float route_scale, int32_t* ids,
                              Mat weights) = 0;

  // out = silu(min(a, limit)) · clamp(b, −limit, limit); limit <= 0: no clamp. out may alias a.
  virtual void swiglu(CMat a, CMat b, float limit, Mat out) = 0;

  // Grouped MoE (spec §2.7): out[t] (=|+=) Σ_j g[t,j] · expert_{ids[t,j]}(x[t]) for j < top_k,
  // expert(v) = w2 · swiglu(w1·v, w3·v); ids [M, top_k] (-1 = skip), weights [M, top_k],
  // experts indexed by id. A token's experts are summed in FP32 in ascending id (the
  // reference's loop order). Tokens are grouped by expert so each expert's weights are read once.
  virtual void moe_experts(CMat x, const int32_t* ids, CMat weights, int top_k,
                           std::span<const ExpertWeights> experts, const MoeOpts& opts,
                           Mat out) = 0;

  // V4.1 Engram gate (spec §6.7 item 1), in place on streams [M, n·D]: with kv [M, (n+1)·D] the
  // projected looked-up rows (stream k's key = cols [kD, (k+1)D), the shared value = the last D)
  // and w [n, D] = q_weight ⊙ k_weight, per row and stream k:
  //   dot = D^-1/2 · Σ_d X_k[d]·w_k[d]·key_k[d] · rsqrt(mean(X_k²)+eps) · rsqrt(mean(key_k²)+eps),
  //   g = sigmoid(sign(dot)·sqrt(max(|dot|, 1e-6))),  X_k <- X_k + g · value   (FP32).
  // Default: host loop.
  virtual void engram_gate(Mat streams, CMat kv, CMat w, int n, float eps);

  // Per-group RMS normalisation in the official reference's BF16 arithmetic, in place, no weight
  // (the per-head q norm of quantized checkpoints, spec §2.3 step 3): for each `group`-wide
  // chunk, ms = bf16(Σ_c bf16(x_c²) / group) (FP32 sum in channel order),
  // r = bf16(1 / sqrt(bf16(ms + eps))), x <- bf16(x · r). The default is the host loop.
  virtual void rms_norm_bf16(Mat x, int64_t group, float eps);

  // In place, each n-wide chunk of every row (n a power of two, cols % n == 0):
  // x <- H_n x · n^-1/2 in Sylvester order (butterflies a+b, a-b over h = 1, 2, 4, ...), the
  // scale being the FP32 value 1/sqrt(float(n)). n == 128 is hadamard128 (the indexer of the
  // real model); other widths serve small configs. The default is the host loop.
  virtual void hadamard(Mat x, int64_t n);

  // dst[i][0, cols) <- src[i][0, cols) for every pair: rows of any matrices of this backend's
  // memory (the pointer lists are host arrays), e.g. one call writes a layer's new cache rows
  // for every sequence of a step. Destinations must not overlap each other or any source. The
  // default is host copies.
  virtual void scatter_rows(std::span<const float* const> src, std::span<float* const> dst,
                            int64_t cols);

  // tokens[i] = the token row i of `logits` [R, V] draws under specs[i] (sample/sample_spec.h), or
  // kSampleNoToken / kSampleNonFinite. Exactly the host Sampler's token for the same row
  // (the default runs the host processors, downloading the rows from a device backend first).
  // tokens is a host array.
  virtual void sample(CMat logits, std::span<const SampleSpec> specs, int32_t* tokens);
  // Greedy drafts that stay on the backend (MTP drafting chains its steps without waiting for
  // the host): tokens[r] = the token sample() draws from row r under a greedy spec (the lowest
  // id of the row's maximum; kSampleNonFinite / kSampleNoToken as there); ids[r] (optional) =
  // tokens[r] where it is a token, else 0 (an id an embedding may read); probs[r] (optional) =
  // the row's softmax probability of its maximum, 1 / sum_i exp(x_i - max) summed in double (0
  // where there is no token; a device backend may sum in another order, so it is not bitwise
  // the host's). All three arrays are in this backend's memory. The default works on host
  // memory, or downloads the rows and uploads the results.
  virtual void argmax_rows(CMat logits, int32_t* tokens, int32_t* ids, float* probs);

  // indexer_scores over rows that read different key matrices (the sequences of one step, so
  // one call scores every CSA query of the step): row t scores keys[t], a paged matrix (the
  // sequence's index-key pages, in this backend's memory) with at least visible[t] rows of
  // q.cols / n_heads floats; `keys` itself and each view's page table are host arrays.
  // scores[t, w] for w < visible[t] is indexer_scores' value; the rest of the row is
  // unspecified (topk reads only the visible part); scores.cols must cover every keys[t].rows.
  // Each row's value is computed as by indexer_scores, whatever its companions and however the
  // keys are paged (batch invariance). The default runs indexer_scores on every page (every
  // run of pages adjacent in memory) of every run of consecutive rows sharing a page table.
  virtual void indexer_scores_multi(CMat q, int64_t n_heads, CMat weights,
                                    std::span<const PagedCMat> keys, const int32_t* visible,
                                    bool bf16_rounding, Mat scores);

  // ---- Memory (see the banner). Defaults: host memory. ---------------------------------------
  // True when data pointers of this backend are host-readable (the CPU backends).
  virtual bool host_memory() const { return true; }
  // What TensorViews of this backend's memory say they point to.
  virtual DeviceKind device_kind() const { return DeviceKind::kCpu; }
  // Zero-filled allocation of `bytes`, aligned to 64 bytes; never null: throws OutOfMemory when
  // the memory is exhausted. deallocate takes what allocate returned (null is ignored).
  virtual void* allocate(size_t bytes);
  virtual void deallocate(void* p);
  // host -> backend and backend -> host copies. download waits for every op queued before it;
  // upload may return before the copy lands on the device but never reads `src` afterwards.
  virtual void upload(void* dst, const void* src, size_t bytes);
  virtual void download(void* dst, const void* src, size_t bytes);
  // backend -> backend, queued after the ops before it.
  virtual void copy(void* dst, const void* src, size_t bytes);
  // n elements of `f` written at dst, where they live (tensor/random_fill.h): the weights of
  // `--load-format dummy` are made in the backend's memory, never through a host copy of their
  // size. Every backend gives the bits of fill_random_host (the default, on the host).
  virtual void fill_random(void* dst, int64_t n, const RandomFill& f);
  // Staging: host memory that upload_async may read after it returns (page-locked on a device
  // backend, so the copy is a DMA queued on the op stream: the host never waits for the ops
  // before it, which a pageable source may make it do). Defaults: host memory and upload.
  // upload_async's `src` must come from allocate_staging and stay unchanged until the next
  // download() or synchronize(), which wait for the copy. Allocation throws OutOfMemory.
  virtual void* allocate_staging(size_t bytes);
  virtual void deallocate_staging(void* p);
  virtual void upload_async(void* dst, const void* src, size_t bytes) { upload(dst, src, bytes); }
  // Waits until every queued op has finished (no-op for synchronous backends).
  virtual void synchronize() {}
  // Makes this backend's device the calling thread's current one (CUDA: cudaSetDevice; the CPU
  // backends: nothing). A device's API calls act on the thread's current device, so every
  // thread that calls into a backend on a GPU other than 0 calls this first: the engine does
  // at each entry (its step, the step worker's jobs, submit, abort); ranks on several GPUs in
  // one process each bind their own. Called once per engine entry and step job, not per op.
  virtual void bind_thread() {}

  // ---- Recorded replay (CUDA graphs). Defaults: every run is eager. --------------------------
  // A backend that can record a fixed sequence of ops and replay it (CUDA graphs) returns the
  // most rows a recorded unit may have; 0 = it never records, run_recorded just calls body.
  virtual int64_t record_max_rows() const { return 0; }
  // Runs the op calls `body` makes, as the unit `key`. A recording backend may, on later calls
  // with the same key, replay the ops it recorded WITHOUT calling body, so body must make the
  // same op calls over the same buffers every time it runs for that key, and every input that
  // changes between runs must be read from backend memory (never a host array, never host
  // state). CudaOps: the first run is eager (scratch sizes settle), the second records, later
  // runs replay; a unit that breaks the rules (a host array, a synchronisation, an allocation)
  // is detected, run eagerly, and never recorded again.
  virtual void run_recorded(uint64_t key, const std::function<void()>& body) {
    (void)key;
    body();
  }
  // Forgets every recording (the caller's buffers that they use are about to move or moved).
  virtual void drop_recordings() {}
  // How many times a recorded unit has run its one-time setup (a first run, or the capture of
  // its graph) instead of a replay: a step during which this grew paid costs that later steps of
  // its shape do not, so timings that stand for steady state leave it out. 0: never records.
  virtual int64_t recording_setups() const { return 0; }
  // What recording has done so far (all 0 on a backend that never records): units run eagerly
  // (first runs and refused units), graphs captured, replays, refused units, setups (as
  // recording_setups), and the times every recording was dropped because the buffers they use
  // moved (drop_recordings with recordings to drop).
  struct RecordingCounts {
    int64_t eager = 0, captured = 0, replayed = 0, refused = 0, setups = 0, drops = 0;
  };
  virtual RecordingCounts recording_counts() const { return {}; }
};

// OK if `ops` supports every feature, else an Unimplemented status naming the backend and each
// missing feature. The model calls it once at load with what the checkpoint needs.
Status require(const Ops& ops, std::initializer_list<Feature> features);

}  // namespace deepinfer::backend
