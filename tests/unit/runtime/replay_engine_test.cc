// SWA bounded replay through the engine (EngineOptions::prefill_truncation_mode = "compact";
// docs/bounded_replay.md), on the tiny V4.1 checkpoint v41_tiny_a (window 8, upper layers 6-7,
// DSpark block 4; its exactness horizon, model/bounded_replay.h upper_exact_keep, is
// 2 · 7 + 1 = 15 tokens). What is checked, and why it must hold:
//   * prompts no longer than keep skip nothing: outputs (tokens, logprobs) equal the engine with
//     replay off, bit for bit, and no row is counted as skipped;
//   * with keep at the horizon (16 >= 15) every skipped row lies outside what any output reads,
//     so long prompts, chunked prefill, prefix-cache hits on truncated snapshots and DSpark
//     speculation all give exactly the outputs of replay off, while rows are skipped;
//   * with keep inside the horizon the outputs are the approximation the model computes (the
//     engine equals a truncated prefill driven by hand) and the skipped rows are counted
//     exactly;
//   * requests with prompt logprobs run the full prefill (same scores and outputs as off);
//   * a keep below window + the longest draft, a V4 model, a bad mode are refused;
//   * encoder side: with a snapshot store that keeps compressed parts but not windows, a hit
//     of h <= keep tokens is replayed from position 0 (outputs equal off) and a longer one
//     recomputes exactly its last `keep` tokens (counted; the outputs equal the model's window
//     replay driven by hand).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "deepinfer/engine.h"
#include "engine_run_util.h"
#include "model/bounded_replay.h"
#include "model/model.h"

namespace deepinfer {
namespace {

using namespace engine_test;  // NOLINT: the shared runners

std::string v41_dir() { return source_dir() + "/tests/data/model/v41_tiny_a/official_bf16"; }

EngineOptions replay_options(int keep) {
  EngineOptions o;
  o.model_dir = v41_dir();
  o.num_threads = 1;
  o.kv_block_size = 16;  // a multiple of the ratios (2, 1)
  o.prefill_truncation_mode = keep > 0 ? "compact" : "none";
  o.prefill_keep_tokens = keep;
  return o;
}

Req request(std::vector<int32_t> ids, SamplingParams p) {
  Req r;
  r.ids = std::move(ids);
  r.params = p;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Greedy continuation by Model::extend with the prompt's rows before its last `keep` skipping
// the upper layers (what the engine's prefill computes), starting from `seq` at `start`.
std::vector<int32_t> greedy_truncated(model::Model& m, model::SequenceCache& seq,
                                      const std::vector<int32_t>& ids, int64_t start,
                                      int64_t keep, int n) {
  const int64_t from = model::upper_kept_from(static_cast<int64_t>(ids.size()), keep);
  const auto count = static_cast<int64_t>(ids.size()) - start;
  auto r = m.extend(seq, {ids.data() + start, static_cast<size_t>(count)},
                    model::LogitsWanted::kLast, false, model::upper_skip_rows(start, count, from));
  EXPECT_TRUE(r.ok()) << r.status().message();
  std::vector<int32_t> out;
  for (int i = 0; r.ok() && i < n; ++i) {
    const auto& l = r->logits;
    out.push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
    if (i + 1 < n) r = m.decode(seq, out.back());
  }
  return out;
}

std::vector<int32_t> tokens_of(const EngineRun& run, size_t i) {
  return run.outputs.at(run.handles[i]).outputs.at(0).token_ids;
}

TEST(ReplayEngine, PromptsNoLongerThanKeepEqualOff) {
  std::vector<Req> reqs;
  for (int n : {1, 9, 24, 40}) {
    reqs.push_back(request(prompt(n, n), greedy(10)));
    reqs.push_back(request(prompt(n, n + 1), seeded(static_cast<uint64_t>(n), 10)));
  }
  EngineOptions o = replay_options(0);
  o.max_num_batched_tokens = 7;  // chunked prefill mixed with decodes
  const EngineRun off = run_requests(o, reqs);
  o = replay_options(40);
  o.max_num_batched_tokens = 7;
  const EngineRun on = run_requests(o, reqs);
  expect_same(off, on);
  EXPECT_EQ(on.stats.replay_skipped_rows, 0);
  EXPECT_NE(on.describe.find("bounded replay compact keep 40"), std::string::npos) << on.describe;
  EXPECT_NE(off.describe.find("bounded replay off"), std::string::npos) << off.describe;
}

// keep = 16 >= the horizon: skipping changes nothing any output reads, whatever the step
// shapes, prefix hits (snapshots taken inside and after the skipped rows) and speculation.
TEST(ReplayEngine, KeepAtTheHorizonEqualsOffWithChunksHitsAndSpeculation) {
  const std::vector<int32_t> a = prompt(40, 3);
  std::vector<Req> reqs;
  reqs.push_back(request(a, greedy(12)));
  reqs.push_back(request(a, seeded(5, 12)));                 // the same prompt: hits at 32
  reqs.push_back(request(concat(a, prompt(30, 4)), greedy(12)));  // a later turn: skips past
  reqs.push_back(request(prompt(75, 6), seeded(6, 12)));
  reqs.push_back(request(prompt(12, 7), greedy(12)));        // shorter than keep
  for (bool spec : {false, true}) {
    EngineOptions o = replay_options(0);
    o.max_num_seqs = 1;  // each starts after the previous one published its blocks
    o.max_num_batched_tokens = 24;
    if (spec) {
      o.speculative_method = "dspark";
      o.num_speculative_tokens = 4;
    }
    const EngineRun off = run_requests(o, reqs);
    o.prefill_truncation_mode = "compact";
    o.prefill_keep_tokens = 16;
    const EngineRun on = run_requests(o, reqs);
    SCOPED_TRACE(spec ? "dspark" : "no speculation");
    expect_same(off, on);
    EXPECT_GT(on.stats.replay_skipped_rows, 0);
    EXPECT_GT(on.stats.prefix_restores, 0);
    EXPECT_EQ(on.stats.prefix_window_replays, 0);
    if (spec) {
      EXPECT_GT(on.stats.spec_verify_steps, 0);
    }
  }
}

// The same with a starved KV pool: preempted requests recompute prompt + outputs, truncated
// from their new end, and still give the outputs of replay off.
TEST(ReplayEngine, KeepAtTheHorizonEqualsOffUnderPreemption) {
  std::vector<Req> reqs;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back(request(prompt(30 + 9 * i, 50 + i), i % 2 ? seeded(60 + i, 14) : greedy(14)));
  }
  EngineOptions o = replay_options(0);
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 16;
  o.num_kv_blocks = 30;  // enough for the longest request, too few for all at once
  const EngineRun off = run_requests(o, reqs);
  o.prefill_truncation_mode = "compact";
  o.prefill_keep_tokens = 16;
  const EngineRun on = run_requests(o, reqs);
  expect_same(off, on);
  EXPECT_GT(on.stats.preemptions, 0);
  EXPECT_GT(on.stats.replay_skipped_rows, 0);
}

// keep = 10 (window 8 + nothing to roll back) lies inside the horizon: the engine computes the
// model's truncated prefill, and counts every skipped row.
TEST(ReplayEngine, ShortKeepSkipsAndCountsRowsAsTheModelDoes) {
  const std::vector<std::vector<int32_t>> prompts = {prompt(40, 11), prompt(75, 12),
                                                     prompt(8, 13)};
  std::vector<Req> reqs;
  for (const auto& p : prompts) reqs.push_back(request(p, greedy(8)));
  EngineOptions o = replay_options(10);
  o.max_num_batched_tokens = 7;  // chunks wholly before the kept suffix, straddling, inside
  o.enable_prefix_caching = false;
  const EngineRun on = run_requests(o, reqs);
  EXPECT_EQ(on.stats.replay_skipped_rows, (40 - 10) + (75 - 10));
  auto ops = backend::cpu::make_opt_ops(1);
  auto m = model::load_model(v41_dir(), *ops);
  ASSERT_TRUE(m.ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    model::SequenceCache seq = (*m)->new_sequence();
    EXPECT_EQ(tokens_of(on, i), greedy_truncated(**m, seq, prompts[i], 0, 10, 8)) << i;
  }
}

TEST(ReplayEngine, PromptLogprobsRunTheFullPrefill) {
  SamplingParams p = seeded(9, 6);
  p.prompt_logprobs = 2;
  const std::vector<Req> reqs = {request(prompt(40, 21), p), request(prompt(40, 22), greedy(6))};
  const EngineRun off = run_requests(replay_options(0), reqs);
  const EngineRun on = run_requests(replay_options(10), reqs);
  const RequestOutput& a = off.outputs.at(off.handles[0]);
  const RequestOutput& b = on.outputs.at(on.handles[0]);
  ASSERT_EQ(a.prompt_logprobs.size(), 39u);
  ASSERT_EQ(b.prompt_logprobs.size(), a.prompt_logprobs.size());
  for (size_t t = 0; t < a.prompt_logprobs.size(); ++t) {
    EXPECT_EQ(a.prompt_logprobs[t].logprob, b.prompt_logprobs[t].logprob) << t;
    EXPECT_EQ(a.prompt_logprobs[t].top, b.prompt_logprobs[t].top) << t;
  }
  EXPECT_EQ(a.outputs.at(0).token_ids, b.outputs.at(0).token_ids);
  EXPECT_EQ(on.stats.replay_skipped_rows, 40 - 10);  // only the second request skipped
}

TEST(ReplayEngine, KeepBelowWindowPlusDraftAndV4AreRefused) {
  EngineOptions o = replay_options(11);
  o.speculative_method = "dspark";
  o.num_speculative_tokens = 4;  // window 8 + 4 = 12
  auto e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("minimum 12"), std::string::npos) << e.status().message();
  o.prefill_keep_tokens = 12;
  EXPECT_TRUE(Engine::create(o).ok());
  o.speculative_method = "off";
  o.prefill_keep_tokens = 8;  // without drafts the window alone
  EXPECT_TRUE(Engine::create(o).ok());
  o.prefill_truncation_mode = "full";
  EXPECT_FALSE(Engine::create(o).ok());

  EngineOptions v4;
  v4.model_dir = tiny_dir();
  v4.num_threads = 1;
  v4.prefill_truncation_mode = "compact";
  auto e4 = Engine::create(v4);
  ASSERT_FALSE(e4.ok());
  EXPECT_NE(e4.status().message().find("DeepSeek-V4.1 models only"), std::string::npos)
      << e4.status().message();
  v4.prefill_truncation_mode = "none";
  EXPECT_TRUE(Engine::create(v4).ok());
}

// Encoder side. The store's byte bound fits the compressed parts of every snapshot the run
// makes but not one snapshot with its windows, so every saved snapshot loses its windows at
// once (EngineCore::evict_snapshots) and each hit is served by a window replay.
TEST(ReplayEngine, EvictedWindowsReplayOnlyTheLastWindow) {
  constexpr int kKeep = 16;
  const std::vector<int32_t> s = prompt(24, 31), t = prompt(36, 32);
  const std::vector<Req> reqs = {request(s, greedy(4)), request(s, seeded(3, 4)),
                                 request(t, greedy(4)), request(concat(t, prompt(6, 33)), greedy(6))};
  // Snapshots the run saves: s at 16, t at 16 and 32 (the outputs do not reach the next
  // boundary). Sizes from the model itself.
  auto ops = backend::cpu::make_opt_ops(1);
  auto m = model::load_model(v41_dir(), *ops);
  ASSERT_TRUE(m.ok());
  (*m)->set_draft_context(false);  // as in the engine, which does not draft here
  model::SequenceCache c16 = (*m)->new_sequence(), c32 = (*m)->new_sequence();
  ASSERT_TRUE((*m)->extend(c16, {t.data(), 16}, model::LogitsWanted::kNone).ok());
  ASSERT_TRUE((*m)->extend(c32, {t.data(), 32}, model::LogitsWanted::kNone).ok());
  const int64_t parts = 2 * c16.compressed_part().footprint_bytes() +
                        c32.compressed_part().footprint_bytes();
  const int64_t whole = c16.clone().footprint_bytes();
  ASSERT_LT(parts, whole) << "the test's store cannot keep parts without windows";

  EngineOptions o = replay_options(0);
  o.max_num_seqs = 1;
  o.prefix_cache_bytes = (parts + whole) / 2;
  const EngineRun off = run_requests(o, reqs);
  o.prefill_truncation_mode = "compact";
  o.prefill_keep_tokens = kKeep;
  const EngineRun on = run_requests(o, reqs);
  ASSERT_EQ(on.outputs.size(), reqs.size());
  // s's hit (16 <= keep) is replayed from position 0: the whole prefix, exactly.
  for (size_t i : {0, 1, 2}) EXPECT_EQ(tokens_of(on, i), tokens_of(off, i)) << i;
  EXPECT_EQ(on.stats.prefix_window_replays, 2);
  EXPECT_EQ(on.stats.prefix_window_replay_tokens, 16 + kKeep);  // s from 0; t's 32 from 16
  EXPECT_EQ(on.stats.prefix_restores, 0);
  EXPECT_EQ(on.stats.prefix_recomputes, 0);
  EXPECT_GT(on.stats.prefix_snapshots, 0);
  EXPECT_LE(on.stats.prefix_snapshot_bytes, o.prefix_cache_bytes);
  // Off, the same bound keeps nothing: hits recompute their whole prefix.
  EXPECT_EQ(off.stats.prefix_window_replays, 0);
  EXPECT_GT(off.stats.prefix_recomputes, 0);
  // The last request: t's exact compressed part at 32, its last 16 tokens replayed, then its own
  // prompt (42 tokens: rows before 26 skip the upper layers) and greedy decoding.
  const std::vector<int32_t> last = reqs[3].ids;
  auto st = (*m)->window_replay_state(c32.compressed_part(), {t.data(), 32}, 32 - kKeep);
  ASSERT_TRUE(st.ok()) << st.status().message();
  model::SequenceCache seq = std::move(*st);
  const int64_t from = model::upper_kept_from(static_cast<int64_t>(last.size()), kKeep);
  ASSERT_TRUE((*m)->extend(seq, {t.data() + 16, 16}, model::LogitsWanted::kNone, false,
                           model::upper_skip_rows(16, 16, from))
                  .ok());
  EXPECT_EQ(tokens_of(on, 3), greedy_truncated(**m, seq, last, 32, kKeep, 6));
}

}  // namespace
}  // namespace deepinfer
