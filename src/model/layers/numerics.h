// The two numeric semantics of the forward pass, and the model-side helpers that pick the ops
// of each.
//
// Semantics are decided by the checkpoint, never by a flag: a plain BF16/F16/F32 checkpoint (no
// quantization_config) computes what the runnable references compute (FP32 math between ops,
// routing weight after w2, FP32 indexer); a quantized checkpoint in the official layout gets the
// official quantisation-aware points (spec §2.0): BF16 rounding of activations between ops, FP8
// activation quant before FP8/FP4 GEMMs, BF16 index scores, BF16 probabilities in P·V, routing
// weight before w2. The family adds its own points: V4 fake-quantizes KV and the indexer
// (Hadamard + FP4) in official semantics only and normalises q per head; V4.1 (spec §6.7 item 6)
// fake-quantizes window KV (FP8 per 32, all channels), compressed KV (NVFP4 per 16) and the
// indexer q / keys (MXFP4 per 32, no Hadamard) in every forward, and has no q norm.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/buffer.h"
#include "backend/mat.h"
#include "backend/ops.h"
#include "io/model_config.h"

namespace deepinfer::model {

// Channels per FP8 fake-quant block of window / compressed KV rows (spec §2.3 step 3): fixed,
// independent of the weight block size.
inline constexpr int64_t kKvFp8Block = 64;
// FP4 fake-quant block of the indexer q and keys (spec §2.4/§2.5).
inline constexpr int64_t kIndexerFp4Block = 32;

// V4.1's fake-quant blocks (spec §6.7 item 6).
inline constexpr int64_t kV41WindowFp8Block = 32;
inline constexpr int64_t kV41CompressedNvfp4Block = 16;

struct Numerics {
  bool official = false;  // quantisation-aware semantics (quantized checkpoint)
  int act_block = 128;    // FP8 activation-quant block along K = weight_block_size[1]
  float eps = 1e-6f;      // rms_norm_eps (all RMSNorms and the mHC ρ)
  bool v41 = false;       // the V4.1 family's points (see the banner)

  static Numerics from_config(const io::ModelConfig& c);

  // BF16 rounding point of the official reference (no-op in HF semantics).
  void act(backend::Ops& ops, backend::Mat x) const {
    if (official) ops.round_bf16(x);
  }
  backend::LinearOpts gemm() const { return {official, act_block}; }
  // A linear without act-quant on an input act() has just rounded (BF16 numbers in official
  // semantics).
  backend::LinearOpts gemm_on_act() const {
    backend::LinearOpts o;
    o.x_bf16 = official;
    return o;
  }
  // The same product when its output is a BF16 rounding point (act): the backend rounds in the
  // product's own store where it can, instead of a pass of its own.
  backend::LinearOpts rounded(backend::LinearOpts o) const {
    o.round_bf16 = official;
    return o;
  }
  backend::LinearOpts gemm_rounded() const { return rounded(gemm()); }
  // rms_norm (with this checkpoint's eps) / hc_post, then act: one op where the backend rounds
  // in its store (Ops::rms_norm_rounded, Ops::hc_post_rounded).
  void rms_norm_act(backend::Ops& ops, backend::CMat x, const backend::WeightRef* w, int64_t group,
                    backend::Mat y) const {
    if (official) {
      ops.rms_norm_rounded(x, w, eps, group, y);
    } else {
      ops.rms_norm(x, w, eps, group, y);
    }
  }
  // RoPE, then act: one op where the backend rounds in the rotation's pass (Ops::rope_rounded).
  void rope_act(backend::Ops& ops, backend::Mat x, int64_t n_heads, int64_t head_dim,
                const int32_t* positions, std::span<const float> freqs, bool inverse) const {
    if (official) {
      ops.rope_rounded(x, n_heads, head_dim, positions, freqs, inverse);
    } else {
      ops.rope(x, n_heads, head_dim, positions, freqs, inverse);
    }
  }
  // hc_pre (hc_pre_rounded in official semantics), then rms_norm_act of y into u with w: one op
  // (Ops::hc_pre_norm), which a backend may do in one pass.
  void hc_pre_norm_act(backend::Ops& ops, backend::CMat streams, const backend::HcParams& p,
                       backend::CMat collapse_pre, const backend::WeightRef& w, backend::Mat y,
                       backend::Mat pre, backend::Mat post, backend::Mat comb,
                       backend::Mat u) const {
    ops.hc_pre_norm(streams, p, collapse_pre, w, eps, official, y, pre, post, comb, u);
  }
  // Sparse attention (BF16 probabilities in official semantics), then act on its output.
  void sparse_attention_rows_act(backend::Ops& ops, backend::CMat q, int64_t n_heads,
                                 const float* const* key_rows, int64_t L, int64_t d,
                                 const float* sink, float scale, backend::Mat o) const {
    if (official) {
      ops.sparse_attention_rows_rounded(q, n_heads, key_rows, L, d, sink, scale, true, o);
    } else {
      ops.sparse_attention_rows(q, n_heads, key_rows, L, d, sink, scale, false, o);
    }
  }
  void hc_head_act(backend::Ops& ops, backend::CMat streams, const backend::HcParams& p,
                   backend::Mat y) const {
    if (official) {
      ops.hc_head_rounded(streams, p, y);
    } else {
      ops.hc_head(streams, p, y);
    }
  }
  void hc_post_act(backend::Ops& ops, backend::CMat streams, backend::CMat o, backend::CMat post,
                   backend::CMat comb, int n, backend::Mat out) const {
    if (official) {
      ops.hc_post_rounded(streams, o, post, comb, n, out);
    } else {
      ops.hc_post(streams, o, post, comb, n, out);
    }
  }
};

// RoPE frequency tables of the two variants (spec §2.6), in the backend's memory: a device
// backend reads them in place (no staging per rope call, so recorded units may use them).
struct RopeTables {
  std::span<const float> main;      // SWA layers
  std::span<const float> compress;  // CSA / HCA layers, their compressors and the indexer
  std::span<const float> for_kind(io::AttentionKind k) const {
    return k == io::AttentionKind::kSWA ? main : compress;
  }
  static RopeTables from_config(const io::ModelConfig& c, backend::Ops& ops);

 private:
  backend::Buffer main_buf_, compress_buf_;
};

// Grow-only scratch buffer: no allocation once the largest step has been seen.
inline float* fit(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}
template <typename T>
T* fit_n(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace deepinfer::model
