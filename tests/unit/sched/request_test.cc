// The request state machine: exactly the transitions of request.h's diagram are allowed.
#include "sched/request.h"

#include <gtest/gtest.h>

namespace deepinfer::sched {
namespace {

TEST(RequestState, AllowedTransitionsMatchTheDiagram) {
  using S = RequestState;
  const S all[] = {S::kWaiting, S::kRunning, S::kPreempted, S::kFinished, S::kAborted, S::kFailed};
  int allowed = 0;
  for (const S from : all) {
    for (const S to : all) allowed += can_transition(from, to) ? 1 : 0;
  }
  EXPECT_EQ(allowed, 11);
  EXPECT_TRUE(can_transition(S::kWaiting, S::kRunning));
  EXPECT_TRUE(can_transition(S::kRunning, S::kPreempted));
  EXPECT_TRUE(can_transition(S::kPreempted, S::kRunning));
  EXPECT_TRUE(can_transition(S::kRunning, S::kFinished));
  EXPECT_TRUE(can_transition(S::kWaiting, S::kAborted));
  EXPECT_TRUE(can_transition(S::kPreempted, S::kAborted));
  EXPECT_TRUE(can_transition(S::kPreempted, S::kFinished));  // async: its in-flight step ended it
  EXPECT_TRUE(can_transition(S::kWaiting, S::kFailed));
  EXPECT_FALSE(can_transition(S::kWaiting, S::kFinished));   // must run first
  EXPECT_FALSE(can_transition(S::kWaiting, S::kPreempted));  // holds no KV
  EXPECT_FALSE(can_transition(S::kFinished, S::kRunning));   // terminal
  EXPECT_FALSE(can_transition(S::kAborted, S::kWaiting));
  for (const S s : all)
    EXPECT_EQ(is_terminal(s), s == S::kFinished || s == S::kAborted || s == S::kFailed);
}

TEST(RequestState, NamesAreStable) {
  EXPECT_EQ(request_state_name(RequestState::kPreempted), "preempted");
  EXPECT_EQ(finish_reason_name(FinishReason::kModelLength), "model_length");
  EXPECT_EQ(finish_reason_name(FinishReason::kStop), "stop");
}

TEST(RequestState, OutputIsWhatFollowsThePrompt) {
  Request r;
  r.tokens = {1, 2, 3, 4, 5};
  r.num_prompt = 3;
  EXPECT_EQ(r.num_output(), 2);
  r.transition(RequestState::kRunning);
  EXPECT_EQ(r.state, RequestState::kRunning);
}

}  // namespace
}  // namespace deepinfer::sched
