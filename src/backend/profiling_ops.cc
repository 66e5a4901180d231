// ProfilingOps (see profiling_ops.h): forwarding with a synchronised timer around each op.
#include "backend/profiling_ops.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::backend {

template <typename F>
void ProfilingOps::timed(const std::string& what, F&& f) {
  if (!enabled_) {
    f();
    return;
  }
  inner_.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  inner_.synchronize();
  Entry& e = entries_[what];
  e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++e.calls;
}

std::vector<std::string> ProfilingOps::report() const {
  std::vector<std::pair<std::string, Entry>> v(entries_.begin(), entries_.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& [k, e] : v) total += e.seconds;
  std::vector<std::string> lines;
  for (const auto& [k, e] : v) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-34s %8lld calls %10.3f ms %6.1f%%", k.c_str(),
                  static_cast<long long>(e.calls), e.seconds * 1e3,
                  total > 0 ? 100.0 * e.seconds / total : 0.0);
    lines.emplace_back(buf);
  }
  return lines;
}

namespace {
std::string linear_tag(const WeightRef& w, int64_t m) {
  const char* f = w.format == WeightFormat::kFp8   ? "fp8"
                  : w.format == WeightFormat::kFp4 ? "fp4"
                                                   : "dense";
  const char* s = m <= 4 ? "M<=4" : m <= 16 ? "M<=16" : "M>16";
  return std::string("linear ") + f + " " + s;
}
}  // namespace

void ProfilingOps::embed(const int32_t* ids, int64_t n, const WeightRef& t, Mat out) {
  timed("embed", [&] { inner_.embed(ids, n, t, out); });
}
void ProfilingOps::embed_streams(const int32_t* ids, int64_t n, const WeightRef& t, int64_t s,
                                 bool round, Mat X) {
  timed("embed", [&] { inner_.embed_streams(ids, n, t, s, round, X); });
}
void ProfilingOps::linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& o) {
  timed(linear_tag(w, x.rows), [&] { inner_.linear(x, w, y, o); });
}
void ProfilingOps::linear_grouped(CMat x, const WeightRef& w, int64_t groups, Mat y,
                                  const LinearOpts& o) {
  timed(linear_tag(w, x.rows) + " grouped", [&] { inner_.linear_grouped(x, w, groups, y, o); });
}
void ProfilingOps::rms_norm(CMat x, const WeightRef* w, float eps, int64_t g, Mat y) {
  timed("rms_norm", [&] { inner_.rms_norm(x, w, eps, g, y); });
}
void ProfilingOps::round_bf16(Mat x) {
  timed("round_bf16", [&] { inner_.round_bf16(x); });
}
void ProfilingOps::add(CMat a, CMat b, Mat out) {
  timed("add", [&] { inner_.add(a, b, out); });
}
void ProfilingOps::add_streams(CMat b, int64_t s, bool round, Mat X) {
  timed("add", [&] { inner_.add_streams(b, s, round, X); });
}
void ProfilingOps::scale(Mat x, float s) {
  timed("scale", [&] { inner_.scale(x, s); });
}
void ProfilingOps::copy_rows(CMat src, const int32_t* rows, Mat dst) {
  timed("copy_rows", [&] { inner_.copy_rows(src, rows, dst); });
}
void ProfilingOps::rope(Mat x, int64_t h, int64_t d, const int32_t* pos, std::span<const float> f,
                        bool inv) {
  timed("rope", [&] { inner_.rope(x, h, d, pos, f, inv); });
}
void ProfilingOps::rope_rounded(Mat x, int64_t h, int64_t d, const int32_t* pos,
                                std::span<const float> f, bool inv) {
  timed("rope", [&] { inner_.rope_rounded(x, h, d, pos, f, inv); });
}
void ProfilingOps::hc_pre_norm(CMat s, const HcParams& p, CMat cp, const WeightRef& w, float eps,
                               bool rounded, Mat y, Mat pre, Mat post, Mat comb, Mat u) {
  timed("hc_pre_norm",
        [&] { inner_.hc_pre_norm(s, p, cp, w, eps, rounded, y, pre, post, comb, u); });
}
void ProfilingOps::q_heads_finish(Mat q, int64_t h, int64_t d, float eps, const int32_t* pos,
                                  std::span<const float> f, bool official) {
  timed("q_heads_finish", [&] { inner_.q_heads_finish(q, h, d, eps, pos, f, official); });
}
void ProfilingOps::kv_rows_finish(Mat x, const WeightRef& w, float eps, const int32_t* pos,
                                  std::span<const float> f, bool rounded, int64_t quant_cols,
                                  int64_t quant_block) {
  timed("kv_rows_finish",
        [&] { inner_.kv_rows_finish(x, w, eps, pos, f, rounded, quant_cols, quant_block); });
}
void ProfilingOps::hc_pre(CMat s, const HcParams& p, CMat cp, Mat y, Mat pre, Mat post, Mat comb) {
  timed("hc_pre", [&] { inner_.hc_pre(s, p, cp, y, pre, post, comb); });
}
void ProfilingOps::hc_collapse(CMat s, CMat pre, int n, Mat y) {
  timed("hc_collapse", [&] { inner_.hc_collapse(s, pre, n, y); });
}
void ProfilingOps::fake_quant_nvfp4(Mat x, int64_t b) {
  timed("fake_quant_nvfp4", [&] { inner_.fake_quant_nvfp4(x, b); });
}
void ProfilingOps::candidate_blocks(CMat s, const int32_t* vis, int64_t bs, int64_t nb,
                                    int32_t* out) {
  timed("candidate_blocks", [&] { inner_.candidate_blocks(s, vis, bs, nb, out); });
}
void ProfilingOps::restrict_to_blocks(Mat s, const int32_t* vis, const int32_t* blocks, int64_t nb,
                                      int64_t bs) {
  timed("restrict_to_blocks", [&] { inner_.restrict_to_blocks(s, vis, blocks, nb, bs); });
}
void ProfilingOps::engram_gate(Mat s, CMat kv, CMat w, int n, float eps) {
  timed("engram_gate", [&] { inner_.engram_gate(s, kv, w, n, eps); });
}
void ProfilingOps::hc_post(CMat s, CMat o, CMat post, CMat comb, int n, Mat out) {
  timed("hc_post", [&] { inner_.hc_post(s, o, post, comb, n, out); });
}
void ProfilingOps::rms_norm_rounded(CMat x, const WeightRef* w, float eps, int64_t g, Mat y) {
  timed("rms_norm", [&] { inner_.rms_norm_rounded(x, w, eps, g, y); });
}
void ProfilingOps::hc_post_rounded(CMat s, CMat o, CMat post, CMat comb, int n, Mat out) {
  timed("hc_post", [&] { inner_.hc_post_rounded(s, o, post, comb, n, out); });
}
void ProfilingOps::hc_pre_rounded(CMat s, const HcParams& p, CMat c, Mat y, Mat pre, Mat post,
                                  Mat comb) {
  timed("hc_pre", [&] { inner_.hc_pre_rounded(s, p, c, y, pre, post, comb); });
}
void ProfilingOps::hc_head(CMat s, const HcParams& p, Mat y) {
  timed("hc_head", [&] { inner_.hc_head(s, p, y); });
}
void ProfilingOps::hc_head_rounded(CMat s, const HcParams& p, Mat y) {
  timed("hc_head", [&] { inner_.hc_head_rounded(s, p, y); });
}
void ProfilingOps::sparse_attention(CMat q, int64_t h, CMat kv, const int32_t* idx, int64_t L,
                                    const float* sink, float sc, bool bf, Mat o) {
  timed("sparse_attention", [&] { inner_.sparse_attention(q, h, kv, idx, L, sink, sc, bf, o); });
}
void ProfilingOps::softmax_pool(std::span<const PoolSlot> slots, int64_t spr, Mat out) {
  timed("softmax_pool", [&] { inner_.softmax_pool(slots, spr, out); });
}
void ProfilingOps::hadamard128(Mat x) {
  timed("hadamard128", [&] { inner_.hadamard128(x); });
}
void ProfilingOps::fake_quant_fp8(Mat x, int64_t n, int64_t b) {
  timed("fake_quant_fp8", [&] { inner_.fake_quant_fp8(x, n, b); });
}
void ProfilingOps::act_quant_fp8(Mat x, int64_t b) {
  timed("act_quant_fp8", [&] { inner_.act_quant_fp8(x, b); });
}
void ProfilingOps::fake_quant_fp4(Mat x, int64_t b) {
  timed("fake_quant_fp4", [&] { inner_.fake_quant_fp4(x, b); });
}
void ProfilingOps::indexer_scores(CMat q, int64_t h, CMat w, CMat k, const int32_t* vis, bool bf,
                                  Mat s) {
  timed("indexer_scores", [&] { inner_.indexer_scores(q, h, w, k, vis, bf, s); });
}
void ProfilingOps::sparse_attention_rows(CMat q, int64_t h, const float* const* rows, int64_t L,
                                         int64_t d, const float* sink, float sc, bool bf, Mat o) {
  timed("sparse_attention", [&] { inner_.sparse_attention_rows(q, h, rows, L, d, sink, sc, bf, o); });
}
void ProfilingOps::sparse_attention_rows_rounded(CMat q, int64_t h, const float* const* rows,
                                                 int64_t L, int64_t d, const float* sink, float sc,
                                                 bool bf, Mat o) {
  timed("sparse_attention",
        [&] { inner_.sparse_attention_rows_rounded(q, h, rows, L, d, sink, sc, bf, o); });
}
void ProfilingOps::paged_row_addresses(const int32_t* sel, int64_t K,
                                       std::span<const PagedCMat> rows, const float** out,
                                       int64_t ld) {
  timed("paged_row_addresses", [&] { inner_.paged_row_addresses(sel, K, rows, out, ld); });
}
void ProfilingOps::indexer_scores_multi(CMat q, int64_t h, CMat w, std::span<const PagedCMat> k,
                                        const int32_t* vis, bool bf, Mat s) {
  timed("indexer_scores", [&] { inner_.indexer_scores_multi(q, h, w, k, vis, bf, s); });
}
void ProfilingOps::topk(CMat s, const int32_t* vis, int64_t k, int32_t* out) {
  timed("topk", [&] { inner_.topk(s, vis, k, out); });
}
void ProfilingOps::moe_route_score(CMat x, const WeightRef& g, const float* b, int k, float rs,
                                   const RouteOpts& o, int32_t* ids, Mat w) {
  timed("moe_route_score", [&] { inner_.moe_route_score(x, g, b, k, rs, o, ids, w); });
}
void ProfilingOps::moe_route_hash(CMat x, const int32_t* t, const TensorView& tab,
                                  const WeightRef& g, float rs, int32_t* ids, Mat w) {
  timed("moe_route_hash", [&] { inner_.moe_route_hash(x, t, tab, g, rs, ids, w); });
}
void ProfilingOps::swiglu(CMat a, CMat b, float l, Mat out) {
  timed("swiglu", [&] { inner_.swiglu(a, b, l, out); });
}
void ProfilingOps::moe_experts(CMat x, const int32_t* ids, CMat w, int k,
                               std::span<const ExpertWeights> e, const MoeOpts& o, Mat out) {
  timed(e.size() == 1 ? "moe_experts (shared)" : "moe_experts (routed)",
        [&] { inner_.moe_experts(x, ids, w, k, e, o, out); });
}
void ProfilingOps::rms_norm_bf16(Mat x, int64_t g, float eps) {
  timed("rms_norm_bf16", [&] { inner_.rms_norm_bf16(x, g, eps); });
}
void ProfilingOps::sample(CMat logits, std::span<const SampleSpec> specs, int32_t* tokens) {
  timed("sample", [&] { inner_.sample(logits, specs, tokens); });
}
void ProfilingOps::argmax_rows(CMat logits, int32_t* tokens, int32_t* ids, float* probs) {
  timed("argmax_rows", [&] { inner_.argmax_rows(logits, tokens, ids, probs); });
}
void ProfilingOps::scatter_rows(std::span<const float* const> src, std::span<float* const> dst,
                                int64_t cols) {
  timed("scatter_rows", [&] { inner_.scatter_rows(src, dst, cols); });
}
void ProfilingOps::hadamard(Mat x, int64_t n) {
  timed("hadamard", [&] { inner_.hadamard(x, n); });
}

}  // namespace deepinfer::backend
