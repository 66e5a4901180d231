// The engine records every step size's graphs at start-up (EngineCore::capture_graphs), on the
// CPU through a decorator that claims to record: each unit's first two runs count as setups
// (CudaOps: a first run, then the capture), later runs as replays, and drop_recordings (the
// model's buffers moved) forgets every unit. Serving after start-up must then never drop the
// recordings (every buffer was sized by the largest steps first) and must add far fewer setups
// than an engine that records lazily; and the tokens are those of an engine that never records
// (the recorded step form is bitwise the eager one on the CPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/profiling_ops.h"
#include "runtime/engine_core.h"

namespace deepinfer {
namespace {

// Owns the backend it decorates (base-from-member: it must exist before ProfilingOps).
struct OwnedInner {
  explicit OwnedInner(std::unique_ptr<backend::Ops> o) : inner(std::move(o)) {}
  std::unique_ptr<backend::Ops> inner;
};

class CountingRecorder : private OwnedInner, public backend::ProfilingOps {
 public:
  CountingRecorder(std::unique_ptr<backend::Ops> decorated, int64_t max_rows)
      : OwnedInner(std::move(decorated)), ProfilingOps(*inner), max_rows_(max_rows) {
    set_enabled(false);
  }
  int64_t record_max_rows() const override { return max_rows_; }
  // A recorder that starts recording only after the engine's start-up (the lazy form).
  void set_max_rows(int64_t rows) { max_rows_ = rows; }
  void run_recorded(uint64_t key, const std::function<void()>& body) override {
    int64_t& runs = runs_[key];
    if (runs++ < 2) {
      ++counts_.setups;
      ++(runs == 1 ? counts_.eager : counts_.captured);
    } else {
      ++counts_.replayed;
    }
    ++in_unit_;
    body();
    --in_unit_;
  }
  // An eager linear (outside every unit) of at most max_rows rows: on a GPU, cuBLAS's first call
  // at a shape is a setup of milliseconds (stop 41), so serving should meet only shapes that
  // start-up met. Shapes are (rows, N, K).
  void linear(backend::CMat x, const backend::WeightRef& w, backend::Mat y,
              const backend::LinearOpts& o) override {
    note_eager(x.rows, w);
    ProfilingOps::linear(x, w, y, o);
  }
  // The grouped product (wo_a) is its own op on a device (ProfilingOps forwards it whole): its
  // shapes count too.
  void linear_grouped(backend::CMat x, const backend::WeightRef& w, int64_t groups, backend::Mat y,
                      const backend::LinearOpts& o) override {
    note_eager(x.rows, w);
    ProfilingOps::linear_grouped(x, w, groups, y, o);
  }
  void note_eager(int64_t rows, const backend::WeightRef& w) {
    if (in_unit_ == 0 && rows <= max_rows_) {
      const std::tuple<int64_t, int64_t, int64_t> shape{rows, w.n, w.k};
      if (serving_ && !eager_shapes_.contains(shape)) new_eager_shapes_.insert(shape);
      eager_shapes_.insert(shape);
    }
  }
  void start_serving() { serving_ = true; }
  const std::set<std::tuple<int64_t, int64_t, int64_t>>& new_eager_shapes() const {
    return new_eager_shapes_;
  }
  void drop_recordings() override {
    if (!runs_.empty()) ++counts_.drops;
    runs_.clear();
  }
  int64_t recording_setups() const override { return counts_.setups; }
  RecordingCounts recording_counts() const override { return counts_; }

 private:
  int64_t max_rows_;
  std::map<uint64_t, int64_t> runs_;
  RecordingCounts counts_;
  int in_unit_ = 0;
  bool serving_ = false;
  std::set<std::tuple<int64_t, int64_t, int64_t>> eager_shapes_, new_eager_shapes_;
};

struct Served {
  std::map<RequestHandle, std::vector<int32_t>> tokens;
  backend::Ops::RecordingCounts at_start, at_end;
  // Eager linears' shapes (rows, N, K) first met while serving (CountingRecorder::linear).
  std::set<std::tuple<int64_t, int64_t, int64_t>> new_eager_shapes;
};

// How the engine drafts: the trained small V4's MTP at a fixed k (verifies and catches up
// varying row counts), or the default model's DSpark with varlen (its draft blocks are as deep
// as the budget admits, so their row counts are sequences x depth for every depth up to k).
struct Drafting {
  const char* model = "models/v4-small";
  const char* method = "mtp";
  int k = 3;
  bool varlen = false;
};

// Greedy requests of varied prompt lengths and lengths (batches shrink as they end).
Served serve(bool record, bool capture_at_start, const Drafting& how = {}) {
  EngineOptions o;
  o.model_dir = std::string(DEEPINFER_TEST_SOURCE_DIR) + "/" + how.model;
  o.backend = "opt";
  o.max_model_len = 256;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 128;
  o.speculative_method = how.method;
  o.num_speculative_tokens = how.k;
  o.speculative_varlen = how.varlen;
  o.async_scheduling = false;
  constexpr int64_t kRecordRows = 64;
  CountingRecorder* rec = nullptr;
  auto decorate = [&](std::unique_ptr<backend::Ops> ops) -> std::unique_ptr<backend::Ops> {
    if (!record) return ops;
    auto r = std::make_unique<CountingRecorder>(std::move(ops), capture_at_start ? kRecordRows : 0);
    rec = r.get();
    return r;
  };
  auto core = runtime::EngineCore::create(o, {}, {}, {}, false, decorate);
  EXPECT_TRUE(core.ok()) << core.status().message();
  Served out;
  if (!core.ok()) return out;
  if (rec != nullptr) {
    rec->set_max_rows(kRecordRows);
    rec->start_serving();
    out.at_start = rec->recording_counts();
  }
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt;
    for (int j = 0; j < 5 + 7 * i; ++j) prompt.push_back((j * 131 + i * 17) % 4000 + 50);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 10 + 6 * (i % 5);
    p.ignore_eos = true;
    auto h = (*core)->submit(prompt, "", p, nullptr);
    EXPECT_TRUE(h.ok());
  }
  while ((*core)->has_unfinished()) {
    for (const RequestOutput& r : (*core)->step()) {
      if (r.finished) out.tokens[r.id] = r.outputs.at(0).token_ids;
    }
  }
  if (rec != nullptr) {
    out.at_end = rec->recording_counts();
    out.new_eager_shapes = rec->new_eager_shapes();
  }
  return out;
}

std::string shapes_text(const std::set<std::tuple<int64_t, int64_t, int64_t>>& shapes) {
  std::string t;
  for (const auto& [m, n, k] : shapes) {
    t += std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " ";
  }
  return t;
}

TEST(GraphCapture, ServingAfterStartUpNeitherDropsNorSetsUpMuch) {
  const Served eager = serve(false, false);
  const Served lazy = serve(true, false);
  const Served early = serve(true, true);
  ASSERT_EQ(eager.tokens.size(), 12u);
  EXPECT_EQ(lazy.tokens, eager.tokens);
  EXPECT_EQ(early.tokens, eager.tokens);

  EXPECT_EQ(lazy.at_start.setups, 0);
  EXPECT_GT(early.at_start.captured, 0);
  const int64_t lazy_setups = lazy.at_end.setups - lazy.at_start.setups;
  const int64_t early_setups = early.at_end.setups - early.at_start.setups;
  // Lazily, a bigger step than any before dropped every recording while serving.
  EXPECT_GT(lazy.at_end.drops, 0);
  EXPECT_EQ(early.at_end.drops, early.at_start.drops) << "a drop while serving";
  // The figures quoted in docs/cuda_backend.md (147 setups and 9 drops lazily, none after).
  std::printf(
      "setups while serving: lazily %lld (%lld drops of every recording), after start-up "
      "recording %lld (%lld drops; %lld captured at start-up)\n",
      static_cast<long long>(lazy_setups), static_cast<long long>(lazy.at_end.drops),
      static_cast<long long>(early_setups),
      static_cast<long long>(early.at_end.drops - early.at_start.drops),
      static_cast<long long>(early.at_start.captured));
  EXPECT_LT(early_setups * 4, lazy_setups) << "early " << early_setups << ", lazy " << lazy_setups;
  EXPECT_EQ(shapes_text(early.new_eager_shapes), "") << "eager linears first met while serving";
}

// DSpark with varlen drafts blocks of every depth from 1 to k: start-up records every row
// bucket of sequences x depth, so serving sets up no drafting unit (stop 40, H100: DSpark varlen
// ran 1-10 steps with setups per timed run, up to 31 ms of a 0.25 s run at 16 requests).
TEST(GraphCapture, DSparkBlocksOfEveryDepthAreRecordedAtStartUp) {
  Drafting dspark;
  dspark.model = "models/default";
  dspark.method = "dspark";
  dspark.k = 5;
  dspark.varlen = true;
  const Served eager = serve(false, false, dspark);
  const Served early = serve(true, true, dspark);
  ASSERT_EQ(eager.tokens.size(), 12u);
  EXPECT_EQ(early.tokens, eager.tokens);
  const int64_t setups = early.at_end.setups - early.at_start.setups;
  std::printf(
      "DSpark varlen: setups while serving after start-up recording %lld (%lld captured and "
      "%lld replayed at start-up)\n",
      static_cast<long long>(setups), static_cast<long long>(early.at_start.captured),
      static_cast<long long>(early.at_start.replayed));
  EXPECT_EQ(setups, 0);
  EXPECT_EQ(early.at_end.drops, early.at_start.drops) << "a drop while serving";
  EXPECT_EQ(shapes_text(early.new_eager_shapes), "") << "eager linears first met while serving";
}

}  // namespace
}  // namespace deepinfer
