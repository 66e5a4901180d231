// Scheduler: FCFS continuous batching over the KV coordinator.
//
// Each schedule() call builds one StepPlan under two capacity limits (TensorRT-LLM splits them
// into a capacity scheduler and a micro-batch scheduler; here they are the two loops of
// schedule()):
//   * tokens: at most max_num_batched_tokens per step; running decodes first (one token each),
//     then running prefills, then waiting requests in arrival order, each prefill taking a chunk
//     of what is left of the budget (chunked prefill);
//   * sequences: at most max_num_seqs running;
//   * KV blocks: every grow is all-or-nothing; when one fails, the newest running request is
//     preempted (KV freed, outputs kept, back to the front of the queue, recomputed later with
//     whatever the prefix cache still has). A request that cannot fit even alone fails with an
//     error instead of waiting forever, so the loop never deadlocks.
// update() applies the step's sampled tokens and the stop checker's finish decisions.
//
// Protocol, synchronous: schedule(), run the plan, update(plan, result), repeat.
// Asynchronous (plan step N+1 while step N runs): schedule() may be called once more before
// update() of the previous plan, so at most two plans await their update, and updates come in
// plan order. A request whose step N samples a token is then planned optimistically: its one
// more token is fed in N+1 as kPlaceholderToken at ScheduledRequest::num_placeholders, and the
// runner writes the id sampled in N there before N+1 runs. Requests that step N ends are still
// in N+1 (one wasted step, as in vLLM); their N+1 results are dropped. Requests are not planned
// past their known end (max_model_len, Request::max_output), so a length finish wastes nothing.
// Requirement on the runner: steps execute in plan order on one executor (a worker thread, one
// CUDA stream). KV blocks freed while a step that writes them is in flight (preemption in
// schedule(N+1), an end in update(N)) are then only written again by later steps.
// abort() may be called at any point; for a request inside a plan being run it takes effect in
// the next update() of a plan holding it, and it is not planned again meanwhile.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"
#include "kv/coordinator.h"
#include "sched/request.h"
#include "sched/step_plan.h"

namespace deepinfer::sched {

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;  // per-step token budget
  int32_t max_num_seqs = 256;             // running sequences
  int64_t max_model_len = 0;              // 0: the model's max_position_embeddings
  int64_t max_prefill_chunk = 0;          // per request and step; 0: only the budget limits it
  // Speculative decoding: draft slots per decode step (0: none). A request's own cap
  // (set_max_drafts) and the budget policy (set_draft_budget) may lower it per step.
  int32_t num_speculative_tokens = 0;
};

struct FinishedRequest {
  RequestId id = 0;
  RequestState state = RequestState::kFinished;  // kFinished, kAborted or kFailed
  FinishReason reason = FinishReason::kNone;
  std::vector<int32_t> output;
  Status error;  // kFailed: why
  int64_t num_prompt = 0;
  int32_t num_preemptions = 0;
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t prefill_tokens = 0;  // scheduled, including recomputation after preemption
  int64_t decode_tokens = 0;
  int64_t draft_slots = 0;     // draft slots planned (speculative decoding)
  int64_t rolled_back = 0;     // of those, not accepted (KV rolled back)
  int64_t failed = 0;
};

// Speculative decoding: a decode request that may carry draft slots this step, with the most
// it may carry (SchedulerConfig::num_speculative_tokens, its own cap, its remaining length).
struct DraftCandidate {
  RequestId id = 0;
  int32_t max_slots = 0;
};
// Decides the draft slots of one step's decodes (sched/verify_budget.h: confidence-scheduled
// verification). Gets the candidates in plan order and the step's token budget left after one
// token per decode; writes slots[i] in [0, candidates[i].max_slots].
using DraftBudget = std::function<void(std::span<const DraftCandidate> candidates,
                                       int64_t spare_budget, std::span<int32_t> slots)>;

class Scheduler {
 public:
  static Expected<Scheduler> create(const io::ModelConfig& model, const kv::KvConfig& kv_config,
                                    const SchedulerConfig& config);

  // Queues a request. Errors only for a duplicate id. A request that can never run (empty
  // prompt, longer than max_model_len, more KV than the pool) is accepted and ends at once as
  // kFailed with a message saying why; take_finished() reports it. `max_output` (0: none) is
  // the caller's output limit; the caller still decides kLength, the scheduler only uses it
  // not to plan a step past it while an earlier step is in flight.
  Status submit(RequestId id, std::vector<int32_t> prompt, int64_t max_output = 0);
  // At most one earlier plan may still await its update (asynchronous scheduling).
  StepPlan schedule();
  // Speculative decoding: the policy deciding each step's draft slots (default: every
  // candidate its maximum, while the budget lasts), and a request's own cap (default: no cap
  // beyond num_speculative_tokens; 0 = no drafts, e.g. while its drafter has nothing to offer).
  void set_draft_budget(DraftBudget budget) { draft_budget_ = std::move(budget); }
  void set_max_drafts(RequestId id, int32_t max_drafts);
  // Plans are updated in the order they were made. Errors (nothing applied) when the result
  // does not match the plan: a missing token for a live request that needed logits, a token
  // for one that did not, an id not in the plan. Results of requests that ended meanwhile
  // (aborted, stopped by an earlier step) are dropped.
  Status update(const StepPlan& plan, const StepResult& result);
  size_t num_awaiting_update() const { return awaiting_.size(); }
  // Any live state; kNotFound for unknown or already ended ids.
  Status abort(RequestId id);
  // Requests ended since the last call, in the order they ended.
  std::vector<FinishedRequest> take_finished();
  // Empties the KV prefix cache (KvCoordinator::reset_prefix_cache). FailedPrecondition while
  // a request is live or a plan awaits its update.
  Status reset_prefix_cache();

  bool has_unfinished() const { return !requests_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  const Request* find(RequestId id) const;
  const kv::KvCoordinator& kv() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }
  const SchedulerStats& stats() const { return stats_; }

 private:
  Scheduler(kv::KvCoordinator kv, const SchedulerConfig& config);

  struct Pick {
    RequestId id;
    int64_t num_tokens;
    bool first_chunk;
    int32_t num_drafts = 0;
  };
  // Draft slots of each decode about to be planned (`decodes` in plan order).
  std::vector<int32_t> draft_slots(std::span<const RequestId> decodes, int64_t budget) const;
  int64_t chunk_for(const Request& r, int64_t budget) const;
  // schedule()'s parts. Running requests are planned decodes first (one token each,
  // latency-critical), then prefill chunks; not planned are aborts waiting for their update and
  // requests whose in-flight step brings their last token (the model length or the caller's
  // output limit), which would be a wasted step.
  bool plannable(const Request& r) const;
  // The running requests to plan in that order; `num_decodes` = how many decodes lead it.
  std::vector<RequestId> running_order(size_t& num_decodes) const;
  // Grows every planned running request's KV (with its draft slots), preempting the newest
  // when the pool is full; true when it preempted.
  bool schedule_running(std::vector<Pick>& picks, int64_t& budget, StepPlan& plan);
  // Admits waiting requests in FCFS order while the budget, max_num_seqs and the pool allow.
  void admit_waiting(std::vector<Pick>& picks, int64_t& budget);
  // Frees the newest running request's KV and queues it first; refunds its scheduled tokens.
  void preempt_newest(std::vector<Pick>& picks, int64_t& budget, StepPlan& plan);
  void end(Request& r, RequestState state, FinishReason reason, Status error = {});
  void remove_running(RequestId id);
  void build(StepPlan& plan, const std::vector<Pick>& picks);

  kv::KvCoordinator kv_;
  SchedulerConfig config_;
  std::unordered_map<RequestId, Request> requests_;  // live requests only
  std::deque<RequestId> waiting_;
  std::vector<RequestId> running_;  // admission order; back() is the newest
  std::vector<FinishedRequest> finished_;
  std::vector<RequestId> ended_since_plan_;
  int64_t next_arrival_ = 0;
  int64_t next_step_ = 0;
  std::deque<int64_t> awaiting_;  // steps of the plans not yet updated, oldest first
  SchedulerStats stats_;
  DraftBudget draft_budget_;
};

// Asynchronous scheduling: writes the token `prev` sampled for each request into `next`'s
// placeholder for it (`next` was planned while `prev` ran). Returns the requests of `next`
// whose placeholder got no token (their step in `prev` failed or was dropped): the runner must
// not run them; they are ending (aborted or failed), and update() drops their results.
std::vector<RequestId> fill_placeholders(StepPlan& next, const StepResult& prev);

}  // namespace deepinfer::sched
