// Request state names and the allowed transitions (see request.h's diagram).
#include "sched/request.h"

#include "base/check.h"

namespace deepinfer::sched {

std::string_view request_state_name(RequestState state) {
  switch (state) {
    case RequestState::kWaiting:
      return "waiting";
    case RequestState::kRunning:
      return "running";
    case RequestState::kPreempted:
      return "preempted";
    case RequestState::kFinished:
      return "finished";
    case RequestState::kAborted:
      return "aborted";
    case RequestState::kFailed:
      return "failed";
  }
  return "?";
}

bool is_terminal(RequestState state) {
  return state == RequestState::kFinished || state == RequestState::kAborted ||
         state == RequestState::kFailed;
}

bool can_transition(RequestState from, RequestState to) {
  using S = RequestState;
  switch (from) {
    case S::kWaiting:
      return to == S::kRunning || to == S::kAborted || to == S::kFailed;
    case S::kPreempted:
      // kFinished: with asynchronous scheduling a request can be preempted while its last
      // step is still in flight; that step's token may end it.
      return to == S::kRunning || to == S::kAborted || to == S::kFailed || to == S::kFinished;
    case S::kRunning:
      return to == S::kFinished || to == S::kAborted || to == S::kPreempted || to == S::kFailed;
    case S::kFinished:
    case S::kAborted:
    case S::kFailed:
      return false;
  }
  return false;
}


void Request::transition(RequestState to) {
  DI_CHECK(can_transition(state, to));
  state = to;
}

}  // namespace deepinfer::sched
