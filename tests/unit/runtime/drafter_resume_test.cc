// Drafters after positions they did not follow (varlen put them to sleep, or a prefix restore
// outran them): they resume with their windows restarting there (SequenceCache::skip_draft),
// instead of proposing nothing for the rest of the sequence, and once a window's worth of
// positions has passed their drafts are bit for bit those of a drafter that never slept (their
// windows reach back no further).
//   MTP (DeepSeek-V4): driven as the engine does, one decode per position, the step's hidden
//   row, then propose_all; asleep, it gets nothing.
//   DSpark (DeepSeek-V4.1): the model's drafter context is off while asleep
//   (Model::set_draft_context), and the first forward after it is on again restarts it.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/select.h"
#include "model/model.h"
#include "runtime/spec/drafter.h"

namespace deepinfer {
namespace {

using runtime::spec::Drafter;
using runtime::spec::DraftState;

std::string model_dir(const char* name) {
  return std::string(DEEPINFER_TEST_SOURCE_DIR) + "/models/" + name;
}

// A model on the opt backend and the ids both tests feed: a prompt, positions before the sleep,
// the sleep, then a window's worth and more after it. Arbitrary but fixed ids (the drafts'
// values do not matter, only their equality).
struct ResumeCase {
  static constexpr int64_t kPrompt = 16, kSleepFrom = 24, kSleepTo = 64;
  std::unique_ptr<backend::Ops> ops;
  std::unique_ptr<model::Model> model;
  int64_t window = 0;
  std::vector<int32_t> ids;
};

ResumeCase set_up(const char* name) {
  ResumeCase s;
  auto ops = backend::make_ops("opt", 1);
  EXPECT_TRUE(ops.ok()) << ops.status().message();
  if (!ops.ok()) return s;
  s.ops = std::move(ops).value();
  auto m = model::load_model(model_dir(name), *s.ops);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return s;
  s.model = std::move(m).value();
  s.window = s.model->config().sliding_window;
  const int64_t n = ResumeCase::kSleepTo + s.window + 24;
  for (int64_t i = 0; i < n; ++i)
    s.ids.push_back(static_cast<int32_t>((i * 7919 + 13) % 4000 + 100));
  return s;
}

struct Proposal {
  std::vector<int32_t> tokens;
  std::vector<float> confidence;
};

// Feeds ids one position at a time after a prompt of `prompt` tokens; after each position
// outside [sleep_from, sleep_to) the drafter gets that step's hidden row and proposes k tokens
// (while asleep it gets nothing, as in the engine). Returns the proposal after each position.
std::vector<Proposal> drive(model::Model& m, Drafter& d, const std::vector<int32_t>& ids,
                            int64_t prompt, int k, int64_t sleep_from, int64_t sleep_to) {
  model::SequenceCache seq = m.new_sequence();
  DraftState state;
  std::vector<Proposal> out;
  auto step = [&](int64_t first, int64_t n, bool awake) {
    auto r = m.extend(seq, std::span<const int32_t>(ids).subspan(first, n),
                      model::LogitsWanted::kLast, /*keep_hidden=*/awake);
    EXPECT_TRUE(r.ok()) << r.status().message();
    Proposal p;
    if (awake) {
      Drafter::Job job;
      job.cache = &seq;
      job.context = std::span<const int32_t>(ids).first(first + n + 1);  // + the next token
      job.state = &state;
      job.first = first;
      job.hidden = r->hidden;
      d.propose_all({&job, 1}, k);
      p.tokens = state.proposal.tokens;
      p.confidence = state.proposal.confidence;
    }
    out.push_back(std::move(p));
  };
  step(0, prompt, true);
  for (int64_t t = prompt; t + 1 < static_cast<int64_t>(ids.size()); ++t) {
    step(t, 1, t < sleep_from || t >= sleep_to);
  }
  return out;
}

TEST(MtpResume, ResumesAfterMissingRowsAndMatchesOnceTheWindowRefills) {
  ResumeCase su = set_up("v4-small");
  ASSERT_NE(su.model, nullptr);
  ASSERT_GT(su.window, 0);
  model::Model* m = su.model.get();
  const std::vector<int32_t>& ids = su.ids;
  const int64_t window = su.window, n = static_cast<int64_t>(ids.size());
  const int k = 3;
  const int64_t prompt = ResumeCase::kPrompt, sleep_from = ResumeCase::kSleepFrom,
                sleep_to = ResumeCase::kSleepTo;

  auto awake_drafter = runtime::spec::make_mtp_drafter(*m);
  ASSERT_TRUE(awake_drafter.ok());
  (*awake_drafter)->set_want_confidence(true);
  const std::vector<Proposal> awake = drive(*m, **awake_drafter, ids, prompt, k, -1, -1);
  auto sleepy_drafter = runtime::spec::make_mtp_drafter(*m);
  ASSERT_TRUE(sleepy_drafter.ok());
  (*sleepy_drafter)->set_want_confidence(true);
  const std::vector<Proposal> slept =
      drive(*m, **sleepy_drafter, ids, prompt, k, sleep_from, sleep_to);
  ASSERT_EQ(awake.size(), slept.size());

  // proposal i was made after position prompt - 1 + i (i = 0: after the prompt)
  auto at = [&](int64_t pos) { return static_cast<size_t>(pos - prompt + 1); };
  for (int64_t t = prompt; t < sleep_from; ++t) {
    EXPECT_EQ(awake[at(t)].tokens, slept[at(t)].tokens) << "before sleeping, position " << t;
  }
  int64_t resumed = 0;
  for (int64_t t = sleep_to; t + 1 < n; ++t) {
    SCOPED_TRACE("position " + std::to_string(t));
    const Proposal& a = awake[at(t)];
    const Proposal& s = slept[at(t)];
    ASSERT_EQ(a.tokens.size(), static_cast<size_t>(k));
    // The resumed block proposes from its first step back (before the fix: nothing, ever).
    EXPECT_EQ(s.tokens.size(), static_cast<size_t>(k));
    // Its window holds only positions from sleep_to on: from sleep_to + window - 1 on, every
    // row it attends to is one the awake drafter has too (chained drafts read the window of
    // the position they extend, which is later still).
    if (t >= sleep_to + window - 1) {
      EXPECT_EQ(a.tokens, s.tokens);
      EXPECT_EQ(a.confidence, s.confidence);
      ++resumed;
    }
  }
  EXPECT_GT(resumed, 10);
  // And they differed somewhere right after waking (the window was shorter): otherwise this
  // test would not see whether the window restarted at all.
  bool differed = false;
  for (int64_t t = sleep_to; t < sleep_to + window - 1; ++t) {
    differed |= awake[at(t)].confidence != slept[at(t)].confidence;
  }
  EXPECT_TRUE(differed);
}

// The default model's DSpark drafts after each position; the context is off for positions
// [sleep_from, sleep_to) (no drafts then).
std::vector<model::DraftBlock> dspark_drive(model::Model& m, const std::vector<int32_t>& ids,
                                            int64_t prompt, int k, int64_t sleep_from,
                                            int64_t sleep_to) {
  model::SequenceCache seq = m.new_sequence();
  std::vector<model::DraftBlock> out;
  EXPECT_TRUE(m.extend(seq, std::span<const int32_t>(ids).first(prompt)).ok());
  for (int64_t t = prompt; t + 1 < static_cast<int64_t>(ids.size()); ++t) {
    const bool awake = t < sleep_from || t >= sleep_to;
    m.set_draft_context(awake);
    EXPECT_TRUE(m.extend(seq, std::span<const int32_t>(ids).subspan(t, 1)).ok());
    model::DraftBlock b;
    if (awake) {
      auto d = m.dspark_draft(seq, ids[static_cast<size_t>(t + 1)], k);
      EXPECT_TRUE(d.ok()) << "position " << t << ": " << d.status().message();
      if (d.ok()) b = std::move(d).value();
    }
    out.push_back(std::move(b));
  }
  m.set_draft_context(true);
  return out;
}

TEST(DSparkResume, RestartsTheContextAndMatchesOnceTheWindowRefills) {
  ResumeCase su = set_up("default");
  ASSERT_NE(su.model, nullptr);
  ASSERT_GT(su.window, 0);
  model::Model* m = su.model.get();
  const std::vector<int32_t>& ids = su.ids;
  const int64_t window = su.window, n = static_cast<int64_t>(ids.size());
  const int k = 4;
  const int64_t prompt = ResumeCase::kPrompt, sleep_from = ResumeCase::kSleepFrom,
                sleep_to = ResumeCase::kSleepTo;
  const std::vector<model::DraftBlock> awake = dspark_drive(*m, ids, prompt, k, -1, -1);
  const std::vector<model::DraftBlock> slept =
      dspark_drive(*m, ids, prompt, k, sleep_from, sleep_to);
  ASSERT_EQ(awake.size(), slept.size());
  auto at = [&](int64_t pos) { return static_cast<size_t>(pos - prompt); };
  int64_t same = 0;
  bool differed = false;
  for (int64_t t = sleep_to; t + 1 < n; ++t) {
    SCOPED_TRACE("position " + std::to_string(t));
    const model::DraftBlock& a = awake[at(t)];
    const model::DraftBlock& s = slept[at(t)];
    ASSERT_EQ(a.tokens.size(), static_cast<size_t>(k));
    EXPECT_EQ(s.tokens.size(), static_cast<size_t>(k));  // drafts again from its first step
    // The draft anchored at position t + 1 reads the context rows [t + 1 - window, t]: all
    // from sleep_to on once t + 1 - window >= sleep_to.
    if (t + 1 - window >= sleep_to) {
      EXPECT_EQ(a.tokens, s.tokens);
      EXPECT_EQ(a.confidence, s.confidence);
      ++same;
    } else {
      differed |= a.confidence != s.confidence;
    }
  }
  EXPECT_GT(same, 10);
  EXPECT_TRUE(differed) << "the context did not restart";
}

}  // namespace
}  // namespace deepinfer
