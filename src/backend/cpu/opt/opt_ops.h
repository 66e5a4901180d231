// OptOps: the threaded CPU backend. Same contract and semantics as RefOps (the oracle); the
// differences allowed are FP32 summation order (tests/ops tolerances). Parallelism is over
// independent outputs only (weight-row tiles, rows, (token, head) pairs), so results do not
// depend on the thread count.
#pragma once

#include <memory>

#include "backend/ops.h"
#include "base/thread_pool.h"

namespace deepinfer::backend::cpu {

class OptOps final : public Ops {
 public:
  explicit OptOps(int num_threads) : pool_(num_threads) {}
  const char* name() const override { return "cpu-opt"; }
  bool supports(Feature f) const override { return f != Feature::kCount; }
  ThreadPool& pool() { return pool_; }

  void embed(const int32_t* ids, int64_t n, const WeightRef& table, Mat out) override;
  void linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& opts) override;
  void rms_norm(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) override;
  void round_bf16(Mat x) override;
  void add(CMat a, CMat b, Mat out) override;
  void scale(Mat x, float s) override;
  void copy_rows(CMat src, const int32_t* rows, Mat dst) override;
  void rope(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
            std::span<const float> freqs, bool inverse) override;
  void hc_pre(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre, Mat post,
              Mat comb) override;
  void hc_post(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) override;
  void hc_head(CMat streams, const HcParams& p, Mat y) override;
  void sparse_attention(CMat q, int64_t n_heads, CMat kv, const int32_t* idx, int64_t L,
                        const float* sink, float scale, bool bf16_probs, Mat o) override;
  void sparse_attention_rows(CMat q, int64_t n_heads, const float* const* key_rows, int64_t L,
                             int64_t d, const float* sink, float scale, bool bf16_probs,
                             Mat o) override;
  void softmax_pool(std::span<const PoolSlot> slots, int64_t slots_per_row, Mat out) override;
  void hadamard128(Mat x) override;
  void fake_quant_fp8(Mat x, int64_t n, int64_t block) override;
  void act_quant_fp8(Mat x, int64_t block) override;
  void fake_quant_fp4(Mat x, int64_t block) override;
  void indexer_scores(CMat q, int64_t n_heads, CMat weights, CMat keys, const int32_t* visible,
                      bool bf16_rounding, Mat scores) override;
  void topk(CMat scores, const int32_t* visible, int64_t k, int32_t* out) override;
  void moe_route_score(CMat x, const WeightRef& gate, const float* bias, int top_k,
                       float route_scale, const RouteOpts& opts, int32_t* ids,
                       Mat weights) override;
  void moe_route_hash(CMat x, const int32_t* token_ids, const TensorView& tid2eid,
                      const WeightRef& gate, float route_scale, int32_t* ids, Mat weights) override;
  void swiglu(CMat a, CMat b, float limit, Mat out) override;
  void moe_experts(CMat x, const int32_t* ids, CMat weights, int top_k,
                   std::span<const ExpertWeights> experts, const MoeOpts& opts, Mat out) override;

 private:
  template <typename KeyRow>
  void sparse_attention_over(CMat q, int64_t n_heads, int64_t d, int64_t L, const float* sink,
                             float scale, bool bf16_probs, Mat o, const KeyRow& key);
  // y = x·Wᵀ with x already (act-)quantized as the caller wants; parallel over weight-row tiles.
  void gemm(CMat x, const WeightRef& w, Mat y);
  // x (copied into a contiguous buffer) with the FP8 activation quant applied when it applies.
  void quantized_input(CMat x, const WeightRef& w, bool act_quant, int act_block, float* buf);
  void route_weights(CMat x, const WeightRef& gate, Mat p, float temperature = 1.0f);
  // indexer_scores without BF16 rounding on AVX2 + FMA machines (opt_attn.cc).
  void indexer_scores_blocked(CMat q, int64_t n_heads, CMat weights, CMat keys,
                              const int32_t* visible, Mat scores);

  ThreadPool pool_;
};

}  // namespace deepinfer::backend::cpu
