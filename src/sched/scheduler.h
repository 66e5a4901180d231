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
// Synchronous protocol: schedule(), run the plan, update(plan, result), repeat. abort() may be
// called at any point; for a request inside the plan being run it takes effect in update(), so
// the KV blocks it was writing are never handed to anyone before that step is over.
#pragma once

#include <cstdint>
#include <deque>
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
  int64_t failed = 0;
};

class Scheduler {
 public:
  static Expected<Scheduler> create(const io::ModelConfig& model, const kv::KvConfig& kv_config,
                                    const SchedulerConfig& config);

  // Queues a request. Errors only for a duplicate id. A request that can never run (empty
  // prompt, longer than max_model_len, more KV than the pool) is accepted and ends at once as
  // kFailed with a message saying why; take_finished() reports it.
  Status submit(RequestId id, std::vector<int32_t> prompt);
  StepPlan schedule();
  // Errors (nothing applied) when the result does not match the plan: a missing token for a
  // request that needed logits, a token for one that did not, an unknown id.
  Status update(const StepPlan& plan, const StepResult& result);
  // Any live state; kNotFound for unknown or already ended ids.
  Status abort(RequestId id);
  // Requests ended since the last call, in the order they ended.
  std::vector<FinishedRequest> take_finished();

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
  };
  int64_t chunk_for(const Request& r, int64_t budget) const;
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
  int64_t awaiting_step_ = -1;  // step of the plan not yet updated, -1 when none
  SchedulerStats stats_;
};

}  // namespace deepinfer::sched
