// Speculative decoding in the engine: outputs with speculation equal outputs without it, bit for
// bit (tokens, texts, finish reasons, logprobs), for greedy and seeded sampling, at every draft
// length, sync and async, with chunked prefill, preemption, prefix hits, penalties, n > 1,
// stop strings and structured outputs; and the drafts are really accepted (the default model's
// text repeats, which the n-gram drafter finds), so the runs and rollbacks are exercised.
// DSpark (DeepSeek-V4.1) on the tiny V4.1 checkpoint: the same equality, and greedy == the
// model driven by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer {
namespace {

using namespace engine_test;  // NOLINT: the shared runners

// Text requests on the embedded default model: greedy, seeded (top-p, logprobs), penalties,
// a logit bias, n > 1, a stop string, and a few that end on EOS.
std::vector<Req> default_model_requests() {
  std::vector<Req> reqs;
  const char* prompts[] = {"In the beginning God created", "The law of the", "And it came to pass",
                           "Chapter 1."};
  for (int i = 0; i < 8; ++i) {
    Req r;
    r.text = prompts[i % 4];
    r.params = i % 2 == 0 ? greedy(20 + 3 * i) : seeded(40 + static_cast<uint64_t>(i), 18 + i);
    if (i == 3) r.params.n = 2;
    if (i == 5) r.params.repetition_penalty = 1.2f;
    if (i == 4) r.params.logit_bias = {{262, 3.0f}, {290, -100.0f}};
    if (i == 6) {
      r.params.stop = {" the"};
      r.params.logprobs = 3;
    }
    if (i == 7) r.params.ignore_eos = false;
    reqs.push_back(r);
  }
  return reqs;
}

EngineOptions default_options() {
  EngineOptions o;
  o.model_dir = default_dir();
  o.max_model_len = 256;
  return o;
}

EngineRun run_with(EngineOptions o, const std::vector<Req>& reqs, const char* method, int k) {
  o.speculative_method = method;
  o.num_speculative_tokens = k;
  return run_requests(o, reqs);
}

TEST(SpecEngine, NgramEqualsNoSpeculationAtEveryDraftLength) {
  const std::vector<Req> reqs = default_model_requests();
  for (const bool async : {false, true}) {
    EngineOptions o = default_options();
    o.async_scheduling = async;
    const EngineRun off = run_with(o, reqs, "off", 0);
    EXPECT_NE(off.describe.find("speculative off"), std::string::npos) << off.describe;
    EXPECT_EQ(off.stats.spec_verify_steps, 0);
    for (const int k : {1, 2, 3, 5, 6}) {
      SCOPED_TRACE(std::string(async ? "async" : "sync") + " k " + std::to_string(k));
      const EngineRun on = run_with(o, reqs, "ngram", k);
      EXPECT_NE(on.describe.find("speculative ngram k=" + std::to_string(k)), std::string::npos)
          << on.describe;
      expect_same(off, on);
      EXPECT_GT(on.stats.spec_verify_steps, 0);
      EXPECT_GT(on.stats.spec_accepted_tokens, 0) << "no draft was ever accepted";
      EXPECT_LT(on.stats.spec_accepted_tokens, on.stats.spec_draft_tokens)
          << "no draft was ever rejected: rollback untested";
      // Fewer steps than tokens: runs of several tokens per step happened.
      EXPECT_LT(on.stats.steps, off.stats.steps);
    }
  }
}

TEST(SpecEngine, ChunkedPrefillPreemptionAndPrefixHitsKeepOutputs) {
  std::vector<Req> reqs = default_model_requests();
  // Shared prefixes longer than a block, so later requests hit the cache.
  const std::string shared =
      "And God said, Let there be light: and there was light. And God saw the light, that it was "
      "good: and God divided the light from the darkness. ";
  for (int i = 0; i < 4; ++i) {
    Req r;
    r.text = shared + (i % 2 == 0 ? "And the evening" : "And God called");
    r.params = i % 2 == 0 ? greedy(30) : seeded(7 + static_cast<uint64_t>(i), 30);
    reqs.push_back(r);
  }
  EngineOptions o = default_options();
  o.max_num_batched_tokens = 24;  // chunked prefill mixed with verify steps
  o.kv_block_size = 16;
  o.num_kv_blocks = 40;  // starved: preemptions
  o.max_num_seqs = 6;
  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    o.async_scheduling = async;
    const EngineRun off = run_with(o, reqs, "off", 0);
    for (const char* method : {"ngram", "mtp"}) {
      SCOPED_TRACE(method);
      const EngineRun on = run_with(o, reqs, method, 4);
      expect_same(off, on);
      EXPECT_GT(on.stats.spec_accepted_tokens, 0);
      EXPECT_GT(on.stats.preemptions, 0) << "the pool was meant to force preemptions";
      EXPECT_GT(on.stats.prefix_hit_tokens, 0);
      // Speculation must not cost prefix hits (vLLM's users report them falling to zero).
      EXPECT_GE(on.stats.prefix_hit_tokens, off.stats.prefix_hit_tokens / 2);
    }
  }
}

// DeepSeek-V4's MTP block (the default model has one; "auto" picks it): chained drafts of
// every length, sync and async.
TEST(SpecEngine, MtpEqualsNoSpeculationAtEveryDraftLength) {
  const std::vector<Req> reqs = default_model_requests();
  for (const bool async : {false, true}) {
    EngineOptions o = default_options();
    o.async_scheduling = async;
    const EngineRun off = run_with(o, reqs, "off", 0);
    for (const int k : {1, 3, 6}) {
      SCOPED_TRACE(std::string(async ? "async" : "sync") + " k " + std::to_string(k));
      const EngineRun on = run_with(o, reqs, k == 3 ? "auto" : "mtp", k);
      EXPECT_NE(on.describe.find("speculative mtp k=" + std::to_string(k)), std::string::npos)
          << on.describe;
      expect_same(off, on);
      EXPECT_GT(on.stats.spec_accepted_tokens, 0) << "no MTP draft was ever accepted";
      EXPECT_LT(on.stats.steps, off.stats.steps);
    }
  }
}

// Confidence-scheduled verification decides per step how many drafts each request verifies,
// from measured step times: the admitted counts vary from run to run, the outputs must not.
TEST(SpecEngine, VarlenEqualsNoSpeculation) {
  const std::vector<Req> reqs = default_model_requests();
  EngineOptions o = default_options();
  const EngineRun off = run_with(o, reqs, "off", 0);
  o.speculative_varlen = true;
  for (const char* method : {"ngram", "mtp"}) {
    SCOPED_TRACE(method);
    const EngineRun on = run_with(o, reqs, method, 5);
    EXPECT_NE(on.describe.find(std::string("speculative ") + method + " k=5 varlen"),
              std::string::npos)
        << on.describe;
    expect_same(off, on);
    EXPECT_TRUE(on.stats.spec_draft_context_share.empty());  // no drafter context to measure
  }
}

// A prompt that crosses KV block boundaries is prefilled in pieces (one forward per block, for
// the prefix cache's snapshots); the MTP block must follow all of them, so the request drafts
// from its first decode on.
TEST(SpecEngine, MtpFollowsAPrefillSplitAtBlockBoundaries) {
  EngineOptions o = default_options();
  o.kv_block_size = 16;
  Req r;
  r.text = "And God said, Let there be light: and there was light. And God saw the light, that "
           "it was good: and God divided the light from the darkness. And God called";
  r.params = greedy(24);
  const EngineRun off = run_with(o, {r}, "off", 0);
  const EngineRun on = run_with(o, {r}, "mtp", 3);
  ASSERT_GT(off.outputs.begin()->second.prompt_token_ids.size(), 32u);
  expect_same(off, on);
  EXPECT_GT(on.stats.spec_verify_steps, 0) << "the MTP block lost the prompt";
  EXPECT_GT(on.stats.spec_accepted_tokens, 0);
}

// The chat tests' engine: 16-token blocks, one thread, the drafter named (k = 3).
EngineOptions chat_options(const char* method) {
  EngineOptions o = default_options();
  o.kv_block_size = 16;
  o.speculative_method = method;
  o.num_speculative_tokens = std::string(method) == "off" ? 0 : 3;
  o.num_threads = 1;
  return o;
}

// Runs `ids` greedily on `warm` and on a fresh engine of the same options; checks the warm one
// hit want_hit prompt tokens and continued as the fresh one did, and returns its output.
RequestOutput follow_up(Engine& warm, const EngineOptions& o, const std::vector<int32_t>& ids,
                        int tokens, int64_t want_hit) {
  auto fresh = Engine::create(o);
  EXPECT_TRUE(fresh.ok());
  EXPECT_TRUE(warm.submit(ids, greedy(tokens)).ok());
  EXPECT_TRUE((*fresh)->submit(ids, greedy(tokens)).ok());
  const std::vector<RequestOutput> hit = warm.run_until_done();
  const std::vector<RequestOutput> alone = (*fresh)->run_until_done();
  EXPECT_EQ(hit.size(), 1u);
  EXPECT_EQ(alone.size(), 1u);
  EXPECT_EQ(hit.at(0).num_cached_tokens, want_hit);
  EXPECT_EQ(alone.at(0).num_cached_tokens, 0);
  EXPECT_EQ(hit.at(0).outputs.at(0).token_ids, alone.at(0).outputs.at(0).token_ids);
  return hit.at(0);
}

std::vector<int32_t> joined(std::vector<int32_t> ids, const std::vector<int32_t>& more) {
  ids.insert(ids.end(), more.begin(), more.end());
  return ids;
}

// A chat's first turn on `e`: a 14-token prompt and 60 greedy tokens; the whole context (74).
std::vector<int32_t> first_turn(Engine& e) {
  EXPECT_TRUE(
      e.submit_text("And God said, Let there be light: and there was light.", greedy(60)).ok());
  const std::vector<RequestOutput> first = e.run_until_done();
  EXPECT_EQ(first.size(), 1u);
  const std::vector<int32_t> context =
      joined(first.at(0).prompt_token_ids, first.at(0).outputs.at(0).token_ids);
  EXPECT_EQ(context.size(), 74u);
  return context;
}

// A chat's next turn sends the previous prompt and answer back with a little more: it must hit
// the prefix cache across the answer, with asynchronous scheduling (the default) and with
// speculation too, and continue exactly as a cold engine does. Until stop 45 the KV bookkeeping
// released a boundary's state snapshot and window blocks at the next grow even when that
// block's tokens were not known yet (the one-step placeholder of asynchronous scheduling,
// speculative drafts), and never published the last blocks (known only when the request
// ends): of a 74-token context, asynchronous scheduling hit 0 tokens, MTP 32, n-gram 16,
// against 64 without either. And the snapshot a decode step saved now carries the MTP block's
// window (EngineCore::snapshot_after_drafting).
TEST(SpecEngine, AChatsNextTurnHitsThePreviousAnswer) {
  for (const char* method : {"off", "mtp", "ngram"}) {
    for (const bool async : {false, true}) {
      SCOPED_TRACE(std::string(method) + (async ? " async" : " sync"));
      EngineOptions o = chat_options(method);
      o.async_scheduling = async;
      auto warm = Engine::create(o);
      ASSERT_TRUE(warm.ok());
      const std::vector<int32_t> context = first_turn(**warm);
      // Every full block of the first turn.
      follow_up(**warm, o, joined(context, {101, 102, 103}), 12, 64);
      EXPECT_EQ((*warm)->stats().prefix_restores, 1);  // from the snapshot at 64
      // The snapshot (saved during the first turn's decoding, after its step's drafting) holds
      // the MTP block's whole window: the restored block resumes it, no restart (before the
      // snapshot was saved after drafting, MTP restarted it once here, sync and async).
      EXPECT_EQ((*warm)->stats().spec_draft_window_restarts, 0);
    }
  }
}

// The same across a longer chat and across the second of n samples: a third turn hits every
// full block of the second turn's whole context (its prompt, which itself hit the first turn,
// and its answer), and a follow-up built on sample 1 of an n = 2 request hits that sample's
// answer, not only the shared prompt. Each follow-up continues as a cold engine does.
TEST(SpecEngine, AThirdTurnAndTheSecondOfNSamplesHitTheirAnswers) {
  for (const char* method : {"off", "mtp"}) {
    SCOPED_TRACE(method);
    const EngineOptions o = chat_options(method);
    auto warm = Engine::create(o);
    ASSERT_TRUE(warm.ok());
    const std::vector<int32_t> t1 = first_turn(**warm);
    const RequestOutput second = follow_up(**warm, o, joined(t1, {101, 102, 103}), 40, 64);
    const std::vector<int32_t> t2 = joined(second.prompt_token_ids, second.outputs.at(0).token_ids);
    ASSERT_EQ(t2.size(), 117u);
    // Every full block of the second turn's context.
    follow_up(**warm, o, joined(t2, {104, 105}), 8, 112);

    // n = 2 (seeded, so the samples differ): a follow-up on sample 1 hits its answer's blocks.
    auto sampler = Engine::create(o);
    ASSERT_TRUE(sampler.ok());
    SamplingParams two = seeded(7, 60);
    two.n = 2;
    two.ignore_eos = true;  // both answers their full length
    ASSERT_TRUE((*sampler)->submit_text("In the beginning God created", two).ok());
    const std::vector<RequestOutput> pair = (*sampler)->run_until_done();
    ASSERT_EQ(pair.size(), 1u);
    ASSERT_EQ(pair[0].outputs.size(), 2u);
    ASSERT_NE(pair[0].outputs[0].token_ids, pair[0].outputs[1].token_ids);
    const std::vector<int32_t> s1 = joined(pair[0].prompt_token_ids, pair[0].outputs[1].token_ids);
    const int64_t full = static_cast<int64_t>(s1.size()) / 16 * 16;
    ASSERT_GE(full, 64);  // well past the prompt's block
    follow_up(**sampler, o, joined(s1, {106, 107, 108}), 10, full);
  }
}

// A hit whose snapshot was evicted recomputes the prefix (EngineCore::restore_prefix); MTP then
// gets only the prefix's last rows (its window, Drafter::hidden_tail), as from a prefill, not all
// of them. A third turn hits 112 tokens, past v4-small's 64-row window: its tokens and its
// drafts (the accepted count) are a cold engine's, the window whole (no restart).
TEST(SpecEngine, ARecomputedHitFeedsMtpItsWindow) {
  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    EngineOptions o = chat_options("mtp");
    o.async_scheduling = async;
    o.prefix_cache_bytes = 1;  // smaller than any snapshot: every hit is recomputed
    auto warm = Engine::create(o);
    auto cold = Engine::create(o);
    ASSERT_TRUE(warm.ok() && cold.ok());
    const std::vector<int32_t> t1 = first_turn(**warm);
    const RequestOutput second = follow_up(**warm, o, joined(t1, {101, 102, 103}), 40, 64);
    const std::vector<int32_t> third =
        joined(joined(second.prompt_token_ids, second.outputs.at(0).token_ids), {104, 105});
    const EngineStats before = (*warm)->stats();
    ASSERT_TRUE((*warm)->submit(third, greedy(24)).ok());
    ASSERT_TRUE((*cold)->submit(third, greedy(24)).ok());
    const std::vector<RequestOutput> hit = (*warm)->run_until_done();
    const std::vector<RequestOutput> alone = (*cold)->run_until_done();
    ASSERT_EQ(hit.size(), 1u);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(hit[0].num_cached_tokens, 112);
    EXPECT_EQ(hit[0].outputs.at(0).token_ids, alone[0].outputs.at(0).token_ids);
    const EngineStats after = (*warm)->stats();
    EXPECT_EQ(after.prefix_recomputes - before.prefix_recomputes, 1);
    EXPECT_EQ(after.spec_draft_window_restarts, 0);
    EXPECT_GT((*cold)->stats().spec_accepted_tokens, 0);
    EXPECT_EQ(after.spec_accepted_tokens - before.spec_accepted_tokens,
              (*cold)->stats().spec_accepted_tokens);
    EXPECT_EQ(after.spec_draft_tokens - before.spec_draft_tokens,
              (*cold)->stats().spec_draft_tokens);
  }
}

TEST(SpecEngine, StructuredOutputsAndStopStringsKeepOutputs) {
  std::vector<Req> reqs;
  SamplingParams re = seeded(3, 48);
  re.ignore_eos = false;
  re.structured = SamplingParams::StructuredOutput{"regex", "([A-Z][a-z]{2,8} [0-9]{1,3} ){3}"};
  reqs.push_back({{}, "The answer is", re, -1});
  SamplingParams json = greedy(64);
  json.ignore_eos = false;
  json.structured = SamplingParams::StructuredOutput{
      "json", R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]})"};
  reqs.push_back({{}, "Data:", json, -1});
  SamplingParams stopped = greedy(40);
  stopped.stop = {"law"};
  reqs.push_back({{}, "The law of the", stopped, -1});
  for (const bool async : {false, true}) {
    EngineOptions o = default_options();
    o.async_scheduling = async;
    const EngineRun off = run_with(o, reqs, "off", 0);
    int64_t cut = 0;
    for (const char* method : {"ngram", "mtp"}) {
      SCOPED_TRACE(method);
      const EngineRun on = run_with(o, reqs, method, 5);
      expect_same(off, on);
      cut += on.stats.spec_grammar_cut_tokens;
    }
    // Drafts outside the grammar were cut before verification (they cost no rows).
    EXPECT_GT(cut, 0);
  }
}

TEST(SpecEngine, BadSpeculationOptionsAreRefused) {
  EngineOptions o = default_options();
  o.speculative_method = "medusa";
  auto e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("auto, dspark, mtp, ngram or off"), std::string::npos);
  o.speculative_method = "dspark";  // a V4 checkpoint has no DSpark drafter
  e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("DSpark"), std::string::npos) << e.status().message();
  o.speculative_method = "ngram";
  o.num_speculative_tokens = 17;
  e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("at most 16"), std::string::npos) << e.status().message();
  o.num_speculative_tokens = 4;
  o.speculative_acceptance = "lossy";
  e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("identical, residual or residual-always"), std::string::npos)
      << e.status().message();
}

// DEEPINFER_VARLEN_TRACE / EngineOptions::speculative_trace: with varlen, one CSV line per
// engine step (20 columns, as the header says) and one per predicted loss; every decision the
// controller made (`--stats` keeps the last eight) is on a line; the outputs do not move. A path
// that cannot be opened stops the engine's creation with a message naming it.
TEST(SpecEngine, VarlenTraceHasEveryStepAndEveryDecision) {
  const std::vector<Req> reqs = default_model_requests();
  EngineOptions o = default_options();
  const EngineRun off = run_with(o, reqs, "off", 0);
  const std::string path = ::testing::TempDir() + "varlen_trace_test.csv";
  std::remove(path.c_str());
  o.speculative_varlen = true;
  o.speculative_trace = path;
  const EngineRun on = run_with(o, reqs, "mtp", 3);
  expect_same(off, on);
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::vector<std::string> lines;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, f) != nullptr) lines.emplace_back(buf);
  std::fclose(f);
  ASSERT_GT(lines.size(), 10u);
  EXPECT_EQ(lines[0].rfind("engine,kind,plan_step,decodes,fed_tokens,", 0), 0u) << lines[0];
  int64_t steps = 0, decisions = 0, decoding = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(std::count(lines[i].begin(), lines[i].end(), ','), 19)
        << "line " << i << ": " << lines[i];
    const std::vector<std::string> cells = [&] {
      std::vector<std::string> c(1);
      for (const char ch : lines[i]) {
        if (ch == ',')
          c.emplace_back();
        else if (ch != '\n')
          c.back() += ch;
      }
      return c;
    }();
    if (i == 0 || cells.size() != 20) continue;
    if (cells[1] == "step") {
      ++steps;
      if (std::stoll(cells[3]) > 0) ++decoding;
      if (!cells[18].empty()) ++decisions;
    } else {
      EXPECT_EQ(cells[1], "predicted");
      ++decisions;
    }
  }
  EXPECT_EQ(steps, on.stats.steps);
  EXPECT_GT(decoding, 0);
  EXPECT_EQ(decisions, on.stats.spec_varlen_probes_passed + on.stats.spec_varlen_probes_failed);
  std::remove(path.c_str());

  o.speculative_method = "mtp";
  o.num_speculative_tokens = 3;
  o.speculative_trace = ::testing::TempDir() + "no/such/dir/trace.csv";
  auto e = Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no/such/dir/trace.csv"), std::string::npos)
      << e.status().message();
}

// DeepSeek-V4.1's DSpark drafter on the tiny V4.1 checkpoint (random weights: acceptance is
// whatever it is; the output must not move).
TEST(SpecEngine, DSparkEqualsNoSpeculationOnV41) {
  EngineOptions o;
  o.model_dir = source_dir() + "/tests/data/model/v41_tiny_a/official_bf16";
  std::vector<Req> reqs;
  for (int i = 0; i < 5; ++i) {
    Req r;
    r.ids = prompt(3 + 7 * i, 50 + i);
    r.params = i % 2 == 0 ? greedy(16) : seeded(90 + static_cast<uint64_t>(i), 16);
    reqs.push_back(r);
  }
  for (const bool async : {false, true}) {
    o.async_scheduling = async;
    const EngineRun off = run_with(o, reqs, "off", 0);
    const EngineRun on = run_with(o, reqs, "auto", 4);
    EXPECT_NE(on.describe.find("speculative dspark"), std::string::npos) << on.describe;
    expect_same(off, on);
    EXPECT_GT(on.stats.spec_verify_steps, 0);
  }
}

// The trained DeepSeek-V4.1 default model (models/default): its DSpark drafter drafts every
// sequence of a step in one batched block forward (Model::dspark_draft_all); with a fixed k and
// with varlen, at a batch of 12, synchronous and asynchronous, the outputs are those without
// speculation, and the trained drafter's drafts are accepted.
TEST(SpecEngine, BatchedDSparkEqualsNoSpeculationOnTheDefaultModel) {
  EngineOptions o;
  o.model_dir = source_dir() + "/models/default";
  o.max_model_len = 256;
  const char* prompts[] = {"And it came to pass", "In the beginning God created",
                           "The law of the Lord is perfect", "Blessed is the man"};
  std::vector<Req> reqs;
  for (int i = 0; i < 12; ++i) {
    Req r;
    r.text = prompts[i % 4];
    r.params = i % 2 == 0 ? greedy(12 + i) : seeded(300 + static_cast<uint64_t>(i), 14 + i);
    reqs.push_back(r);
  }
  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    o.async_scheduling = async;
    o.speculative_varlen = false;
    const EngineRun off = run_with(o, reqs, "off", 0);
    const EngineRun on = run_with(o, reqs, "dspark", 5);
    EXPECT_NE(on.describe.find("speculative dspark"), std::string::npos) << on.describe;
    expect_same(off, on);
    EXPECT_GT(on.stats.spec_verify_steps, 0);
    EXPECT_GT(on.stats.spec_accepted_tokens, 0);
    o.speculative_varlen = true;
    const EngineRun varlen = run_with(o, reqs, "dspark", 5);
    EXPECT_NE(varlen.describe.find("speculative dspark k=5 varlen"), std::string::npos)
        << varlen.describe;
    expect_same(off, varlen);
    // The drafter's context, measured at start-up for varlen's plain estimate: a share of each
    // profiled forward (1, 2, 4, .. tokens), some of it real work.
    const auto& share = varlen.stats.spec_draft_context_share;
    ASSERT_FALSE(share.empty());
    int64_t tokens = 1;
    double most = 0;
    for (const auto& [n, part] : share) {
      EXPECT_EQ(n, tokens);
      tokens *= 2;
      EXPECT_GE(part, 0.0);
      EXPECT_LE(part, 0.5);
      most = std::max(most, part);
    }
    EXPECT_GT(most, 0.0);
    EXPECT_TRUE(on.stats.spec_draft_context_share.empty());  // a fixed k: no controller
  }
}

// The distribution of sampled tokens with speculation equals the one without it. Verification
// by the target's own seeded draw makes this hold per seed (each seed's tokens are the same), so
// the empirical distributions of the first two tokens over 192 seeds are equal, total
// variation 0, for a drafter that is mostly wrong (n-gram: a short prompt has little to find)
// and one that is often right (the trained default model's MTP block); the counts are printed.
TEST(SpecEngine, SampledDistributionIsUnchangedOverManySeeds) {
  EngineOptions o = default_options();
  std::vector<Req> reqs;
  for (int i = 0; i < 192; ++i) {
    Req r;
    // One prompt, many seeds: a distribution of continuations. Its repeats give the n-gram
    // drafter something to propose that the model mostly does not follow.
    r.text = "7 9 4 7 9 4 7 9 4 7 9";
    r.params = seeded(5000 + static_cast<uint64_t>(i), 3);
    r.params.top_p = 1.0f;
    r.params.logprobs.reset();
    reqs.push_back(r);
  }
  const EngineRun off = run_with(o, reqs, "off", 0);
  for (const char* method : {"ngram", "mtp"}) {
    const EngineRun on = run_with(o, reqs, method, 3);
    std::map<std::vector<int32_t>, int> p_off, p_on;  // of the first two tokens
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto& a = off.outputs.at(off.handles[i]).outputs[0].token_ids;
      const auto& b = on.outputs.at(on.handles[i]).outputs[0].token_ids;
      ++p_off[std::vector<int32_t>(a.begin(), a.begin() + 2)];
      ++p_on[std::vector<int32_t>(b.begin(), b.begin() + 2)];
    }
    int tv2 = 0;  // 2 x total variation, in counts
    for (const auto& [seq, n] : p_off) tv2 += std::abs(n - (p_on.count(seq) ? p_on.at(seq) : 0));
    for (const auto& [seq, n] : p_on) tv2 += p_off.count(seq) ? 0 : n;
    std::printf("  %s: %zu distinct 2-token continuations over %zu seeds, total variation %.4f, "
                "%lld of %lld drafts accepted\n",
                method, p_off.size(), reqs.size(), tv2 / (2.0 * static_cast<double>(reqs.size())),
                static_cast<long long>(on.stats.spec_accepted_tokens),
                static_cast<long long>(on.stats.spec_draft_tokens));
    // A distribution, neither one certain continuation nor every seed its own (models/v4-small
    // gives 144 distinct continuations of 192 at temperature 1 on this prompt).
    EXPECT_GT(p_off.size(), 8u);
    EXPECT_LT(p_off.size(), reqs.size() * 7 / 8);
    EXPECT_EQ(tv2, 0) << method;
    expect_same(off, on);
  }
}

// Residual acceptance (EngineOptions::speculative_acceptance) on the trained V4.1 default with
// DSpark: drafts are drawn from the drafter's distribution and judged by rejection sampling
// with the residual. Greedy requests and, with "residual", seeded ones keep the outputs of
// decoding without speculation. With "residual-always" a seed's tokens change but their
// distribution must not: over 320 seeds the second and third tokens' distributions are as far
// from that of plain decoding over other seeds as plain decoding's own two seed sets are from
// each other (a biased verification, e.g. one that accepted drafts too often, drifts toward the
// drafter's distribution and fails this: one that accepted 95 % of the drafts moved to 0.62
// against plain's 0.49), and more drafts are accepted than by identical-output verification.
TEST(SpecEngine, ResidualAcceptanceKeepsTheDistributionAndAcceptsMore) {
  EngineOptions o;
  o.model_dir = source_dir() + "/models/default";
  o.max_model_len = 128;
  o.speculative_varlen = false;
  {
    std::vector<Req> reqs;
    const char* prompts[] = {"And it came to pass", "Blessed is the man"};
    for (int i = 0; i < 6; ++i) {
      Req r;
      r.text = prompts[i % 2];
      r.params = i % 3 == 0 ? greedy(14) : seeded(700 + static_cast<uint64_t>(i), 14);
      if (i % 3 == 1) r.params.logprobs.reset();
      reqs.push_back(r);
    }
    const EngineRun off = run_with(o, reqs, "off", 0);
    o.speculative_acceptance = "residual";
    expect_same(off, run_with(o, reqs, "dspark", 5));
  }
  const auto sampled_reqs = [](uint64_t first_seed) {
    std::vector<Req> reqs;
    for (int i = 0; i < 320; ++i) {
      Req r;
      r.text = "And the LORD spake unto Moses, saying,";
      r.params = seeded(first_seed + static_cast<uint64_t>(i), 3);
      r.params.temperature = 1.0f;
      r.params.top_p = 1.0f;
      r.params.logprobs.reset();
      reqs.push_back(r);
    }
    return reqs;
  };
  // The second and third tokens: the ones drafts decide (the first comes from the prefill).
  const auto histogram = [](const EngineRun& run, size_t at) {
    std::map<std::vector<int32_t>, int> h;
    for (const RequestHandle hd : run.handles) ++h[{run.outputs.at(hd).outputs[0].token_ids.at(at)}];
    return h;
  };
  const auto tv = [](const std::map<std::vector<int32_t>, int>& a,
                     const std::map<std::vector<int32_t>, int>& b, double n) {
    double d = 0;
    for (const auto& [k, c] : a) d += std::abs(c - (b.count(k) ? b.at(k) : 0));
    for (const auto& [k, c] : b) d += a.count(k) ? 0 : c;
    return d / (2 * n);
  };
  o.speculative_acceptance = "identical";
  const EngineRun plain_a = run_with(o, sampled_reqs(1), "off", 0);
  const EngineRun plain_b = run_with(o, sampled_reqs(100001), "off", 0);
  const EngineRun identical = run_with(o, sampled_reqs(1), "dspark", 5);
  o.speculative_acceptance = "residual-always";
  const EngineRun residual = run_with(o, sampled_reqs(1), "dspark", 5);
  expect_same(plain_a, identical);
  const double n = 320;
  const auto rate = [](const EngineRun& r) {
    return static_cast<double>(r.stats.spec_accepted_tokens) /
           static_cast<double>(std::max<int64_t>(1, r.stats.spec_draft_tokens));
  };
  for (const size_t at : {size_t{1}, size_t{2}}) {
    const double noise = tv(histogram(plain_a, at), histogram(plain_b, at), n);
    const double moved = tv(histogram(residual, at), histogram(plain_b, at), n);
    std::printf("  token %zu: %zu distinct; total variation to plain decoding on other seeds: "
                "plain %.3f, residual %.3f\n",
                at, histogram(plain_b, at).size(), noise, moved);
    EXPECT_LT(moved, noise + 0.05) << "token " << at;
  }
  std::printf("  drafts accepted: identical %.3f (%lld of %lld), residual %.3f (%lld of %lld)\n",
              rate(identical), static_cast<long long>(identical.stats.spec_accepted_tokens),
              static_cast<long long>(identical.stats.spec_draft_tokens), rate(residual),
              static_cast<long long>(residual.stats.spec_accepted_tokens),
              static_cast<long long>(residual.stats.spec_draft_tokens));
  EXPECT_GT(rate(residual), rate(identical));
  EXPECT_GT(residual.stats.spec_accepted_tokens, 0);

  // Structured outputs: a draft the grammar refuses is a certain rejection (the residual draw
  // replaces it), and every output still matches its grammar.
  std::vector<Req> structured;
  for (int i = 0; i < 8; ++i) {
    SamplingParams re = seeded(40 + static_cast<uint64_t>(i), 48);
    re.logprobs.reset();
    re.ignore_eos = false;
    re.structured = SamplingParams::StructuredOutput{"regex", "([A-Z][a-z]{2,8} [0-9]{1,3} ){3}"};
    structured.push_back({{}, "And it came to pass", re, -1});
  }
  const EngineRun constrained = run_with(o, structured, "dspark", 5);
  EXPECT_GT(constrained.stats.spec_grammar_cut_tokens, 0);
  const std::regex full("([A-Z][a-z]{2,8} [0-9]{1,3} ){3}");
  for (const RequestHandle hd : constrained.handles) {
    const CompletionOutput& c = constrained.outputs.at(hd).outputs[0];
    EXPECT_EQ(c.finish_reason, "stop") << c.error;
    EXPECT_TRUE(std::regex_match(c.text, full)) << c.text;
  }
}

}  // namespace
}  // namespace deepinfer
