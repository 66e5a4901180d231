// The recorded step form == eager steps, on the CPU.
//
// A backend that records (CudaOps: CUDA graphs) makes the model run every step of at most
// record_max_rows() rows padded to a bucket, its dense parts as Ops::run_recorded units and its
// integer row inputs in backend memory (model.cc, layers_recorded). Here a CPU decorator claims
// to record (it runs every unit's body), so the same padded, split form runs on the opt backend
// and must give the eager logits bit for bit (the CPU backends compute each row independently
// of the step's row count). The decorator also checks the contract of run_recorded that a real
// replay relies on and that a CPU run would otherwise never notice:
//   * every run of a key makes the same op calls over the same buffers (a CUDA graph replays
//     the first recorded ones), unless the model dropped the recordings in between;
//   * inside a unit, the integer inputs (ids, positions, row lists) are backend memory, never a
//     host array (a graph would replay the array's contents of its capture).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend/profiling_ops.h"
#include "model_test_util.h"
#include "model/recorded_steps.h"
#include "serve_pattern.h"

namespace deepinfer::model::testing {
namespace {

class RecordingOps : public backend::ProfilingOps {
 public:
  RecordingOps(backend::Ops& inner, int64_t max_rows) : ProfilingOps(inner), max_rows_(max_rows) {
    set_enabled(false);
  }

  int64_t record_max_rows() const override { return max_rows_; }
  void run_recorded(uint64_t key, const std::function<void()>& body) override {
    trace_.clear();
    in_unit_ = true;
    body();
    in_unit_ = false;
    ++runs_;
    auto [it, first] = traces_.emplace(key, trace_);
    if (!first && it->second != trace_) ++trace_changes_;
  }
  void drop_recordings() override {
    traces_.clear();
    ++drops_;
  }

  void* allocate(size_t bytes) override {
    void* p = ProfilingOps::allocate(bytes);
    allocations_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  void deallocate(void* p) override {
    allocations_.erase(static_cast<const char*>(p));
    ProfilingOps::deallocate(p);
  }

  void embed(const int32_t* ids, int64_t n, const backend::WeightRef& t, backend::Mat out) override {
    note("embed", ids, out.data, n);
    ProfilingOps::embed(ids, n, t, out);
  }
  void linear(backend::CMat x, const backend::WeightRef& w, backend::Mat y,
              const backend::LinearOpts& o) override {
    note("linear", x.data, y.data, x.rows);
    // Outside the units (the LM head): a row count of at most the recorded rows is a bucket, so
    // a device backend's per-shape setup (cuBLAS's first call) happens at start-up.
    if (!in_unit_ && x.rows <= max_rows_ && RecordedSteps::bucket(x.rows, max_rows_) != x.rows) {
      ++eager_linears_off_bucket_;
    }
    ProfilingOps::linear(x, w, y, o);
  }
  void linear_grouped(backend::CMat x, const backend::WeightRef& w, int64_t groups, backend::Mat y,
                      const backend::LinearOpts& o) override {
    note("linear_grouped", x.data, y.data, x.rows);
    if (!in_unit_ && x.rows <= max_rows_ && RecordedSteps::bucket(x.rows, max_rows_) != x.rows) {
      ++eager_linears_off_bucket_;
    }
    ProfilingOps::linear_grouped(x, w, groups, y, o);
  }
  void copy_rows(backend::CMat src, const int32_t* rows, backend::Mat dst) override {
    if (rows != nullptr) note_ints(rows);
    note("copy_rows", src.data, dst.data, dst.rows);
    ProfilingOps::copy_rows(src, rows, dst);
  }
  void rope(backend::Mat x, int64_t h, int64_t d, const int32_t* positions,
            std::span<const float> freqs, bool inverse) override {
    note_ints(positions);
    note("rope", x.data, positions, x.rows);
    ProfilingOps::rope(x, h, d, positions, freqs, inverse);
  }
  // The fused chains read positions too (kv_rows_finish, q_heads_finish): inside a unit they
  // must be backend memory, as rope's.
  void kv_rows_finish(backend::Mat x, const backend::WeightRef& w, float eps,
                      const int32_t* positions, std::span<const float> freqs, bool rounded,
                      int64_t quant_cols, int64_t quant_block) override {
    note_ints(positions);
    note("kv_rows_finish", x.data, positions, x.rows);
    ProfilingOps::kv_rows_finish(x, w, eps, positions, freqs, rounded, quant_cols, quant_block);
  }
  void q_heads_finish(backend::Mat q, int64_t n_heads, int64_t head_dim, float eps,
                      const int32_t* positions, std::span<const float> freqs,
                      bool official) override {
    note_ints(positions);
    note("q_heads_finish", q.data, positions, q.rows);
    ProfilingOps::q_heads_finish(q, n_heads, head_dim, eps, positions, freqs, official);
  }
  void moe_route_hash(backend::CMat x, const int32_t* token_ids, const TensorView& tid2eid,
                      const backend::WeightRef& gate, float s, int32_t* ids,
                      backend::Mat weights) override {
    note_ints(token_ids);
    note("moe_route_hash", token_ids, ids, x.rows);
    ProfilingOps::moe_route_hash(x, token_ids, tid2eid, gate, s, ids, weights);
  }
  void moe_experts(backend::CMat x, const int32_t* ids, backend::CMat weights, int top_k,
                   std::span<const backend::ExpertWeights> experts, const backend::MoeOpts& opts,
                   backend::Mat out) override {
    note_ints(ids);
    note("moe_experts", ids, out.data, x.rows);
    ProfilingOps::moe_experts(x, ids, weights, top_k, experts, opts, out);
  }

  int64_t runs() const { return runs_; }
  int64_t drops() const { return drops_; }
  int64_t trace_changes() const { return trace_changes_; }
  int64_t host_arrays() const { return host_arrays_; }
  int64_t eager_linears_off_bucket() const { return eager_linears_off_bucket_; }
  size_t recorded_keys() const { return traces_.size(); }

 private:
  using Call = std::tuple<std::string, const void*, const void*, int64_t>;
  void note(const char* op, const void* a, const void* b, int64_t rows) {
    if (in_unit_) trace_.emplace_back(op, a, b, rows);
  }
  // An integer input read inside a unit must lie in memory this backend allocated.
  void note_ints(const int32_t* p) {
    if (!in_unit_ || p == nullptr) return;
    const char* c = reinterpret_cast<const char*>(p);
    auto it = allocations_.upper_bound(c);
    if (it == allocations_.begin() || c >= std::prev(it)->first + std::prev(it)->second) {
      ++host_arrays_;
    }
  }

  int64_t max_rows_;
  bool in_unit_ = false;
  std::vector<Call> trace_;
  std::map<uint64_t, std::vector<Call>> traces_;
  std::map<const char*, size_t> allocations_;
  int64_t runs_ = 0, drops_ = 0, trace_changes_ = 0, host_arrays_ = 0;
  int64_t eager_linears_off_bucket_ = 0;
};

std::vector<float> serve(Model& m, std::span<const int32_t> prompt) {
  std::string error;
  std::vector<float> all = serve_pattern(m, prompt, &error);
  EXPECT_TRUE(error.empty()) << error;
  return all;
}

// One checkpoint served eagerly and through the recording decorator: the same logits bit for
// bit, recordings dropped at least once (a bigger bucket grew the recorded buffers), every run
// of a unit the same op calls, no host array inside a unit.
// `prompt_of(vocab)`: the prompt (at least 100 ids).
void expect_padded_equals_eager(
    const char* cfg, const char* variant,
    const std::function<std::vector<int32_t>(int64_t vocab)>& prompt_of) {
  SCOPED_TRACE(std::string(cfg) + "/" + variant);
  RecordingOps rec(opt_ops(), 64);
  auto eager = load_test_model(cfg, variant, opt_ops());
  auto recorded = load_test_model(cfg, variant, rec);
  ASSERT_TRUE(eager && recorded);
  const std::vector<int32_t> prompt = prompt_of(eager->vocab_size());
  const std::vector<float> want = serve(*eager, prompt);
  const std::vector<float> got = serve(*recorded, prompt);
  ASSERT_EQ(got.size(), want.size());
  const Diff d = compare_logits(got, want, eager->vocab_size());
  EXPECT_EQ(d.max_abs, 0.0) << "worst row " << d.worst_row;
  EXPECT_GT(rec.runs(), 0);
  EXPECT_GT(rec.drops(), 0);
  EXPECT_EQ(rec.trace_changes(), 0);
  EXPECT_EQ(rec.host_arrays(), 0);
  EXPECT_EQ(rec.eager_linears_off_bucket(), 0);
}

TEST(ModelRecorded, PaddedUnitsEqualEagerSteps) {
  for (const auto& [cfg, variant] : {std::pair{"v4_tiny_a", "hf_fp32"},
                                     std::pair{"v4_tiny_a", "official_quant"},
                                     std::pair{"v4_tiny_b", "hf_bf16"}}) {
    expect_padded_equals_eager(cfg, variant, [&](int64_t) {
      std::vector<int32_t> prompt = Goldens(cfg).prompt("len300");
      prompt.resize(100);
      return prompt;
    });
  }
}

// DeepSeek-V4.1: the same, with its Engram rows (gathered between the units, zero past the real
// rows), single-pass mHC's carried pre, the DSpark features, and every CSA2 role's core between
// the units.
TEST(ModelRecorded, V41PaddedUnitsEqualEagerSteps) {
  for (const auto& [cfg, variant] : {std::pair{"v41_tiny_a", "official_bf16"},
                                     std::pair{"v41_tiny_a", "official_quant"},
                                     std::pair{"v41_tiny_a", "hf_bf16"},
                                     std::pair{"v41_tiny_b", "official_bf16"}}) {
    // Any ids of the vocabulary: both runs see the same ones, and the comparison is bitwise.
    expect_padded_equals_eager(cfg, variant, [](int64_t vocab) {
      std::vector<int32_t> prompt(100);
      for (size_t i = 0; i < prompt.size(); ++i) {
        prompt[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(vocab));
      }
      return prompt;
    });
  }
}

// A drafting transcript (every value a model returned, in order) through the recording
// decorator `rec` equals the eager model's bit for bit, and the units kept the replay contract.
void expect_same_drafting(const std::vector<float>& want, const std::vector<float>& got,
                          const RecordingOps& rec) {
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  size_t diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
  EXPECT_EQ(diff, 0u) << "of " << got.size() << " values";
  EXPECT_GT(rec.runs(), 0);
  EXPECT_EQ(rec.trace_changes(), 0);
  EXPECT_EQ(rec.host_arrays(), 0);
  EXPECT_EQ(rec.eager_linears_off_bucket(), 0);
}

// DeepSeek-V4's MTP block drafting on a recording backend (mtp_run's recorded form): catch-up
// rows, chained run-ahead rows and several sequences at once give the eager model's logits and
// output streams bit for bit, the MTP state cuts back to the same next draft, and its units keep
// the replay contract (the same calls every run, no host array inside a unit), interleaved with
// main steps (one fingerprint covers both sets of buffers).
TEST(ModelRecorded, MtpDraftingEqualsEagerDrafting) {
  for (const char* variant : {"official_quant", "official_fp32"}) {
    SCOPED_TRACE(variant);
    RecordingOps rec(opt_ops(), 64);
    auto eager = load_test_model("v4_tiny_a", variant, opt_ops());
    auto recorded = load_test_model("v4_tiny_a", variant, rec);
    ASSERT_TRUE(eager && recorded);
    ASSERT_EQ(recorded->drafter(), DrafterKind::kMtp);
    const int64_t S = static_cast<int64_t>(eager->config().hc_mult) * eager->config().hidden_size;
    std::vector<int32_t> ids = Goldens("v4_tiny_a").prompt("len300");
    ids.resize(60);
    const int64_t V = eager->vocab_size();
    // One model's drafting transcript: every logit and stream it returns, in order.
    auto transcript = [&](Model& m) {
      std::vector<float> all;
      auto keep = [&](const std::vector<float>& v) { all.insert(all.end(), v.begin(), v.end()); };
      SequenceCache a = m.new_sequence(), b = m.new_sequence();
      std::vector<float> ha, hb;
      for (auto [seq, h, T] : {std::tuple{&a, &ha, int64_t{41}}, std::tuple{&b, &hb, int64_t{23}}}) {
        auto o = m.extend(*seq, std::span<const int32_t>(ids).first(static_cast<size_t>(T)),
                          LogitsWanted::kNone, true);
        EXPECT_TRUE(o.ok());
        if (!o.ok()) return all;
        // Catch-up rows 0..T-2 (one behind), the last row's streams kept for the chain.
        auto d = m.mtp_draft(*seq, std::span<const float>(o->hidden).first((T - 1) * S),
                             std::span<const int32_t>(ids).subspan(1, static_cast<size_t>(T - 1)));
        EXPECT_TRUE(d.ok());
        if (!d.ok()) return all;
        keep(*d);
        *h = std::vector<float>(o->hidden.end() - S, o->hidden.end());
      }
      // Both sequences' last rows together, then three chained steps on the block's streams.
      const int32_t na = ids[41], nb = ids[23];
      const MtpRows both[2] = {{&a, ha, {&na, 1}}, {&b, hb, {&nb, 1}}};
      auto step = m.mtp_step(both);
      EXPECT_TRUE(step.ok());
      if (!step.ok()) return all;
      keep(step->logits);
      keep(step->streams);
      for (int j = 0; j < 3; ++j) {
        const std::vector<float> from = step->streams;
        const int32_t t[2] = {static_cast<int32_t>((j * 7 + 3) % V),
                              static_cast<int32_t>((j * 5 + 1) % V)};
        const MtpRows chained[2] = {{&a, std::span<const float>(from).first(static_cast<size_t>(S)),
                                     {&t[0], 1}},
                                    {&b, std::span<const float>(from).subspan(static_cast<size_t>(S)),
                                     {&t[1], 1}}};
        step = m.mtp_step(chained, /*run_ahead=*/true, j == 2 ? MtpOutputs::kTokens
                                                              : MtpOutputs::kLogits);
        EXPECT_TRUE(step.ok()) << step.status().to_string();
        if (!step.ok()) return all;
        keep(step->logits);
        keep(step->streams);
        for (const int32_t tok : step->tokens) all.push_back(static_cast<float>(tok));
        // A main decode step between drafts: the two kinds of recorded units interleave.
        if (j == 0) {
          EXPECT_TRUE(m.extend(b, {&nb, 1}, LogitsWanted::kNone, false).ok());
        }
      }
      // Cut back to the accepted state: the next draft equals the one before the chain.
      EXPECT_TRUE(a.truncate_draft(a.length() - 1).ok());
      auto again = m.mtp_draft(a, ha, {&na, 1});
      EXPECT_TRUE(again.ok());
      if (again.ok()) keep(*again);
      // mtp_chain (chained steps with their ids and streams on the backend: the units of its
      // own keys), two sequences with 1 and 3 catch-up rows, three times over.
      SequenceCache c = m.new_sequence(), e = m.new_sequence();
      std::vector<float> hc, he;
      for (auto [seq, h, T, rows] : {std::tuple{&c, &hc, int64_t{30}, int64_t{1}},
                                     std::tuple{&e, &he, int64_t{17}, int64_t{3}}}) {
        auto o = m.extend(*seq, std::span<const int32_t>(ids).first(static_cast<size_t>(T)),
                          LogitsWanted::kNone, true);
        EXPECT_TRUE(o.ok());
        if (!o.ok()) return all;
        const int64_t done = T - rows;
        EXPECT_TRUE(m.mtp_draft(*seq, std::span<const float>(o->hidden).first(done * S),
                                std::span<const int32_t>(ids).subspan(1, static_cast<size_t>(done)))
                        .ok());
        h->assign(o->hidden.begin() + done * S, o->hidden.end());
      }
      const MtpRows catch_up[2] = {{&c, hc, std::span<const int32_t>(ids).subspan(30, 1)},
                                   {&e, he, std::span<const int32_t>(ids).subspan(15, 3)}};
      for (int round = 0; round < 3; ++round) {
        auto chain = m.mtp_chain(catch_up, 4, false, true);
        EXPECT_TRUE(chain.ok()) << chain.status().to_string();
        if (!chain.ok()) return all;
        for (const int32_t t : chain->tokens) all.push_back(static_cast<float>(t));
        all.insert(all.end(), chain->probs.begin(), chain->probs.end());
        EXPECT_TRUE(c.truncate_draft(29).ok());
        EXPECT_TRUE(e.truncate_draft(14).ok());
        // A plain step of the same size between rounds (one row each, its head in the unit):
        // its units must not be the chained steps' (their ids live in another buffer).
        SequenceCache c2 = c.clone();
        const MtpRows plain[2] = {{&c, hc, std::span<const int32_t>(ids).subspan(30, 1)},
                                  {&c2, hc, std::span<const int32_t>(ids).subspan(30, 1)}};
        auto one_each = m.mtp_step(plain, false, MtpOutputs::kTokens);
        EXPECT_TRUE(one_each.ok());
        if (one_each.ok()) {
          for (const int32_t t : one_each->tokens) all.push_back(static_cast<float>(t));
        }
        EXPECT_TRUE(c.truncate_draft(29).ok());
      }
      return all;
    };
    expect_same_drafting(transcript(*eager), transcript(*recorded), rec);
  }
}

// DeepSeek-V4.1's DSpark drafts on a recording backend (the drafter's stages and base logits as
// recorded units, draft_stages_recorded): batched drafts of several sequences give the eager
// model's tokens, confidences and draft logits bit for bit, before and after main steps that
// use the same recordings' fingerprint, and the units keep the replay contract.
TEST(ModelRecorded, DSparkDraftsEqualEagerDrafts) {
  for (const char* variant : {"official_bf16", "official_quant"}) {
    SCOPED_TRACE(variant);
    RecordingOps rec(opt_ops(), 64);
    auto eager = load_test_model("v41_tiny_a", variant, opt_ops());
    auto recorded = load_test_model("v41_tiny_a", variant, rec);
    ASSERT_TRUE(eager && recorded);
    ASSERT_EQ(recorded->drafter(), DrafterKind::kDSpark);
    const int64_t V = eager->vocab_size();
    const int k = eager->config().dspark.block_size;
    std::vector<int32_t> ids(80);
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(V));
    }
    // Every draft's tokens, confidences and logits, in order, over three rounds of drafting
    // three sequences (contexts of different lengths) with a main step of each between rounds.
    auto transcript = [&](Model& m) {
      std::vector<float> all;
      std::vector<SequenceCache> seqs;
      for (const size_t len : {size_t{9}, size_t{33}, size_t{70}}) {
        seqs.push_back(m.new_sequence());
        EXPECT_TRUE(m.extend(seqs.back(), std::span<const int32_t>(ids).first(len)).ok());
      }
      for (int round = 0; round < 3; ++round) {
        std::vector<DSparkJob> jobs;
        for (size_t e = 0; e < seqs.size(); ++e) {
          jobs.push_back({&seqs[e], ids[static_cast<size_t>(seqs[e].length()) % ids.size()], {}, {}});
        }
        auto blocks = m.dspark_draft_all(jobs, k, /*logits=*/true);
        EXPECT_TRUE(blocks.ok()) << blocks.status().to_string();
        if (!blocks.ok()) return all;
        for (const DraftBlock& b : *blocks) {
          for (const int32_t t : b.tokens) all.push_back(static_cast<float>(t));
          all.insert(all.end(), b.confidence.begin(), b.confidence.end());
          all.insert(all.end(), b.logits.begin(), b.logits.end());
        }
        for (size_t e = 0; e < seqs.size(); ++e) {
          EXPECT_TRUE(m.extend(seqs[e], {&jobs[e].anchor, 1}).ok());
        }
      }
      return all;
    };
    expect_same_drafting(transcript(*eager), transcript(*recorded), rec);
  }
}

// Models come and go on one backend: a model's recordings replay its weights and buffers, so
// they must go with it (a CUDA graph of a destroyed model, found again under a key a later
// model uses, replays freed memory: an illegal address on the H200 before this was mended).
TEST(ModelRecorded, ADestroyedModelTakesItsRecordingsWithIt) {
  RecordingOps rec(opt_ops(), 64);
  std::vector<int32_t> prompt = Goldens("v4_tiny_a").prompt("len300");
  prompt.resize(100);
  for (const char* cfg : {"v4_tiny_a", "v4_tiny_b", "v4_tiny_a"}) {
    SCOPED_TRACE(cfg);
    auto eager = load_test_model(cfg, "hf_fp32", opt_ops());
    auto recorded = load_test_model(cfg, "hf_fp32", rec);
    ASSERT_TRUE(eager && recorded);
    EXPECT_EQ(serve(*recorded, prompt), serve(*eager, prompt));
    EXPECT_GT(rec.recorded_keys(), 0u);
    recorded.reset();
    EXPECT_EQ(rec.recorded_keys(), 0u) << "recordings outlived their model";
  }
  EXPECT_EQ(rec.trace_changes(), 0);
}

}  // namespace
}  // namespace deepinfer::model::testing
