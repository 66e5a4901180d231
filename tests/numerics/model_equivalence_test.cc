// Internal equivalences of the forward pass (spec §3): one prefill == token-by-token decode ==
// chunked prefill with odd chunk sizes (crossing window and compression boundaries); rollback
// of the last k tokens == recomputation; several sequences in one step == each alone; ref
// backend == opt backend. Run on the committed tiny checkpoints (tests/data/model/), in HF
// semantics (FP32) and official semantics (BF16 rounding points, fake-quant).
//
// Bound: kStepShapeMaxAbs in both semantics. Today's CPU backends compute every row
// independently of how many rows a step has, so all of these are observed bit-identical (max
// |Δ| = 0); the bound leaves room for a backend whose FP32 summation order depends on the step
// shape (then official semantics would need an argmax criterion, as in model_golden_test.cc).
// ref vs opt differ in FP32 summation order by design: HF semantics 1e-4; official semantics
// can flip a BF16 rounding there, so only argmax agreement is required.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model_test_util.h"

namespace deepinfer::model::testing {
namespace {

constexpr double kStepShapeMaxAbs = 5e-5;

std::vector<int32_t> prompt_ids(const char* cfg, const char* name) {
  return Goldens(cfg).prompt(name);
}

// Logits of every position, processing the prompt in chunks of the given sizes (cycled).
std::vector<float> chunked(Model& m, std::span<const int32_t> ids, std::span<const int> sizes) {
  SequenceCache seq = m.new_sequence();
  std::vector<float> all;
  size_t at = 0, k = 0;
  while (at < ids.size()) {
    const size_t n =
        std::min<size_t>(static_cast<size_t>(sizes[k++ % sizes.size()]), ids.size() - at);
    auto out = m.extend(seq, ids.subspan(at, n), LogitsWanted::kAll);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return {};
    all.insert(all.end(), out->logits.begin(), out->logits.end());
    at += n;
  }
  EXPECT_EQ(seq.length(), static_cast<int64_t>(ids.size()));
  return all;
}

// loose: argmax agreement on >= 90% of rows instead of kStepShapeMaxAbs.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, int64_t V,
                  bool loose, const std::string& what) {
  const Diff d = compare_logits(got, want, V);
  std::printf("%s: max_abs %.3g argmax_mismatch %lld\n", what.c_str(), d.max_abs,
              static_cast<long long>(d.argmax_mismatch));
  if (loose) {
    const int64_t rows = static_cast<int64_t>(want.size()) / V;
    EXPECT_LE(d.argmax_mismatch, rows / 10) << what;
  } else {
    EXPECT_LE(d.max_abs, kStepShapeMaxAbs) << what << " row " << d.worst_row;
  }
}

struct Case {
  const char* cfg;
  const char* variant;
};
// V4.1: official_bf16 runs the FP32 semantics with V4.1's fake-quant points, official_quant
// the official ones; tiny_a has every CSA2 role, Engram and DSpark, tiny_b other shapes.
const Case kCases[] = {{"v4_tiny_a", "hf_fp32"},        {"v4_tiny_b", "hf_fp32"},
                       {"v4_tiny_a", "official_quant"}, {"v4_tiny_b", "official_quant"},
                       {"v41_tiny_a", "official_bf16"}, {"v41_tiny_b", "official_bf16"},
                       {"v41_tiny_a", "official_quant"}};

TEST(ModelEquivalence, PrefillEqualsDecodeEqualsChunked) {
  for (const Case& c : kCases) {
    auto m = load_test_model(c.cfg, c.variant, opt_ops());
    ASSERT_NE(m, nullptr);
    const int64_t V = m->vocab_size();
    // 120 tokens: crosses the window (8 / 16) many times, CSA rows every 4, HCA every 8 / 16.
    std::vector<int32_t> ids = prompt_ids(c.cfg, "len300");
    ids.resize(120);
    const std::vector<float> full = prefill_all(*m, ids);
    const std::string tag = std::string(c.cfg) + "/" + c.variant;
    {
      SequenceCache seq = m->new_sequence();
      std::vector<float> steps;
      for (int32_t t : ids) {
        auto out = m->decode(seq, t);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        steps.insert(steps.end(), out->logits.begin(), out->logits.end());
      }
      expect_close(steps, full, V, false, tag + " decode token by token");
    }
    const int odd[] = {3, 5, 7, 13};
    expect_close(chunked(*m, ids, odd), full, V, false, tag + " chunks 3,5,7,13");
    const int big[] = {17, 64, 2};
    expect_close(chunked(*m, ids, big), full, V, false, tag + " chunks 17,64,2");
  }
}

// Prefill N, decode k tokens, roll back k, decode k other tokens == fresh prefill of the final
// sequence. N and k are chosen so that the rolled-back tokens close CSA, HCA and window rows.
TEST(ModelEquivalence, RollbackEqualsRecomputation) {
  for (const Case& c : kCases) {
    auto m = load_test_model(c.cfg, c.variant, opt_ops());
    ASSERT_NE(m, nullptr);
    const int64_t V = m->vocab_size();
    const std::vector<int32_t> src = prompt_ids(c.cfg, "len300");
    for (const auto& [N, k] : {std::pair<int, int>{37, 11}, {45, 16}, {3, 2}}) {
      std::vector<int32_t> prefix(src.begin(), src.begin() + N);
      std::vector<int32_t> first(src.begin() + 100, src.begin() + 100 + k);
      std::vector<int32_t> second(src.begin() + 200, src.begin() + 200 + k);
      SequenceCache seq = m->new_sequence(CacheOptions{16});
      ASSERT_TRUE(m->extend(seq, prefix).ok());
      for (int32_t t : first) ASSERT_TRUE(m->extend(seq, {&t, 1}).ok());
      ASSERT_TRUE(seq.rollback(k).ok());
      EXPECT_EQ(seq.length(), N);
      std::vector<float> got;
      for (int32_t t : second) {
        auto out = m->extend(seq, {&t, 1});
        ASSERT_TRUE(out.ok());
        got.insert(got.end(), out->logits.begin(), out->logits.end());
      }
      std::vector<int32_t> final_ids = prefix;
      final_ids.insert(final_ids.end(), second.begin(), second.end());
      const std::vector<float> all = prefill_all(*m, final_ids);
      const std::vector<float> want(all.begin() + N * V, all.end());
      expect_close(got, want, V, false,
                   std::string(c.cfg) + "/" + c.variant + " rollback N=" + std::to_string(N) +
                       " k=" + std::to_string(k));
    }
  }
}

TEST(ModelEquivalence, RollbackLimits) {
  auto m = load_test_model("v4_tiny_a", "hf_fp32", opt_ops());
  ASSERT_NE(m, nullptr);
  SequenceCache seq = m->new_sequence(CacheOptions{4});
  const std::vector<int32_t> ids = prompt_ids("v4_tiny_a", "len40");
  ASSERT_TRUE(m->extend(seq, ids).ok());
  const Status too_far = seq.rollback(5);
  EXPECT_EQ(too_far.code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_far.message().find("max_rollback 4"), std::string::npos) << too_far.message();
  EXPECT_EQ(seq.length(), 40);
  EXPECT_TRUE(seq.rollback(4).ok());
  EXPECT_EQ(seq.rollback(-1).code(), StatusCode::kOutOfRange);
}

// Two sequences of different lengths (one prefilling, one decoding) in one step == each alone
// (on the CPU this is batch invariance: every row is computed as if it were alone).
TEST(ModelEquivalence, SeveralSequencesInOneStep) {
  for (const Case& c : {Case{"v4_tiny_a", "hf_fp32"}, Case{"v41_tiny_a", "official_bf16"},
                        Case{"v41_tiny_a", "official_quant"}}) {
    auto m = load_test_model(c.cfg, c.variant, opt_ops());
    ASSERT_NE(m, nullptr);
    const std::string tag = std::string(c.cfg) + "/" + c.variant;
    const int64_t V = m->vocab_size();
    const std::vector<int32_t> a = prompt_ids(c.cfg, "len40");
    std::vector<int32_t> b = prompt_ids(c.cfg, "len300");
    b.resize(23);
    SequenceCache sa = m->new_sequence(), sb = m->new_sequence();
    ASSERT_TRUE(m->extend(sb, std::span<const int32_t>(b).first(20)).ok());
    // Step: all of a (prefill from 0) + the last 3 tokens of b (continuing at 20).
    std::vector<int32_t> ids(a);
    ids.insert(ids.end(), b.begin() + 20, b.end());
    std::vector<int32_t> pos(a.size());
    std::iota(pos.begin(), pos.end(), 0);
    for (int32_t p = 20; p < 23; ++p) pos.push_back(p);
    const SequenceSpan spans[] = {{&sa, 0, 40, LogitsWanted::kAll},
                                  {&sb, 40, 3, LogitsWanted::kAll}};
    StepOutputs out;
    ASSERT_TRUE(m->forward(StepInputs{ids, pos, spans, false}, out).ok());
    ASSERT_EQ(out.logit_rows, 43);
    const std::vector<float> got_a(out.logits.begin(), out.logits.begin() + 40 * V);
    const std::vector<float> got_b(out.logits.begin() + 40 * V, out.logits.end());
    expect_close(got_a, prefill_all(*m, a), V, false, tag + " batched sequence a");
    const std::vector<float> all_b = prefill_all(*m, b);
    expect_close(got_b, std::vector<float>(all_b.begin() + 20 * V, all_b.end()), V, false,
                 tag + " batched sequence b");
    EXPECT_EQ(sa.length(), 40);
    EXPECT_EQ(sb.length(), 23);
  }
}

// A DSpark draft reads the context rings of the last target layers and the Engram look-back:
// whatever steps built the cache (one prefill, chunks, token by token, a rollback and other
// tokens), the draft after the same tokens is the same, bit for bit.
TEST(ModelEquivalence, DSparkDraftIndependentOfHowTheCacheWasBuilt) {
  for (const char* variant : {"official_bf16", "official_quant"}) {
    auto m = load_test_model("v41_tiny_a", variant, opt_ops());
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(m->drafter(), DrafterKind::kDSpark);
    const int k = m->config().dspark.block_size;
    const std::vector<int32_t> src = prompt_ids("v41_tiny_a", "len300");
    const std::vector<int32_t> ids(src.begin(), src.begin() + 45);
    const int32_t anchor = src[45];
    auto draft = [&](SequenceCache& seq) {
      auto d = m->dspark_draft(seq, anchor, k);
      EXPECT_TRUE(d.ok()) << d.status().to_string();
      return d.ok() ? *d : DraftBlock{};
    };
    auto same = [&](const DraftBlock& got, const DraftBlock& want, const std::string& how) {
      EXPECT_EQ(got.tokens, want.tokens) << variant << " " << how;
      EXPECT_EQ(got.logits, want.logits) << variant << " " << how;
      EXPECT_EQ(got.confidence, want.confidence) << variant << " " << how;
    };
    SequenceCache whole = m->new_sequence(CacheOptions{16});
    ASSERT_TRUE(m->extend(whole, ids, LogitsWanted::kNone).ok());
    const DraftBlock want = draft(whole);
    ASSERT_EQ(static_cast<int>(want.tokens.size()), k);

    SequenceCache pieces = m->new_sequence();
    const int odd[] = {3, 5, 7, 13};
    size_t at = 0, n = 0;
    while (at < ids.size()) {
      const size_t len = std::min<size_t>(static_cast<size_t>(odd[n++ % 4]), ids.size() - at);
      ASSERT_TRUE(m->extend(pieces, std::span<const int32_t>(ids).subspan(at, len)).ok());
      at += len;
    }
    same(draft(pieces), want, "chunks 3,5,7,13");

    SequenceCache steps = m->new_sequence();
    for (int32_t t : ids) ASSERT_TRUE(m->decode(steps, t).ok());
    same(draft(steps), want, "token by token");

    // 34 tokens, 11 others decoded and rolled back, then the last 11 of ids.
    SequenceCache rolled = m->new_sequence(CacheOptions{16});
    ASSERT_TRUE(m->extend(rolled, std::span<const int32_t>(ids).first(34)).ok());
    for (int i = 0; i < 11; ++i) ASSERT_TRUE(m->decode(rolled, src[200 + i]).ok());
    ASSERT_TRUE(rolled.rollback(11).ok());
    EXPECT_EQ(rolled.draft_length(), 34);
    ASSERT_TRUE(m->extend(rolled, std::span<const int32_t>(ids).subspan(34)).ok());
    same(draft(rolled), want, "after a rollback of 11");

    // A prefix snapshot drafts as its source did, and the source is unchanged by it.
    SequenceCache snap = whole.clone();
    same(draft(snap), want, "snapshot");
    same(draft(whole), want, "source after the snapshot drafted");
  }
}

// Model::set_draft_context(false) (the engine without DSpark drafting): the main model's logits
// are the same bits without the drafter's context work, a sequence stepped without it cannot
// be drafted from (FailedPrecondition, not a stale draft), and with it on again a new sequence
// drafts exactly as on a model that always kept it; the old one drafts again after its next
// step, its context restarted there (runtime test DSparkResume checks those drafts).
TEST(ModelEquivalence, DSparkDraftContextOffKeepsLogitsAndRefusesDrafts) {
  for (const char* variant : {"official_bf16", "official_quant"}) {
    auto m = load_test_model("v41_tiny_a", variant, opt_ops());
    ASSERT_NE(m, nullptr);
    const int k = m->config().dspark.block_size;
    const std::vector<int32_t> src = prompt_ids("v41_tiny_a", "len300");
    const std::vector<int32_t> ids(src.begin(), src.begin() + 45);
    SequenceCache kept = m->new_sequence();
    auto want = m->extend(kept, ids, LogitsWanted::kAll);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    auto want_decode = m->decode(kept, src[45]);
    ASSERT_TRUE(want_decode.ok());
    auto want_draft = m->dspark_draft(kept, src[46], k);
    ASSERT_TRUE(want_draft.ok()) << want_draft.status().to_string();

    m->set_draft_context(false);
    SequenceCache lean = m->new_sequence();
    auto got = m->extend(lean, ids, LogitsWanted::kAll);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->logits, want->logits) << variant;
    auto got_decode = m->decode(lean, src[45]);
    ASSERT_TRUE(got_decode.ok());
    EXPECT_EQ(got_decode->logits, want_decode->logits) << variant;
    EXPECT_EQ(lean.draft_length(), 0) << variant;
    auto refused = m->dspark_draft(lean, src[46], k);
    ASSERT_FALSE(refused.ok()) << variant;
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << variant;

    m->set_draft_context(true);
    SequenceCache again = m->new_sequence();
    ASSERT_TRUE(m->extend(again, ids, LogitsWanted::kNone).ok());
    ASSERT_TRUE(m->decode(again, src[45]).ok());
    auto draft = m->dspark_draft(again, src[46], k);
    ASSERT_TRUE(draft.ok()) << draft.status().to_string();
    EXPECT_EQ(draft->tokens, want_draft->tokens) << variant;
    EXPECT_EQ(draft->logits, want_draft->logits) << variant;
    // The sequence stepped without the context restarts it at its next step with it on.
    ASSERT_TRUE(m->decode(lean, src[46]).ok());
    EXPECT_EQ(lean.draft_length(), lean.length()) << variant;
    EXPECT_TRUE(m->dspark_draft(lean, src[47], k).ok()) << variant;
  }
}

// Batched DSpark drafting (the engine's DSpark drafter): dspark_draft_all over sequences of
// different lengths (one past the sliding window, so their context rows differ in number), one
// of them teacher-forced, equals dspark_draft of each alone, bit for bit, on both CPU backends;
// without logits the tokens and confidences are the same; the caches are unchanged.
TEST(ModelEquivalence, DSparkDraftAllEqualsEachAlone) {
  for (const bool ref : {false, true}) {
    for (const char* variant : {"official_bf16", "official_quant"}) {
      const std::string tag = std::string(variant) + (ref ? " ref" : " opt");
      auto m = load_test_model("v41_tiny_a", variant, ref ? ref_ops() : opt_ops());
      ASSERT_NE(m, nullptr);
      ASSERT_EQ(m->drafter(), DrafterKind::kDSpark);
      const int k = m->config().dspark.block_size;
      const std::vector<int32_t> src = prompt_ids("v41_tiny_a", "len300");
      const int64_t lengths[] = {45, 7, static_cast<int64_t>(m->config().sliding_window) + 40, 1};
      std::vector<SequenceCache> seqs;
      for (const int64_t L : lengths) {
        ASSERT_LT(L, static_cast<int64_t>(src.size()));
        seqs.push_back(m->new_sequence());
        ASSERT_TRUE(m->extend(seqs.back(), std::span<const int32_t>(src).first(
                                                 static_cast<size_t>(L)), LogitsWanted::kNone)
                        .ok());
      }
      const std::vector<int32_t> forced = {src[3], src[4], src[5]};
      std::vector<DSparkJob> jobs;
      for (size_t i = 0; i < seqs.size(); ++i) {
        jobs.push_back({&seqs[i], src[static_cast<size_t>(lengths[i])],
                        i == 1 ? std::span<const int32_t>(forced) : std::span<const int32_t>(),
                        {}});
      }
      std::vector<DraftBlock> alone;
      for (const DSparkJob& j : jobs) {
        auto d = m->dspark_draft(*j.cache, j.anchor, k, j.forced);
        ASSERT_TRUE(d.ok()) << d.status().to_string();
        alone.push_back(*d);
      }
      auto all = m->dspark_draft_all(jobs, k);
      ASSERT_TRUE(all.ok()) << all.status().to_string();
      ASSERT_EQ(all->size(), jobs.size());
      for (size_t i = 0; i < jobs.size(); ++i) {
        EXPECT_EQ((*all)[i].tokens, alone[i].tokens) << tag << " job " << i;
        EXPECT_EQ((*all)[i].logits, alone[i].logits) << tag << " job " << i;
        EXPECT_EQ((*all)[i].confidence, alone[i].confidence) << tag << " job " << i;
        EXPECT_EQ(static_cast<int>(alone[i].tokens.size()), k);
      }
      // Without logits, in the reverse order: the same tokens and confidences.
      std::vector<DSparkJob> reversed(jobs.rbegin(), jobs.rend());
      auto lean = m->dspark_draft_all(reversed, k, /*logits=*/false);
      ASSERT_TRUE(lean.ok()) << lean.status().to_string();
      for (size_t i = 0; i < jobs.size(); ++i) {
        const DraftBlock& got = (*lean)[jobs.size() - 1 - i];
        EXPECT_EQ(got.tokens, alone[i].tokens) << tag << " job " << i << " without logits";
        EXPECT_EQ(got.confidence, alone[i].confidence) << tag << " job " << i;
        EXPECT_TRUE(got.logits.empty());
      }
      for (size_t i = 0; i < seqs.size(); ++i) {
        EXPECT_EQ(seqs[i].length(), lengths[i]);
        EXPECT_EQ(seqs[i].draft_length(), lengths[i]);
      }
      // A bad job refuses the call; none is an empty answer.
      std::vector<DSparkJob> bad = jobs;
      bad[2].anchor = static_cast<int32_t>(m->vocab_size());
      EXPECT_FALSE(m->dspark_draft_all(bad, k).ok());
      auto none = m->dspark_draft_all({}, k);
      ASSERT_TRUE(none.ok());
      EXPECT_TRUE(none->empty());
    }
  }
}

TEST(ModelEquivalence, RefBackendEqualsOpt) {
  for (const Case& c : kCases) {
    auto opt = load_test_model(c.cfg, c.variant, opt_ops());
    auto ref = load_test_model(c.cfg, c.variant, ref_ops());
    ASSERT_TRUE(opt && ref);
    const std::vector<int32_t> ids = prompt_ids(c.cfg, "len40");
    expect_close(prefill_all(*ref, ids), prefill_all(*opt, ids), opt->vocab_size(),
                 opt->official_semantics(), std::string(c.cfg) + "/" + c.variant + " ref vs opt");
  }
}

TEST(ModelEquivalence, StepErrors) {
  auto m = load_test_model("v4_tiny_a", "hf_fp32", opt_ops());
  ASSERT_NE(m, nullptr);
  SequenceCache seq = m->new_sequence();
  const int32_t bad[] = {5, 256};
  auto r = m->extend(seq, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("token id 256"), std::string::npos) << r.status().message();
  EXPECT_EQ(seq.length(), 0);
  // A step whose positions do not continue the cache.
  const int32_t ids[] = {5};
  const int32_t pos[] = {3};
  const SequenceSpan span{&seq, 0, 1, LogitsWanted::kLast};
  StepOutputs out;
  EXPECT_EQ(m->forward(StepInputs{ids, pos, {&span, 1}, false}, out).code(),
            StatusCode::kInvalidArgument);
  // The same cache twice in one step.
  const int32_t two_ids[] = {5, 6};
  const int32_t two_pos[] = {0, 0};
  const SequenceSpan twice[] = {{&seq, 0, 1, LogitsWanted::kLast},
                                {&seq, 1, 1, LogitsWanted::kLast}};
  const Status dup = m->forward(StepInputs{two_ids, two_pos, twice, false}, out);
  EXPECT_EQ(dup.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.message().find("same sequence cache twice"), std::string::npos) << dup.message();
  EXPECT_EQ(seq.length(), 0);
  // Draws that do not match the logits rows: refused before the cache moves.
  const int32_t zero[] = {0};
  const sample::SampleSpec specs[2];
  StepInputs two_draws{ids, zero, {&span, 1}, false};
  two_draws.sample_specs = specs;
  const Status draws = m->forward(two_draws, out);
  EXPECT_EQ(draws.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(draws.message().find("one SampleSpec per row"), std::string::npos) << draws.message();
  EXPECT_EQ(seq.length(), 0);
  // MTP on a checkpoint without mtp.* tensors.
  auto mb = load_test_model("v4_tiny_b", "hf_fp32", opt_ops());
  ASSERT_NE(mb, nullptr);
  EXPECT_FALSE(mb->has_mtp());
  SequenceCache sb = mb->new_sequence();
  EXPECT_FALSE(mb->mtp_draft(sb, {}, {}).ok());
}

TEST(ModelEquivalence, BadModelDir) {
  auto m = load_model(source_dir() + "/tests/data/model/does_not_exist", opt_ops());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("does_not_exist"), std::string::npos) << m.status().message();
}

// MTP drafting step by step (one row per decode step, as a speculative engine would run it)
// == the MTP rows of one call, and MTP rollback keeps the MTP state consistent.
TEST(ModelEquivalence, MtpIncrementalEqualsBatched) {
  auto m = load_test_model("v4_tiny_a", "official_fp32", opt_ops());
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->has_mtp());
  const int64_t V = m->vocab_size(),
                S = static_cast<int64_t>(m->config().hc_mult) * m->config().hidden_size;
  std::vector<int32_t> ids = prompt_ids("v4_tiny_a", "len40");
  const int64_t T = static_cast<int64_t>(ids.size());
  SequenceCache s1 = m->new_sequence();
  auto o1 = m->extend(s1, ids, LogitsWanted::kNone, true);
  ASSERT_TRUE(o1.ok());
  auto want = m->mtp_draft(s1, std::span<const float>(o1->hidden).first((T - 1) * S),
                           std::span<const int32_t>(ids).subspan(1));
  ASSERT_TRUE(want.ok());

  SequenceCache s2 = m->new_sequence();
  std::vector<float> got;
  std::vector<float> prev_hidden;
  for (int64_t t = 0; t < T; ++t) {
    auto o = m->extend(s2, {&ids[static_cast<size_t>(t)], 1}, LogitsWanted::kLast, true);
    ASSERT_TRUE(o.ok());
    if (t > 0) {  // token t is known now: draft row t - 1
      auto d = m->mtp_draft(s2, prev_hidden, {&ids[static_cast<size_t>(t)], 1});
      ASSERT_TRUE(d.ok()) << d.status().to_string();
      got.insert(got.end(), d->begin(), d->end());
    }
    prev_hidden = deepinfer::backend::to_vector(o->hidden);
  }
  expect_close(got, *want, V, false, "MTP incremental vs batched");
  EXPECT_EQ(s2.draft_length(), T - 1);
  ASSERT_TRUE(s2.rollback(3).ok());
  EXPECT_EQ(s2.draft_length(), T - 4);
}

// Chained MTP drafting (the engine's MTP drafter): the block runs ahead of the main model on its
// own output streams, then SequenceCache::truncate_draft cuts it back; the state must be exactly
// the one before the chain (the next draft from it is bitwise the same), and mtp_step over
// several sequences at once must give each sequence's last row as mtp_draft does alone.
TEST(ModelEquivalence, MtpChainTruncatesBackExactlyAndBatchesPerSequence) {
  auto m = load_test_model("v4_tiny_a", "official_fp32", opt_ops());
  ASSERT_NE(m, nullptr);
  const int64_t V = m->vocab_size(),
                S = static_cast<int64_t>(m->config().hc_mult) * m->config().hidden_size;
  std::vector<int32_t> ids = prompt_ids("v4_tiny_a", "len40");
  const int64_t T = static_cast<int64_t>(ids.size());
  auto prepared = [&](SequenceCache& seq, std::vector<float>& last_hidden) {
    auto o = m->extend(seq, std::span<const int32_t>(ids).first(static_cast<size_t>(T - 1)),
                       LogitsWanted::kNone, true);
    ASSERT_TRUE(o.ok());
    // Rows 0..T-3 with their next tokens: the block is one position behind, as in the engine.
    auto d = m->mtp_draft(seq, std::span<const float>(o->hidden).first((T - 2) * S),
                          std::span<const int32_t>(ids).subspan(1, static_cast<size_t>(T - 2)));
    ASSERT_TRUE(d.ok());
    last_hidden.assign(o->hidden.end() - S, o->hidden.end());
  };
  SequenceCache a = m->new_sequence();
  std::vector<float> ha;
  prepared(a, ha);
  const int32_t next = ids[static_cast<size_t>(T - 1)];
  SequenceCache a2 = a.clone();
  auto before = m->mtp_draft(a2, ha, {&next, 1});
  ASSERT_TRUE(before.ok());
  // Run ahead three chained rows (each on the block's own output streams), then cut back.
  const MtpRows first_row[1] = {{&a, ha, {&next, 1}}};
  auto step = m->mtp_step(first_row);
  ASSERT_TRUE(step.ok());
  for (int j = 0; j < 3; ++j) {
    const int32_t t = static_cast<int32_t>((j * 7 + 3) % V);
    const std::vector<float> from = step->streams;
    const MtpRows chained[1] = {{&a, from, {&t, 1}}};
    step = m->mtp_step(chained, /*run_ahead=*/true);
    ASSERT_TRUE(step.ok()) << step.status().to_string();
  }
  EXPECT_EQ(a.draft_length(), a.length() + 3);
  EXPECT_FALSE(a.truncate_draft(a.length() + 4).ok());  // cannot grow
  ASSERT_TRUE(a.truncate_draft(a.length() - 1).ok());
  auto after = m->mtp_draft(a, ha, {&next, 1});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before) << "truncate_draft did not restore the MTP state";

  // mtp_step over two sequences == each alone (last row's logits, as token and as logits).
  SequenceCache b = m->new_sequence(), c = m->new_sequence();
  std::vector<float> hb, hc;
  prepared(b, hb);
  prepared(c, hc);
  const MtpRows rows[2] = {{&b, hb, {&next, 1}}, {&c, hc, {&next, 1}}};
  auto both = m->mtp_step(rows);
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  ASSERT_EQ(both->logits.size(), static_cast<size_t>(2 * V));
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(std::vector<float>(both->logits.begin() + e * V, both->logits.begin() + (e + 1) * V),
              *before)
        << "entry " << e;
  }
  ASSERT_TRUE(b.truncate_draft(b.length() - 1).ok());
  ASSERT_TRUE(c.truncate_draft(c.length() - 1).ok());
  auto ids_only = m->mtp_step(rows, false, MtpOutputs::kTokens);
  ASSERT_TRUE(ids_only.ok());
  const auto best = static_cast<int32_t>(std::max_element(before->begin(), before->end()) -
                                         before->begin());
  EXPECT_EQ(ids_only->tokens, (std::vector<int32_t>{best, best}));
  EXPECT_TRUE(ids_only->logits.empty());
}

// Model::mtp_chain (the engine's MTP drafting: drafts drawn and fed on the backend) equals the
// same chain made step by step with mtp_step (its tokens as the next ids, its streams fed back),
// token for token and in the block's probability of each token, for several sequences whose
// catch-up steps have different row counts, and leaves the MTP state run ahead by steps - 1.
TEST(ModelEquivalence, MtpChainEqualsStepByStepDrafting) {
  for (const char* variant : {"official_fp32", "official_quant"}) {
    SCOPED_TRACE(variant);
    auto m = load_test_model("v4_tiny_a", variant, opt_ops());
    ASSERT_NE(m, nullptr);
    const int64_t V = m->vocab_size(),
                  S = static_cast<int64_t>(m->config().hc_mult) * m->config().hidden_size;
    const std::vector<int32_t> ids = prompt_ids("v4_tiny_a", "len40");
    const int steps = 5;
    // Sequence e holds T_e tokens with its block caught up to T_e - 1 - c_e: its catch-up rows
    // are the last c_e + 1 positions (hidden rows and the tokens after them).
    struct Seq {
      SequenceCache cache;
      std::vector<float> hidden;  // the catch-up rows' streams
      std::vector<int32_t> next;  // the tokens after them
    };
    auto prepared = [&](int64_t T, int64_t c) {
      Seq q{m->new_sequence(), {}, {}};
      auto o = m->extend(q.cache, std::span<const int32_t>(ids).first(static_cast<size_t>(T)),
                         LogitsWanted::kNone, true);
      EXPECT_TRUE(o.ok());
      const int64_t done = T - 1 - c;
      if (done > 0) {
        EXPECT_TRUE(m->mtp_draft(q.cache, std::span<const float>(o->hidden).first(done * S),
                                 std::span<const int32_t>(ids).subspan(1, static_cast<size_t>(done)))
                        .ok());
      }
      q.hidden.assign(o->hidden.begin() + done * S, o->hidden.end());
      q.next.assign(ids.begin() + done + 1, ids.begin() + T + 1);
      return q;
    };
    const std::pair<int64_t, int64_t> shapes[] = {{20, 0}, {31, 3}, {12, 5}};
    std::vector<Seq> a, b;
    for (const auto& [T, c] : shapes) {
      a.push_back(prepared(T, c));
      b.push_back(prepared(T, c));
    }
    auto rows_of = [](std::vector<Seq>& seqs) {
      std::vector<MtpRows> rows;
      for (Seq& q : seqs) rows.push_back({&q.cache, q.hidden, q.next});
      return rows;
    };
    // Step by step: mtp_step's tokens (and, from its logits, the drafter's probability).
    std::vector<int32_t> want_tok(3 * steps);
    std::vector<float> want_p(3 * steps);
    std::vector<MtpRows> rows = rows_of(a);
    std::vector<std::vector<float>> from(3);
    std::vector<int32_t> prev(3);
    for (int d = 0; d < steps; ++d) {
      auto st = m->mtp_step(rows, /*run_ahead=*/d > 0, MtpOutputs::kLogits);
      ASSERT_TRUE(st.ok()) << st.status().to_string();
      for (size_t e = 0; e < 3; ++e) {
        const std::span<const float> lg =
            std::span<const float>(st->logits).subspan(e * static_cast<size_t>(V), static_cast<size_t>(V));
        const auto best = std::max_element(lg.begin(), lg.end());
        double z = 0;
        for (const float l : lg) z += std::exp(l - *best);
        want_tok[e * steps + static_cast<size_t>(d)] = static_cast<int32_t>(best - lg.begin());
        want_p[e * steps + static_cast<size_t>(d)] = static_cast<float>(1.0 / z);
        from[e].assign(st->streams.begin() + static_cast<int64_t>(e) * S,
                       st->streams.begin() + static_cast<int64_t>(e + 1) * S);
        prev[e] = want_tok[e * steps + static_cast<size_t>(d)];
        rows[e] = {&a[e].cache, from[e], {&prev[e], 1}};
      }
    }
    std::vector<MtpRows> chain_rows = rows_of(b);
    auto chain = m->mtp_chain(chain_rows, steps, false, true);
    ASSERT_TRUE(chain.ok()) << chain.status().to_string();
    EXPECT_EQ(chain->tokens, want_tok);
    EXPECT_EQ(chain->probs, want_p);
    for (size_t e = 0; e < 3; ++e) {
      EXPECT_EQ(b[e].cache.draft_length(), b[e].cache.length() + steps - 1) << "entry " << e;
      EXPECT_EQ(b[e].cache.draft_length(), a[e].cache.draft_length()) << "entry " << e;
    }
    // Without probabilities: the same tokens, none of them.
    for (size_t e = 0; e < 3; ++e) ASSERT_TRUE(b[e].cache.truncate_draft(b[e].cache.length()).ok());
    for (size_t e = 0; e < 3; ++e) {
      const int64_t c = shapes[e].second;
      ASSERT_TRUE(b[e].cache.truncate_draft(b[e].cache.length() - 1 - c).ok());
    }
    auto tokens_only = m->mtp_chain(chain_rows, steps, false, false);
    ASSERT_TRUE(tokens_only.ok());
    EXPECT_EQ(tokens_only->tokens, want_tok);
    EXPECT_TRUE(tokens_only->probs.empty());
    EXPECT_FALSE(m->mtp_chain(chain_rows, 0, false, false).ok());
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
