// Drafters that run the checkpoint's own draft layers (drafter.h). DeepSeek-V4.1's DSpark block
// drafter (spec §6.4; model::Model::dspark_draft): from the anchor (the last context token, not
// yet processed) it drafts a block of k positions in one forward of its stages over the
// context features the main layers left in the cache, chooses them left to right through its
// Markov head, and scores each with its confidence head (σ of the logit = the estimated
// survival of position j given j - 1 survived).
#include <algorithm>
#include <cmath>

#include "runtime/spec/drafter.h"
#include "sample/sampler.h"

namespace deepinfer::runtime::spec {
namespace {

class DSparkDrafter final : public Drafter {
 public:
  explicit DSparkDrafter(model::Model& m) : model_(m) {}
  std::string name() const override { return "dspark"; }
  bool reads_draft_context() const override { return true; }
  bool proposes_distributions() const override { return true; }

  Status propose(model::SequenceCache& cache, std::span<const int32_t> ctx, int k,
                 DraftState& state) override {
    const Job job{&cache, ctx, &state, cache.length(), {}, {}};
    return draft({&job, 1}, k);
  }

  // Every sequence of the step in one draft (Model::dspark_draft_all): one forward of the
  // drafter's stages over all their blocks, instead of one per sequence.
  void propose_all(std::span<const Job> jobs, int k) override {
    if (!draft(jobs, k).ok()) {
      for (const Job& j : jobs) j.state->proposal.clear();  // speed only, never output
    }
  }

 private:
  Status draft(std::span<const Job> jobs, int k) {
    // The drafter was trained on blocks of dspark_block_size positions: never more.
    k = std::min<int>(k, model_.config().dspark.block_size);
    std::vector<model::DSparkJob> batch;
    std::vector<const Job*> who;
    for (const Job& j : jobs) {
      j.state->proposal.clear();
      // A drafter context behind the sequence would refuse the whole batch: that one drafts
      // nothing (the model keeps them equal; this is a guard, not a path).
      if (k <= 0 || j.context.empty() || j.cache->draft_length() != j.cache->length()) continue;
      batch.push_back({j.cache, j.context.back(), {}, j.draws});
      who.push_back(&j);
    }
    if (batch.empty()) return {};
    DI_ASSIGN_OR_RETURN(std::vector<model::DraftBlock> blocks,
                        model_.dspark_draft_all(batch, k, /*logits=*/false));
    for (size_t e = 0; e < blocks.size(); ++e) {
      DraftProposal& out = who[e]->state->proposal;
      out.tokens = std::move(blocks[e].tokens);
      out.confidence.reserve(blocks[e].confidence.size());
      for (const float c : blocks[e].confidence) {
        out.confidence.push_back(1.0f / (1.0f + std::exp(-c)));
      }
      if (!who[e]->draws.empty()) distributions(blocks[e].logits, who[e]->draws, out);
    }
    return {};
  }

  // Residual acceptance: q_j, the distribution slot j's token was drawn from (the request's
  // temperature and filters over the draft logits; the same filters Ops::sample applied). A
  // token outside it (a backend whose draw disagrees with the host's filters) ends the
  // proposal there: verification must know q of every draft it judges.
  void distributions(std::span<const float> logits, std::span<const sample::SampleSpec> draws,
                     DraftProposal& out) {
    const size_t V = static_cast<size_t>(model_.config().vocab_size);
    size_t keep = std::min(out.tokens.size(), draws.size());
    out.q.resize(keep * V);
    for (size_t j = 0; j < keep; ++j) {
      row_.assign(logits.begin() + static_cast<std::ptrdiff_t>(j * V),
                  logits.begin() + static_cast<std::ptrdiff_t>((j + 1) * V));
      if (!sample::filtered_probabilities(row_, draws[j], scratch_, probs_) ||
          !(probs_[static_cast<size_t>(out.tokens[j])] > 0.0f)) {
        keep = j;
        break;
      }
      std::copy(probs_.begin(), probs_.end(), out.q.begin() + static_cast<std::ptrdiff_t>(j * V));
    }
    out.tokens.resize(keep);
    out.confidence.resize(std::min(out.confidence.size(), keep));
    out.q.resize(keep * V);
  }
  std::vector<float> row_, probs_;
  sample::DrawScratch scratch_;

  model::Model& model_;
};

// DeepSeek-V4's MTP block (spec §2.8): row t combines the target's final streams at t with the
// embedding of token t + 1 and predicts t + 2, so it runs one position behind the sequence and
// needs the target's hidden streams of every position (observe). After the last position it
// has predicted the first draft; further drafts chain the block on its own output streams
// (DeepSeek-V3's recursive use of one MTP module), and its state is then cut back.
class MtpDrafter final : public Drafter {
 public:
  explicit MtpDrafter(model::Model& m)
      : model_(m),
        width_(static_cast<int64_t>(m.config().hc_mult) * m.config().hidden_size),
        window_(m.config().sliding_window) {}
  std::string name() const override { return "mtp"; }
  bool wants_hidden() const override { return true; }
  bool confidence_is_survival() const override { return false; }
  // The block attends to its window only: once it has run `window` positions after a gap its
  // state is the one it would have had without the gap (SequenceCache::skip_draft).
  int64_t hidden_tail() const override { return window_ > 0 ? window_ : -1; }

  void hold(int64_t first, std::span<const float> hidden, DraftState& st) override {
    append_pending(first, hidden, st);
    const int64_t rows = static_cast<int64_t>(st.pending.size()) / width_;
    if (window_ > 0 && rows > window_) {  // older rows would only be skipped over on waking
      st.pending.erase(st.pending.begin(), st.pending.begin() + (rows - window_) * width_);
      st.pending_first += rows - window_;
    }
  }

  Status observe(model::SequenceCache& cache, std::span<const int32_t> ctx, int64_t first,
                 std::span<const float> hidden, DraftState& st) override {
    // Keeping up only (no head): drafts start from propose_all's catch-up, never from here.
    const model::MtpRows rows = stash(cache, ctx, first, hidden, st);
    if (rows.cache == nullptr) return {};
    DI_TRY(model_.mtp_step({&rows, 1}, false, model::MtpOutputs::kNone).status());
    took(cache, st);
    return {};
  }

  void catch_up(model::SequenceCache& cache, std::span<const int32_t> ctx,
                DraftState& st) override {
    const model::MtpRows rows = stash(cache, ctx, cache.length(), {}, st);
    if (rows.cache == nullptr) return;
    if (model_.mtp_step({&rows, 1}, false, model::MtpOutputs::kNone).ok()) {
      took(cache, st);
    } else {
      st.lost = true;  // speed only: it resumes from later rows
    }
  }

  // Every job's catch-up rows in one block step; the jobs whose block thereby reaches their
  // last position draft k tokens in one Model::mtp_chain (the catch-up, then k - 1 chained
  // steps, drafts fed on the backend: one wait for the device per engine step, not one per
  // draft), the others only keep up (no head).
  void propose_all(std::span<const Job> jobs, int k) override {
    std::vector<model::MtpRows> keep_up, drafting;
    std::vector<size_t> keep_up_who, drafting_who;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& j = jobs[i];
      j.state->proposal.clear();
      const model::MtpRows r = stash(*j.cache, j.context, j.first, j.hidden, *j.state);
      if (r.cache == nullptr) continue;
      const int64_t L = j.cache->length();
      const bool reaches_end =
          j.cache->draft_length() + static_cast<int64_t>(r.next_ids.size()) == L;
      if (k > 0 && reaches_end && static_cast<int64_t>(j.context.size()) == L + 1) {
        drafting.push_back(r);
        drafting_who.push_back(i);
      } else {
        keep_up.push_back(r);
        keep_up_who.push_back(i);
      }
    }
    if (!keep_up.empty()) {
      const bool ok = model_.mtp_step(keep_up, false, model::MtpOutputs::kNone).ok();
      for (const size_t i : keep_up_who) {
        if (ok) {
          took(*jobs[i].cache, *jobs[i].state);
        } else {
          jobs[i].state->lost = true;
        }
      }
    }
    if (drafting.empty()) return;
    auto chain = model_.mtp_chain(drafting, k, /*run_ahead=*/false, want_confidence_);
    const auto K = static_cast<size_t>(k);
    for (size_t e = 0; e < drafting_who.size(); ++e) {
      const Job& j = jobs[drafting_who[e]];
      DraftState& st = *j.state;
      // Back to the accepted state: the block is then past exactly the caught-up rows.
      if (!chain.ok() || !j.cache->truncate_draft(j.cache->length()).ok()) {
        st.lost = true;
        continue;
      }
      took(*j.cache, st);
      DraftProposal& p = st.proposal;
      for (size_t d = 0; d < K; ++d) {
        const int32_t t = chain->tokens[e * K + d];
        if (t < 0) break;  // a non-finite row: this sequence's proposal ends here
        p.tokens.push_back(t);
        p.confidence.push_back(want_confidence_ ? chain->probs[e * K + d] : 0.5f);
      }
    }
  }

  Status propose(model::SequenceCache& cache, std::span<const int32_t> ctx, int k,
                 DraftState& st) override {
    const Job job{&cache, ctx, &st, cache.length(), {}, {}};
    propose_all({&job, 1}, k);
    return {};
  }

 private:
  // Adds the rows of positions [first, first + rows) to the sequence's pending rows and returns
  // the block's next step for it: the pending rows whose next token is known, from the block's
  // own position on (cache == nullptr: nothing to run now).
  model::MtpRows stash(model::SequenceCache& cache, std::span<const int32_t> ctx, int64_t first,
                       std::span<const float> hidden, DraftState& st) {
    if (st.lost && hidden.empty()) return {};
    append_pending(first, hidden, st);
    auto rows = [&] { return static_cast<int64_t>(st.pending.size()) / width_; };
    int64_t t0 = cache.draft_length();
    if (t0 < st.pending_first) {
      // The rows before pending_first are gone (a prefix restore outran the block, a block step
      // failed; a sleep's held rows skip only what no longer matters): the block resumes at
      // pending_first with an empty window, its drafts weaker until the window refills (only
      // speed depends on them). Counted when the rows it has do not refill the window.
      if (!cache.skip_draft(st.pending_first).ok()) {
        st.lost = true;
        st.pending.clear();
        return {};
      }
      if (window_ > 0 && std::min(cache.length(), st.pending_first + rows()) - st.pending_first <
                             window_) {
        window_restarts_.fetch_add(1, std::memory_order_relaxed);
      }
      t0 = st.pending_first;
    }
    const int64_t t_end = std::min({cache.length(), static_cast<int64_t>(ctx.size()) - 1,
                                    st.pending_first + rows()});
    if (t_end <= t0) return {};
    const int64_t n = t_end - t0;
    return {&cache,
            std::span<const float>(st.pending.data() + (t0 - st.pending_first) * width_,
                                   static_cast<size_t>(n * width_)),
            ctx.subspan(static_cast<size_t>(t0 + 1), static_cast<size_t>(n))};
  }

  // The rows of positions [first, first + rows) after the pending ones (replacing those at or
  // past `first`: re-fed positions), or instead of them when they do not continue them.
  void append_pending(int64_t first, std::span<const float> hidden, DraftState& st) const {
    if (hidden.empty()) return;
    if (st.lost) {
      // Lost rows (a prefix restore outran it, a block step failed): start again from the rows
      // this step brings, with an empty block window (SequenceCache::skip_draft).
      st.lost = false;
      st.pending.clear();
    }
    const int64_t rows = static_cast<int64_t>(st.pending.size()) / width_;
    if (st.pending.empty() || first < st.pending_first || first > st.pending_first + rows) {
      st.pending.clear();
      st.pending_first = first;
    } else {  // drop pending rows at or past `first` (re-fed), then append
      st.pending.resize(static_cast<size_t>((first - st.pending_first) * width_));
    }
    st.pending.insert(st.pending.end(), hidden.begin(), hidden.end());
  }

  // After the block ran a sequence's pending rows up to its draft length: drop them.
  void took(const model::SequenceCache& cache, DraftState& st) const {
    const int64_t t_end = cache.draft_length();
    st.pending.erase(st.pending.begin(),
                     st.pending.begin() + (t_end - st.pending_first) * width_);
    st.pending_first = t_end;
  }

  model::Model& model_;
  int64_t width_;
  int64_t window_;  // the block's attention window (positions)
};

}  // namespace

Expected<std::unique_ptr<Drafter>> make_mtp_drafter(model::Model& model) {
  if (model.drafter() != model::DrafterKind::kMtp) {
    return failed_precondition(std::string("speculative method 'mtp' needs a DeepSeek-V4 "
                                           "checkpoint with an MTP block (mtp.0.*); this one has ") +
                               model::drafter_kind_name(model.drafter()));
  }
  return std::unique_ptr<Drafter>(std::make_unique<MtpDrafter>(model));
}

Expected<std::unique_ptr<Drafter>> make_dspark_drafter(model::Model& model) {
  if (model.drafter() != model::DrafterKind::kDSpark) {
    return failed_precondition(std::string("speculative method 'dspark' needs a DeepSeek-V4.1 "
                                           "checkpoint with DSpark draft layers; this one has ") +
                               model::drafter_kind_name(model.drafter()));
  }
  return std::unique_ptr<Drafter>(std::make_unique<DSparkDrafter>(model));
}

}  // namespace deepinfer::runtime::spec
