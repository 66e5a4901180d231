// The rank tests' shared failure check (model_ep_test, model_tp_test, model_cp_test): three
// in-process ranks run a body whose rank 1 fails mid-step; the other two must get an error that
// names the parallelism (not wait for the group's timeout), and every rank's run must fail.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "parallel/communicator.h"

namespace deepinfer::model::testing {

// body(comm, fail_step): load this rank's model and run its steps, failing at step fail_step
// (-1: never); rank 1 gets 2, the others -1. `needle` must be in ranks 0 and 2's errors.
using FailingRankBody = std::function<Status(parallel::Communicator& comm, int fail_step)>;
void expect_rank_failure_propagates(const FailingRankBody& body, const std::string& needle);

}  // namespace deepinfer::model::testing
