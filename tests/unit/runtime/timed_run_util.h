// Timed engine runs for the data-parallel and EPLB engine tests: requests submitted before
// given steps (staggered), aborts between steps, streamed tokens checked against the outputs and
// against the calling thread, and an optional hook between steps (a rebalance by command).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "engine_run_util.h"

namespace deepinfer::engine_test {

// A request and the step before which it is submitted (0: before the first step).
struct Timed {
  Req req;
  int at_step = 0;
};

// Nine requests: prompt lengths 1-40, max_tokens 1-9, greedy and seeded (logprobs), one with
// EOS allowed, one with n = 2, and a copy of request 0 (for a stop id); staggered: submitted
// over the first steps.
std::vector<Timed> mixed_requests(bool staggered);

// Called before every step, after that step's submissions.
using BetweenSteps = std::function<void(Engine& engine, int step)>;

// Runs `reqs` on a fresh engine, submitting each before its step, with aborts between steps
// (Req::abort_after) and streamed tokens checked against the outputs; every request must end
// exactly once, and the stream callbacks must run on this thread.
EngineRun run_timed(EngineOptions o, const std::vector<Timed>& reqs,
                    const BetweenSteps& between_steps = {});

// Chunked prefills mixed with decodes over `ranks` ranks, with or without expert parallelism.
EngineOptions options_for(const std::string& dir, int ranks, bool ep);

}  // namespace deepinfer::engine_test
