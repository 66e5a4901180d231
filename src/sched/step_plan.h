// StepPlan and StepResult: what the scheduler hands the model runner, and what comes back.
//
// Plain data only (vLLM v1 SchedulerOutput, TensorRT-LLM's scheduled-request lists): the
// runner copies it to the device and never calls back into the scheduler while a step runs.
// Requests appear decodes first, then prefill chunks; their tokens are concatenated in that
// order in token_ids/positions, request i owning [token_offset, token_offset + num_tokens).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/types.h"
#include "sched/request.h"

namespace deepinfer::sched {

// Stands in StepPlan::token_ids for a token sampled by a step that has not finished yet.
inline constexpr int32_t kPlaceholderToken = -1;
// Stands in StepPlan::token_ids for a draft slot: the runner's drafter fills it (speculative
// decoding), or leaves it unused.
inline constexpr int32_t kDraftSlot = -2;

struct ScheduledRequest {
  RequestId id = 0;
  int64_t start_pos = 0;      // position of the first token fed = tokens already in the KV
  int32_t num_tokens = 0;     // fed this step (draft slots included)
  int32_t token_offset = 0;   // into StepPlan::token_ids / positions
  bool is_decode = false;     // the last sampled token (+ its draft slots)
  // Speculative decoding (decodes only): the last num_drafts tokens of the span are draft slots
  // (kDraftSlot) the runner may fill with up to that many drafted tokens and verify in this
  // step; the result then brings 1..num_drafts + 1 accepted tokens. The scheduler plans
  // optimistically: positions (and start_pos of later plans made before this one's update)
  // assume every slot is accepted; update() rolls the KV back by the slots that were not, and
  // the runner, which knows its own cache length, feeds the true positions.
  int32_t num_drafts = 0;
  bool needs_logits = false;  // the step reaches the request's last known token: sample after it
  // Asynchronous scheduling: the last num_placeholders (0 or 1) tokens of this request's span
  // are kPlaceholderToken, the token the previous, still running, step samples for it. The
  // runner writes that id in before this step runs.
  int32_t num_placeholders = 0;
  // The sequence's KV was (re)started this step: the runner resets its live compressor-state
  // slot, or, after a prefix hit (start_pos == num_prefix_hit > 0), first copies the snapshot
  // block state_restore into it.
  bool first_chunk = false;
  int64_t num_prefix_hit = 0;
  kv::BlockId state_restore = kv::kNullBlock;
  kv::SeqTables tables;  // one BlockTable per cache group (CacheLayout order)
};

struct StepPlan {
  int64_t step = 0;
  std::vector<ScheduledRequest> requests;
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;
  int32_t num_decodes = 0;           // requests[0, num_decodes) are decodes
  std::vector<RequestId> preempted;  // lost their KV in this plan; will be recomputed
  std::vector<RequestId> ended;      // ended since the previous plan: drop per-request state
  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  bool empty() const { return requests.empty(); }
};

// One scheduled request's outcome. Requests whose step needed logits bring one sampled token,
// or, with draft slots, the accepted run of 1..num_drafts + 1 tokens (cut where the stop
// checker ended it); the others bring none. `finish` is the stop checker's decision for it.
struct RequestResult {
  RequestId id = 0;
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
};

struct StepResult {
  std::vector<RequestResult> requests;
};

}  // namespace deepinfer::sched
