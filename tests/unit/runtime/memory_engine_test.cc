// The engine when the backend runs out of memory inside a step (backend::OutOfMemory thrown by
// an op, as an exhausted GPU does): every request of that step ends with an error that says
// what ran out and what to change, no request vanishes, and the engine keeps serving the next
// requests. Driven through EngineCore's forward seam, in both scheduling modes.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine_run_util.h"
#include "runtime/engine_core.h"

namespace deepinfer {
namespace {

namespace v4 = model;
using engine_test::greedy;
using engine_test::prompt;
using engine_test::tiny_dir;

void run(bool async_scheduling) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.num_threads = 1;
  o.async_scheduling = async_scheduling;
  auto core = runtime::EngineCore::create(o);
  ASSERT_TRUE(core.ok()) << core.status().message();
  const int64_t V = (*core)->vocab_size();
  int calls = 0;
  // Forward number 2 runs out of memory; the others return random logits.
  (*core)->replace_forward_for_benchmark([&](const v4::StepInputs& in, v4::StepOutputs& out) {
    if (++calls == 2) throw backend::OutOfMemory("GPU memory exhausted: test");
    std::mt19937 rng(static_cast<uint32_t>(calls));
    std::normal_distribution<float> nd(0.0f, 3.0f);
    int64_t rows = 0;
    for (const auto& s : in.sequences) rows += s.logits == v4::LogitsWanted::kNone ? 0 : 1;
    out.logits.resize(static_cast<size_t>(rows * V));
    for (float& x : out.logits) x = nd(rng);
    out.logit_rows = rows;
    return Status::ok_status();
  });
  std::vector<RequestHandle> first;
  for (int i = 0; i < 3; ++i) {
    auto h = (*core)->submit(prompt(5 + i, i), "", greedy(4), {});
    ASSERT_TRUE(h.ok()) << h.status().message();
    first.push_back(*h);
  }
  std::vector<RequestOutput> done;
  for (int guard = 0; guard < 100 && (*core)->has_unfinished(); ++guard) {
    for (auto& r : (*core)->step()) done.push_back(std::move(r));
  }
  // Every request of the failing step ended once, with the reason; none vanished.
  ASSERT_EQ(done.size(), first.size());
  for (const RequestOutput& r : done) {
    const CompletionOutput& c = r.outputs.at(0);
    EXPECT_EQ(c.finish_reason, "error");
    EXPECT_NE(c.error.find("out of memory: GPU memory exhausted: test"), std::string::npos)
        << c.error;
    EXPECT_NE(c.error.find("max_num_seqs"), std::string::npos) << c.error;
  }
  // The engine keeps serving.
  auto h = (*core)->submit(prompt(6, 9), "", greedy(3), {});
  ASSERT_TRUE(h.ok());
  std::vector<RequestOutput> later;
  for (int guard = 0; guard < 100 && (*core)->has_unfinished(); ++guard) {
    for (auto& r : (*core)->step()) later.push_back(std::move(r));
  }
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].outputs.at(0).finish_reason, "length");
  EXPECT_EQ(later[0].outputs.at(0).token_ids.size(), 3u);
}

TEST(EngineMemory, OutOfMemoryInAStepFailsItsRequestsAndTheEngineKeepsServing) {
  run(/*async_scheduling=*/false);
  run(/*async_scheduling=*/true);
}

}  // namespace
}  // namespace deepinfer
