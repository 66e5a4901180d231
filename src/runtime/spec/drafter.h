// Drafter: proposes the tokens that may follow a sequence, for speculative decoding. The engine
// verifies every proposal against the target model (engine_exec.cc), so a drafter only decides
// speed, never output: a bad one costs verification work, a good one saves steps.
//
// Three implementations, each one file: the n-gram / prompt-lookup drafter (ngram_drafter.cc,
// no weights, any model), DeepSeek-V4.1's DSpark block drafter and DeepSeek-V4's MTP block
// (model_drafters.cc, through model::Model). A fourth is one more file behind this interface.
//
// Called on the executor thread, one sequence at a time, after that sequence's step was
// verified and its cache rolled back to the accepted tokens.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/cache.h"
#include "model/model.h"
#include "sample/sample_spec.h"

namespace deepinfer::runtime::spec {

struct DraftProposal {
  std::vector<int32_t> tokens;
  // Per drafted position j: the drafter's estimate that position j survives verification given
  // that the positions before it did (DSpark: its confidence head; MTP: its own probability of
  // its token; n-gram: none). Empty when the drafter has no estimate.
  std::vector<float> confidence;
  // Residual acceptance (Job::draws given to a drafter with proposes_distributions()): row j
  // [vocab] is the distribution q_j token j was drawn from, after the request's temperature and
  // filters. Empty otherwise (the proposal is one token per position: q one-hot).
  std::vector<float> q;
  void clear() {
    tokens.clear();
    confidence.clear();
    q.clear();
  }
};

// A sequence's drafter state, owned with the sequence (the engine's SeqExec).
struct DraftState {
  DraftProposal proposal;
  // Drafters that read the target's hidden streams (MTP): the rows of positions
  // [pending_first, pending_first + rows) not given to the draft layers yet.
  std::vector<float> pending;
  int64_t pending_first = 0;
  // The draft layers' rows are out of step (a block step failed): no proposals until the next
  // step's hidden rows, from which they resume (as they do, without this flag, when rows went
  // missing: a prefix restore, or a drafter put to sleep by varlen; SequenceCache::skip_draft).
  // Outputs are unaffected; only speed.
  bool lost = false;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Whether proposals need per-position confidences (varlen scheduling reads them); a drafter
  // whose estimate costs work (MTP: a softmax over the vocabulary per draft) skips it without.
  void set_want_confidence(bool want) { want_confidence_ = want; }
  // Drafters that read the target's final hidden streams: the engine then keeps them from every
  // forward and calls observe() with each sequence's rows.
  virtual bool wants_hidden() const { return false; }
  // Drafters that read the model's own drafter context (DSpark's window rings, kept by every
  // target forward: Model::set_draft_context); the engine keeps it only for them.
  virtual bool reads_draft_context() const { return false; }
  // Drafters that can draw their tokens from a full distribution (Job::draws) and report it
  // (DraftProposal::q), which residual acceptance needs (DSpark).
  virtual bool proposes_distributions() const { return false; }
  // Whether a proposal's confidences estimate each draft's survival (DSpark's trained confidence
  // head). MTP's are its own probability of its token, which a greedy target's acceptance does
  // not follow: varlen calibrates those per depth (sched/depth_calibration.h).
  virtual bool confidence_is_survival() const { return true; }
  // The target's forward processed positions [first, first + rows) of the sequence (hidden:
  // rows x hc_mult·hidden floats, rejected drafts already cut off); `context` holds every known
  // token (prompt and accepted outputs).
  virtual Status observe(model::SequenceCache& /*cache*/, std::span<const int32_t> /*context*/,
                         int64_t /*first*/, std::span<const float> /*hidden*/,
                         DraftState& /*state*/) {
    return {};
  }
  // Drafters that read hidden streams: how many of a step span's last rows they need (-1: all;
  // the engine asks the model for no more, model::SequenceSpan::hidden_tail). MTP: its window,
  // beyond which earlier positions no longer change its state.
  virtual int64_t hidden_tail() const { return -1; }
  // Asleep (varlen paused drafting for good), the rows of positions [first, first + rows) are
  // only kept, as many as hidden_tail() says, to be run when the drafter wakes: it then drafts
  // from a whole window at once instead of refilling it over the next steps.
  virtual void hold(int64_t /*first*/, std::span<const float> /*hidden*/, DraftState& /*state*/) {}
  // Runs the held rows whose next tokens `context` knows, without drafting: a state about to be
  // saved (a prefix snapshot made while asleep) then carries the drafter's whole window, and a
  // sequence restored from it drafts at once as well as one that never slept.
  virtual void catch_up(model::SequenceCache& /*cache*/, std::span<const int32_t> /*context*/,
                        DraftState& /*state*/) {}
  // Proposes at most `k` tokens to follow `context` into state.proposal. `cache` holds the model
  // state of every context position but the last one (which the next step feeds); a drafter may
  // read it and must leave the main layers' state as it found it.
  virtual Status propose(model::SequenceCache& cache, std::span<const int32_t> context, int k,
                         DraftState& state) = 0;

  // Every sequence a step sampled at once: each job's new hidden rows (drafters that read them;
  // positions [first, first + rows)) and its proposal. Drafters whose work batches across
  // sequences (MTP: one block step for all of them per draft position) override it; the
  // default observes and proposes one sequence at a time. A job's failure only clears its
  // proposal.
  struct Job {
    model::SequenceCache* cache = nullptr;
    std::span<const int32_t> context;
    DraftState* state = nullptr;
    int64_t first = 0;
    std::span<const float> hidden;
    // Residual acceptance: the specs (temperature, filters, uniform) to draw draft j with; empty:
    // the drafter's own choice (argmax).
    std::span<const sample::SampleSpec> draws;
  };
  virtual void propose_all(std::span<const Job> jobs, int k) {
    for (const Job& j : jobs) {
      Status st;
      if (wants_hidden() && !j.hidden.empty()) {
        st = observe(*j.cache, j.context, j.first, j.hidden, *j.state);
      }
      if (st.ok()) st = propose(*j.cache, j.context, k, *j.state);
      if (!st.ok()) j.state->proposal.clear();
    }
  }

  // Times this drafter's window restarted empty (EngineStats::spec_draft_window_restarts);
  // read from another thread than the one drafting.
  int64_t window_restarts() const { return window_restarts_.load(std::memory_order_relaxed); }

 protected:
  bool want_confidence_ = false;
  std::atomic<int64_t> window_restarts_{0};
};

// Prompt lookup (vLLM's "ngram" method): the longest suffix of the context, of min_n..max_n
// tokens, that occurred earlier in it proposes the tokens that followed its latest earlier
// occurrence.
std::unique_ptr<Drafter> make_ngram_drafter(int min_n = 1, int max_n = 4);
// The checkpoint's DSpark block drafter (DeepSeek-V4.1): FailedPrecondition without one.
Expected<std::unique_ptr<Drafter>> make_dspark_drafter(model::Model& model);
// The checkpoint's MTP block (DeepSeek-V4), chained on its own output for k > 1:
// FailedPrecondition without one.
Expected<std::unique_ptr<Drafter>> make_mtp_drafter(model::Model& model);

}  // namespace deepinfer::runtime::spec
