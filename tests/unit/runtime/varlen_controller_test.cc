// Confidence-scheduled verification's controller (engine_spec.cc, sched/verify_budget.h) on a
// backend where drafting cannot pay at 64 requests: steps cost 0.5 ms plus 0.02 ms per verified
// draft row, and a drafter that is always right (n-gram over a periodic output), so verifying
// k = 4 drafts for everyone yields 5x the tokens at 11x the step time. Fixed k drafts every step
// (and is slower); varlen must keep verification to a small share of its request-steps. Driven
// through EngineCore's forward seam (no model caches: the n-gram drafter reads none),
// synchronously. What it does not reproduce: the H200's misjudgment of 2026-12-03 (a start-up
// profile whose one-sequence forwards read dearer than the live batched step), since the profile
// here runs the tiny model on the CPU, whose cost grows with every row; the same test with the
// step-cost curve of before that fix also passes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "engine_run_util.h"
#include "runtime/engine_core.h"

namespace deepinfer {
namespace {

namespace v4 = model;
using engine_test::greedy;
using engine_test::prompt;
using engine_test::tiny_dir;

struct ControlledRun {
  EngineStats stats;
  int64_t tokens = 0;
};

ControlledRun run_engine(int32_t k, bool varlen) {
  EngineOptions o;
  o.model_dir = tiny_dir();
  o.num_threads = 1;
  o.async_scheduling = false;
  o.max_num_seqs = 64;
  o.enable_prefix_caching = false;
  o.speculative_method = k > 0 ? "ngram" : "off";
  o.num_speculative_tokens = k;
  o.speculative_varlen = varlen;
  auto core = runtime::EngineCore::create(o);
  EXPECT_TRUE(core.ok()) << core.status().message();
  if (!core.ok()) return {};
  const int64_t V = (*core)->vocab_size();
  (*core)->replace_forward_for_benchmark([&](const v4::StepInputs& in, v4::StepOutputs& out) {
    const auto rows = static_cast<int64_t>(in.token_ids.size());
    const auto seqs = static_cast<int64_t>(in.sequences.size());
    std::this_thread::sleep_for(std::chrono::microseconds(500 + 20 * (rows - seqs)));
    // The greedy token after position p is 10 + (p + 1) % 5: periodic, so n-gram drafts are right.
    out.logit_rows = 0;
    out.logits.clear();
    for (const v4::SequenceSpan& s : in.sequences) {
      if (s.logits == v4::LogitsWanted::kNone) continue;
      const int64_t first = s.logits == v4::LogitsWanted::kAll ? s.begin : s.begin + s.count - 1;
      for (int64_t r = first; r < s.begin + s.count; ++r) {
        const size_t at = out.logits.size();
        out.logits.resize(at + static_cast<size_t>(V), 0.0f);
        const int32_t p = in.positions[static_cast<size_t>(r)];
        out.logits[at + static_cast<size_t>(10 + (p + 1) % 5)] = 20.0f;
        ++out.logit_rows;
      }
    }
    return Status::ok_status();
  });
  for (int i = 0; i < 64; ++i) {
    auto h = (*core)->submit(prompt(4, i), "", greedy(96), {});
    EXPECT_TRUE(h.ok());
  }
  ControlledRun r;
  for (int guard = 0; guard < 20000 && (*core)->has_unfinished(); ++guard) {
    for (const RequestOutput& out : (*core)->step()) {
      r.tokens += static_cast<int64_t>(out.outputs.at(0).token_ids.size());
    }
  }
  r.stats = (*core)->stats();
  return r;
}

TEST(VarlenController, StopsDraftingWhereItCannotPayAtSixtyFourRequests) {
  const ControlledRun fixed = run_engine(4, /*varlen=*/false);
  const ControlledRun varlen = run_engine(4, /*varlen=*/true);
  EXPECT_EQ(fixed.tokens, 64 * 96);
  EXPECT_EQ(varlen.tokens, 64 * 96);
  // Fixed k drafts every step, and the drafts are right: the situation is what it claims.
  ASSERT_GT(fixed.stats.spec_verify_steps, 64 * 10);
  ASSERT_GT(fixed.stats.spec_accepted_tokens, fixed.stats.spec_draft_tokens * 3 / 4);
  // Varlen verified drafts in a small share of its request-steps: it learned the live step
  // costs and paused (a controller misled by the profile's guesses drafts through the run).
  const double share = static_cast<double>(varlen.stats.spec_verify_steps) /
                       static_cast<double>(varlen.stats.generated_tokens);
  std::printf("  verify request-steps: fixed k %lld, varlen %lld (%.1f%% of its %lld tokens); "
              "steps: fixed %lld, varlen %lld; executor seconds: fixed %.3f, varlen %.3f\n",
              static_cast<long long>(fixed.stats.spec_verify_steps),
              static_cast<long long>(varlen.stats.spec_verify_steps), 100.0 * share,
              static_cast<long long>(varlen.stats.generated_tokens),
              static_cast<long long>(fixed.stats.steps), static_cast<long long>(varlen.stats.steps),
              fixed.stats.forward_seconds, varlen.stats.forward_seconds);
  EXPECT_LT(share, 0.15);
}

}  // namespace
}  // namespace deepinfer
