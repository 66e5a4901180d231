// ProfilingOps: an Ops decorator that times every op of the wrapped backend, for benchmarks and
// investigations (never in the serving path).
//
// Each op is bracketed by inner.synchronize() before and after, and the host wall-clock time in
// between is charged to the op's name (with a suffix for linear's weight format and shape class,
// so "linear fp4 M<=4" and "linear fp8 M>16" are told apart). Synchronising serialises the
// backend, so the sum exceeds an unprofiled step by the lost overlap; what it shows is where the
// time of each op goes, host staging and the op's own synchronisations included. Memory calls
// pass through untimed.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "backend/ops.h"

namespace deepinfer::backend {

class ProfilingOps : public Ops {  // not final: tests decorate it further
 public:
  explicit ProfilingOps(Ops& inner) : inner_(inner) {}

  struct Entry {
    double seconds = 0;
    int64_t calls = 0;
  };
  const std::map<std::string, Entry>& entries() const { return entries_; }
  void reset() { entries_.clear(); }
  // Off: every op forwards untimed (no synchronisation), so one loaded model serves both.
  void set_enabled(bool on) { enabled_ = on; }
  // "op  calls  ms  %" lines, largest first.
  std::vector<std::string> report() const;

  const char* name() const override { return inner_.name(); }
  bool supports(Feature f) const override { return inner_.supports(f); }
  void embed(const int32_t* ids, int64_t n, const WeightRef& table, Mat out) override;
  void embed_streams(const int32_t* ids, int64_t n, const WeightRef& table, int64_t streams,
                     bool round, Mat X) override;
  void linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& opts) override;
  void linear_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y,
                      const LinearOpts& opts) override;
  void rms_norm(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) override;
  void round_bf16(Mat x) override;
  void add(CMat a, CMat b, Mat out) override;
  void add_streams(CMat b, int64_t streams, bool round, Mat X) override;
  void scale(Mat x, float s) override;
  void copy_rows(CMat src, const int32_t* rows, Mat dst) override;
  void rope(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
            std::span<const float> freqs, bool inverse) override;
  void hc_pre(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre, Mat post,
              Mat comb) override;
  void hc_post(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) override;
  // The fused forms are timed under their op's name (their rounding is part of the op there).
  void rms_norm_rounded(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) override;
  void rope_rounded(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                    std::span<const float> freqs, bool inverse) override;
  void hc_post_rounded(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) override;
  void hc_pre_norm(CMat streams, const HcParams& p, CMat collapse_pre, const WeightRef& w,
                   float eps, bool rounded, Mat y, Mat pre, Mat post, Mat comb, Mat u) override;
  void q_heads_finish(Mat q, int64_t n_heads, int64_t head_dim, float eps, const int32_t* positions,
                      std::span<const float> freqs, bool official) override;
  void kv_rows_finish(Mat x, const WeightRef& w, float eps, const int32_t* positions,
                      std::span<const float> freqs, bool rounded, int64_t quant_cols,
                      int64_t quant_block) override;
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
  void hc_collapse(CMat streams, CMat pre, int n, Mat y) override;
  void fake_quant_nvfp4(Mat x, int64_t block) override;
  void candidate_blocks(CMat scores, const int32_t* visible, int64_t block_size, int64_t n_blocks,
                        int32_t* out) override;
  void restrict_to_blocks(Mat scores, const int32_t* visible, const int32_t* blocks,
                          int64_t n_blocks, int64_t block_size) override;
  void engram_gate(Mat streams, CMat kv, CMat w, int n, float eps) override;
  void sample(CMat logits, std::span<const SampleSpec> specs, int32_t* tokens) override;
  void argmax_rows(CMat logits, int32_t* tokens, int32_t* ids, float* probs) override;
  void scatter_rows(std::span<const float* const> src, std::span<float* const> dst,
                    int64_t cols) override;

  bool host_memory() const override { return inner_.host_memory(); }
  DeviceKind device_kind() const override { return inner_.device_kind(); }
  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* p) override { inner_.deallocate(p); }
  void upload(void* dst, const void* src, size_t bytes) override { inner_.upload(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override {
    inner_.download(dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override { inner_.copy(dst, src, bytes); }
  void fill_random(void* dst, int64_t n, const RandomFill& f) override {
    inner_.fill_random(dst, n, f);
  }
  void* allocate_staging(size_t bytes) override { return inner_.allocate_staging(bytes); }
  void deallocate_staging(void* p) override { inner_.deallocate_staging(p); }
  void upload_async(void* dst, const void* src, size_t bytes) override {
    inner_.upload_async(dst, src, bytes);
  }
  void synchronize() override { inner_.synchronize(); }
  // Recording passes through only when timing is off: a replayed unit has no ops to time.
  int64_t record_max_rows() const override { return enabled_ ? 0 : inner_.record_max_rows(); }
  int64_t recording_setups() const override { return inner_.recording_setups(); }
  void run_recorded(uint64_t key, const std::function<void()>& body) override {
    if (enabled_) {
      body();
    } else {
      inner_.run_recorded(key, body);
    }
  }
  void drop_recordings() override { inner_.drop_recordings(); }

 private:
  template <typename F>
  void timed(const std::string& what, F&& f);

  Ops& inner_;
  std::map<std::string, Entry> entries_;
  bool enabled_ = true;
};

}  // namespace deepinfer::backend
