// Drafters after positions they did not follow (varlen put them to sleep, or a prefix restore
// outran them): they resume with their windows restarting there (SequenceCache::skip_draft),
// instead of proposing nothing for the rest of the sequence, and once a window's worth of
// positions has passed their drafts are bit for bit those of a drafter that never slept (their
// windows reach back no further).
//   MTP (DeepSeek-V4): driven as the engine does, one decode per position, the step's hidden
//   row, then propose_all; asleep, it gets nothing, or (since stop 45, as the engine does now)
//   holds the rows of its last window and wakes with them. And the rows a step keeps for it:
//   a span's last window (model::SequenceSpan::hidden_tail), the same drafts as every row.
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

std::vector<int32_t> fixed_ids(int64_t n) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 7919 + 13) % 4000 + 100));
  return ids;
}

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
  s.ids = fixed_ids(ResumeCase::kSleepTo + s.window + 24);
  return s;
}

struct Proposal {
  std::vector<int32_t> tokens;
  std::vector<float> confidence;
};

// How a sleeping drafter is treated: given nothing (the engine before stop 45), or given its
// rows to hold (Drafter::hold, the engine since).
enum class Asleep { kNothing, kHold };

// Feeds ids one position at a time after a prompt of `prompt` tokens; after each position
// outside [sleep_from, sleep_to) the drafter gets that step's hidden row and proposes k tokens
// (while asleep it gets nothing, or holds the row). Returns the proposal after each position.
std::vector<Proposal> drive(model::Model& m, Drafter& d, const std::vector<int32_t>& ids,
                            int64_t prompt, int k, int64_t sleep_from, int64_t sleep_to,
                            Asleep asleep = Asleep::kNothing) {
  model::SequenceCache seq = m.new_sequence();
  DraftState state;
  std::vector<Proposal> out;
  const int64_t width = static_cast<int64_t>(m.config().hc_mult) * m.config().hidden_size;
  auto step = [&](int64_t first, int64_t n, bool awake) {
    const bool hold = !awake && asleep == Asleep::kHold;
    auto r = m.extend(seq, std::span<const int32_t>(ids).subspan(first, n),
                      model::LogitsWanted::kLast, /*keep_hidden=*/awake || hold);
    EXPECT_TRUE(r.ok()) << r.status().message();
    Proposal p;
    if (hold) {
      d.hold(first, r->hidden, state);
      // Never more than the window (hidden_tail) is held, however long the sleep.
      EXPECT_LE(static_cast<int64_t>(state.pending.size()), d.hidden_tail() * width);
    }
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
  // EngineStats::spec_draft_window_restarts counts the one restart (the never-slept none).
  EXPECT_EQ((*awake_drafter)->window_restarts(), 0);
  EXPECT_EQ((*sleepy_drafter)->window_restarts(), 1);

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

// Since stop 45 a sleeping MTP block holds the hidden rows of its last window of positions
// (Drafter::hold) and runs them when it wakes: its first proposal after waking is already bit
// for bit a never-slept drafter's, however long it slept (here more than two windows, so that
// the held rows were trimmed many times).
TEST(MtpResume, HeldRowsWakeWithAWholeWindow) {
  ResumeCase su = set_up("v4-small");
  ASSERT_NE(su.model, nullptr);
  model::Model* m = su.model.get();
  const int64_t window = su.window;
  const int k = 3;
  const int64_t prompt = ResumeCase::kPrompt, sleep_from = ResumeCase::kSleepFrom,
                sleep_to = sleep_from + 2 * window + 5;
  const std::vector<int32_t> ids = fixed_ids(sleep_to + 12);
  auto awake_drafter = runtime::spec::make_mtp_drafter(*m);
  auto holding_drafter = runtime::spec::make_mtp_drafter(*m);
  ASSERT_TRUE(awake_drafter.ok() && holding_drafter.ok());
  ASSERT_EQ((*holding_drafter)->hidden_tail(), window);
  (*awake_drafter)->set_want_confidence(true);
  (*holding_drafter)->set_want_confidence(true);
  const std::vector<Proposal> awake = drive(*m, **awake_drafter, ids, prompt, k, -1, -1);
  const std::vector<Proposal> held =
      drive(*m, **holding_drafter, ids, prompt, k, sleep_from, sleep_to, Asleep::kHold);
  ASSERT_EQ(awake.size(), held.size());
  // It skipped the positions it no longer needed, but its window was whole: no restart counted.
  EXPECT_EQ((*holding_drafter)->window_restarts(), 0);
  auto at = [&](int64_t pos) { return static_cast<size_t>(pos - prompt + 1); };
  for (int64_t t = sleep_to; t + 1 < static_cast<int64_t>(ids.size()); ++t) {
    SCOPED_TRACE("position " + std::to_string(t));
    ASSERT_EQ(awake[at(t)].tokens.size(), static_cast<size_t>(k));
    EXPECT_EQ(awake[at(t)].tokens, held[at(t)].tokens);
    EXPECT_EQ(awake[at(t)].confidence, held[at(t)].confidence);
  }
}

// A prefix snapshot made while the MTP block slept: the engine first runs the rows it holds
// (Drafter::catch_up), so a sequence restored from the snapshot (a copy of the cache, with a
// fresh drafter state) drafts at once bit for bit as a never-slept block does; without the
// catch-up its first drafts differ (its window restarts empty), which the test also checks.
TEST(MtpResume, ASnapshotMadeAsleepCarriesTheWindow) {
  ResumeCase su = set_up("v4-small");
  ASSERT_NE(su.model, nullptr);
  model::Model* m = su.model.get();
  const int64_t window = su.window, prompt = ResumeCase::kPrompt, snap = prompt + window + 20;
  const std::vector<int32_t> ids = fixed_ids(snap + 12);
  const int k = 3;
  // The sequence up to `snap`: awake throughout, or asleep after its prompt (holding its rows);
  // then (asleep) caught up or not, copied as a snapshot, and decoded from the copy awake.
  auto run = [&](bool asleep, bool catch_up) {
    auto d = runtime::spec::make_mtp_drafter(*m);
    EXPECT_TRUE(d.ok());
    (*d)->set_want_confidence(true);
    model::SequenceCache seq = m->new_sequence();
    DraftState state;
    auto feed = [&](model::SequenceCache& c, DraftState& st, int64_t first, int64_t n,
                    bool awake) {
      auto r = m->extend(c, std::span<const int32_t>(ids).subspan(first, n),
                         model::LogitsWanted::kLast, true);
      EXPECT_TRUE(r.ok());
      if (!awake) {
        (*d)->hold(first, r->hidden, st);
        return Proposal{};
      }
      Drafter::Job job;
      job.cache = &c;
      job.context = std::span<const int32_t>(ids).first(first + n + 1);
      job.state = &st;
      job.first = first;
      job.hidden = r->hidden;
      (*d)->propose_all({&job, 1}, k);
      return Proposal{st.proposal.tokens, st.proposal.confidence};
    };
    feed(seq, state, 0, prompt, true);
    for (int64_t t = prompt; t < snap; ++t) feed(seq, state, t, 1, !asleep);
    if (catch_up) (*d)->catch_up(seq, std::span<const int32_t>(ids).first(snap + 1), state);
    model::SequenceCache restored = seq.clone();
    DraftState fresh;  // a new request's
    std::vector<Proposal> out;
    for (int64_t t = snap; t + 1 < static_cast<int64_t>(ids.size()); ++t) {
      out.push_back(feed(restored, fresh, t, 1, true));
    }
    return out;
  };
  const std::vector<Proposal> awake = run(false, false), caught_up = run(true, true),
                              not_caught_up = run(true, false);
  bool differed = false;
  for (size_t i = 0; i < awake.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i) + " after the restore");
    ASSERT_EQ(awake[i].tokens.size(), static_cast<size_t>(k));
    EXPECT_EQ(awake[i].tokens, caught_up[i].tokens);
    EXPECT_EQ(awake[i].confidence, caught_up[i].confidence);
    differed |= awake[i].confidence != not_caught_up[i].confidence;
  }
  EXPECT_TRUE(differed) << "a snapshot without the catch-up drafted as well: the test cannot tell";
}

// A step's span keeps the hidden streams of only its last hidden_tail rows (model::SequenceSpan):
// the same bits as those rows of a step that keeps every row, sequence by sequence, for a tail
// shorter than its span, longer than it (all rows), none, and all (-1); a tail below -1 is
// refused by name.
TEST(MtpHiddenTail, AStepKeepsEachSpansLastRows) {
  ResumeCase su = set_up("v4-small");
  ASSERT_NE(su.model, nullptr);
  model::Model* m = su.model.get();
  const int64_t width = static_cast<int64_t>(m->config().hc_mult) * m->config().hidden_size;
  const std::vector<int64_t> counts = {40, 5, 3, 6}, tails = {7, 9, 0, -1};
  auto run = [&](bool keep_all, model::StepOutputs& out) {
    std::vector<model::SequenceCache> seqs;
    for (size_t i = 0; i < counts.size(); ++i) seqs.push_back(m->new_sequence());
    std::vector<int32_t> ids, pos;
    std::vector<model::SequenceSpan> spans;
    for (size_t i = 0; i < counts.size(); ++i) {
      model::SequenceSpan sp;
      sp.cache = &seqs[i];
      sp.begin = static_cast<int64_t>(ids.size());
      sp.count = counts[i];
      sp.hidden_tail = keep_all ? -1 : tails[i];
      spans.push_back(sp);
      for (int64_t j = 0; j < counts[i]; ++j) {
        ids.push_back(su.ids[static_cast<size_t>(j + 3 * static_cast<int64_t>(i))]);
        pos.push_back(static_cast<int32_t>(j));
      }
    }
    model::StepInputs in{ids, pos, spans, /*keep_hidden=*/true};
    return m->forward(in, out);
  };
  model::StepOutputs all, tail;
  ASSERT_TRUE(run(true, all).ok());
  ASSERT_TRUE(run(false, tail).ok());
  std::vector<float> expect;
  int64_t begin = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t kept = tails[i] < 0 ? counts[i] : std::min(tails[i], counts[i]);
    const auto from = all.hidden.begin() + (begin + counts[i] - kept) * width;
    expect.insert(expect.end(), from, from + kept * width);
    begin += counts[i];
  }
  ASSERT_EQ(all.hidden.size(), static_cast<size_t>(begin * width));
  EXPECT_EQ(backend::to_vector(tail.hidden), expect);
  EXPECT_EQ(tail.logits, all.logits);  // nothing else changes

  model::SequenceCache seq = m->new_sequence();
  const std::vector<int32_t> one = {su.ids[0]}, zero = {0};
  model::SequenceSpan bad;
  bad.cache = &seq;
  bad.count = 1;
  bad.hidden_tail = -2;
  model::StepOutputs out;
  const Status refused = m->forward(model::StepInputs{one, zero, {&bad, 1}, true}, out);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("hidden_tail -2"), std::string::npos) << refused.message();
}

// The MTP block fed only a long prompt's last hidden_tail rows (what the engine now asks the
// model for) drafts bit for bit as when fed every row, at once and on each decode step after;
// fed fewer rows than its window, it does not (so the window is what makes them equal).
TEST(MtpHiddenTail, APromptsLastWindowDraftsLikeEveryRow) {
  ResumeCase su = set_up("v4-small");
  ASSERT_NE(su.model, nullptr);
  model::Model* m = su.model.get();
  const int64_t window = su.window, prompt = 2 * window + 9;
  const std::vector<int32_t> ids = fixed_ids(prompt + 13);
  const int k = 3;
  auto drafts = [&](int64_t tail) {
    auto d = runtime::spec::make_mtp_drafter(*m);
    EXPECT_TRUE(d.ok());
    (*d)->set_want_confidence(true);
    model::SequenceCache seq = m->new_sequence();
    DraftState state;
    std::vector<Proposal> out;
    int64_t first = 0, n = prompt;
    for (int step = 0; step < 12; ++step) {
      std::vector<int32_t> pos;
      for (int64_t j = 0; j < n; ++j) pos.push_back(static_cast<int32_t>(first + j));
      model::SequenceSpan sp;
      sp.cache = &seq;
      sp.count = n;
      sp.hidden_tail = tail;
      model::StepOutputs o;
      const Status st = m->forward(
          model::StepInputs{std::span<const int32_t>(ids).subspan(first, n), pos, {&sp, 1}, true},
          o);
      EXPECT_TRUE(st.ok()) << st.message();
      const int64_t kept = tail < 0 ? n : std::min(tail, n);
      Drafter::Job job;
      job.cache = &seq;
      job.context = std::span<const int32_t>(ids).first(first + n + 1);
      job.state = &state;
      job.first = first + n - kept;
      job.hidden = o.hidden;
      (*d)->propose_all({&job, 1}, k);
      out.push_back({state.proposal.tokens, state.proposal.confidence});
      first += n;
      n = 1;
    }
    return out;
  };
  const std::vector<Proposal> every = drafts(-1), last_window = drafts(window),
                              too_few = drafts(window / 2);
  bool differed = false;
  for (size_t i = 0; i < every.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    ASSERT_EQ(every[i].tokens.size(), static_cast<size_t>(k));
    EXPECT_EQ(every[i].tokens, last_window[i].tokens);
    EXPECT_EQ(every[i].confidence, last_window[i].confidence);
    differed |= every[i].confidence != too_few[i].confidence;
  }
  EXPECT_TRUE(differed) << "half a window drafted like every row: the test cannot tell";
}

}  // namespace
}  // namespace deepinfer
