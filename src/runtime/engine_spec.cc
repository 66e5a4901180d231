// EngineCore, speculative decoding on the executor (engine_core.h; docs/speculative.md).
//
// A decode with draft slots feeds [last accepted token, d_1 .. d_m] (m <= slots, the drafter's
// proposal) and gets logits for every row. Verification draws the target's token at row i with
// the very key plain decoding uses at that output position (seq_seed, output index, sample
// index), after every logits processor and the grammar mask, and accepts it; the run continues
// while that token equals d_{i+1}. So a draft survives exactly when the target would have
// produced it, and the emitted tokens are bitwise those of decoding without speculation, for
// greedy and seeded sampling alike, whatever the drafter, k, batch or preemption (for a
// one-token proposal this is rejection sampling with q = one-hot: accept with p(d)). The
// rows after the first mismatch are discarded: the cache rolls back to the accepted tokens.
#include <algorithm>

#include "runtime/engine_core.h"

namespace deepinfer::runtime {

void EngineCore::prepare_verify(const sched::ScheduledRequest& sr, SeqExec& e, int64_t start,
                                int32_t last) const {
  const std::vector<int32_t>& drafts = e.draft.proposal.tokens;
  int64_t m = std::min<int64_t>(sr.num_drafts, static_cast<int64_t>(drafts.size()));
  // A verify span ends at the next block boundary at the latest: the prefix cache's snapshot
  // there is taken once the drafts before it are accepted (finish_spec_step), and never holds
  // a rejected token.
  if (block_size_ > 0) m = std::min(m, (start / block_size_ + 1) * block_size_ - start - 1);
  e.fed.assign(1, last);  // the plan's token: the last known one, or a filled placeholder
  e.fed.insert(e.fed.end(), drafts.begin(), drafts.begin() + std::max<int64_t>(0, m));
}

void EngineCore::verify_rows(sched::RequestId id, SeqExec& e, std::span<const float> rows,
                             int64_t count, sample::Sampler& sampler, Sampled& out) {
  const auto V = static_cast<size_t>(vocab_size());
  out.id = id;
  out.drafts_verified = static_cast<int32_t>(count - 1);
  for (int64_t i = 0; i < count; ++i) {
    const size_t before = out.tokens.size();
    sample_one(id, e, rows.subspan(static_cast<size_t>(i) * V, V), sampler, out);
    if (out.tokens.size() == before || !out.error.empty() || e.grammar_done) return;
    if (i + 1 == count || out.tokens.back() != e.fed[static_cast<size_t>(i + 1)]) return;
  }
}

void EngineCore::verify_drawn(SeqExec& e, std::span<const int32_t> drawn, Sampled& out) {
  out.drafts_verified = static_cast<int32_t>(drawn.size() - 1);
  if (e.grammar_done) return;
  for (size_t i = 0; i < drawn.size(); ++i) {
    if (!accept_token(e, drawn[i], out) || e.grammar_done) return;
    if (i + 1 == drawn.size() || drawn[i] != e.fed[i + 1]) return;
  }
}

void EngineCore::observe_hidden(SeqExec& e, int64_t first, std::span<const float> hidden) {
  if (drafter_ == nullptr || !drafter_->wants_hidden() || !e.cache) return;
  if (!drafter_->observe(*e.cache, e.known, first, hidden, e.draft).ok()) {
    e.draft.lost = true;  // a drafter failure costs speed, never output
  }
}

void EngineCore::finish_spec_step(const sched::ScheduledRequest& sr, SeqExec& e, int64_t start,
                                  int64_t fed, std::span<const float> hidden, Sampled& out) {
  if (!e.cache || !out.error.empty()) return;  // a failed request's state is dropped
  const int64_t kept_rows = std::min<int64_t>(fed, std::max<size_t>(1, out.tokens.size()));
  if (sr.num_drafts > 0) {
    // Rows past the accepted run held rejected drafts: undo them in every cache kind.
    const int64_t undo = fed - kept_rows;
    if (undo > 0) {
      if (const Status st = e.cache->rollback(undo); !st.ok()) {
        out.error = "internal: speculative rollback failed: " + st.message();
        return;
      }
    }
    e.spec_planned_end = start + sr.num_tokens;
    e.spec_kept_end = e.cache->length();
    if (block_size_ > 0 && undo == 0 && fed > 1 && e.cache->length() % block_size_ == 0) {
      save_snapshot_at(sr, *e.cache);
    }
  }
  e.draft.proposal.clear();
  if (drafter_ == nullptr || spec_tokens_ <= 0 || out.tokens.empty() || e.grammar_done) return;
  if (!hidden.empty()) {
    const size_t width = hidden.size() / static_cast<size_t>(fed);
    observe_hidden(e, start, hidden.first(static_cast<size_t>(kept_rows) * width));
  }
  if (const Status st = drafter_->propose(*e.cache, e.known, spec_tokens_, e.draft); !st.ok()) {
    e.draft.proposal.clear();  // a drafter failure costs speed, not output
  }
  out.drafts_proposed = static_cast<int32_t>(e.draft.proposal.tokens.size());
  out.next_confidence = e.draft.proposal.confidence;
}

}  // namespace deepinfer::runtime
