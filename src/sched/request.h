// Request: one sequence's scheduling state, and the state machine it moves through.
//
//   waiting ──admit──▶ running ──finish──▶ finished
//      ▲                  │ └──────abort───▶ aborted      (abort is allowed in every live state)
//      └──── preempted ◀──┘ (blocks ran out: KV freed, recomputed later; outputs kept)
//   waiting/preempted ──cannot ever fit──▶ failed (with a Status saying why)
//   preempted ──finish──▶ finished  (asynchronous scheduling only: the step that was in flight
//                                    when it was preempted brought its last token)
//
// A request's tokens are prompt then outputs in one vector, because after a preemption the
// outputs are recomputed exactly like prompt tokens (they become part of what is prefilled).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/finish_reason.h"
#include "base/status.h"

namespace deepinfer::sched {

using RequestId = int64_t;

enum class RequestState : uint8_t { kWaiting, kRunning, kPreempted, kFinished, kAborted, kFailed };
std::string_view request_state_name(RequestState state);
bool is_terminal(RequestState state);
bool can_transition(RequestState from, RequestState to);

// Why a request ended (base/finish_reason.h). kStop and kLength come from the caller (the stop
// checker decides); kModelLength, kAborted and kError from the scheduler.
using deepinfer::FinishReason;
using deepinfer::finish_reason_name;

struct Request {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // prompt, then accepted outputs
  int64_t num_prompt = 0;
  int64_t num_computed = 0;  // tokens whose KV exists or is being written by a planned step
  int64_t arrival = 0;       // submit order, for FCFS
  RequestState state = RequestState::kWaiting;
  FinishReason finish = FinishReason::kNone;
  Status error;  // set when state == kFailed
  int32_t num_preemptions = 0;
  int64_t num_prefix_hit = 0;  // tokens reused at the latest (re)start
  int64_t max_output = 0;      // the caller's output limit (0: none); see Scheduler::submit
  int32_t in_flight = 0;       // plans awaiting update() that schedule this request (<= 2)
  // Tokens a planned step will sample but whose ids are not known yet (asynchronous
  // scheduling): they follow `tokens`, and a later plan may already feed them as placeholders.
  // A step with draft slots counts 1 + slots here (optimistic: all accepted) until its update.
  int32_t num_placeholders = 0;
  bool abort_requested = false;  // abort() arrived while in flight; applied in update()
  int32_t max_drafts = -1;       // speculative decoding: draft slots cap (-1: the config's)

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output() const { return num_tokens() - num_prompt; }
  // Known tokens plus placeholders: the length the next plan continues from.
  int64_t num_planned() const { return num_tokens() + num_placeholders; }
  // Moves to `to`; a transition the diagram does not allow is a scheduler bug (DI_CHECK).
  void transition(RequestState to);
};

}  // namespace deepinfer::sched
