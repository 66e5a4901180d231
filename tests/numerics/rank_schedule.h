// The rank tests' step schedules (model_ep_test, model_tp_test, model_cp_test): each step is one
// chunk of tokens per sequence; run_scheduled_step turns a step into one Model::forward over the
// sequences' caches, every row's logits wanted. What a test collects and when it fails stay in
// the test.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "model/model.h"

namespace deepinfer::model::testing {

// One sequence's rows in a step: tokens continuing the cache of sequence `seq`.
struct Chunk {
  int seq = 0;
  std::vector<int32_t> tokens;
};
using Step = std::vector<Chunk>;  // may be empty (an expert-parallel rank then only serves)
using Schedule = std::vector<Step>;

// Forwards `step` (positions continue each cache) with keep_hidden as given, into `out`.
Status run_scheduled_step(Model& m, std::vector<SequenceCache>& caches, const Step& step,
                          bool keep_hidden, StepOutputs& out);

}  // namespace deepinfer::model::testing
