#include "rank_schedule.h"

namespace deepinfer::model::testing {

Status run_scheduled_step(Model& m, std::vector<SequenceCache>& caches, const Step& step,
                          bool keep_hidden, StepOutputs& out) {
  std::vector<int32_t> ids, pos;
  std::vector<SequenceSpan> spans;
  for (const Chunk& c : step) {
    SequenceCache& cache = caches[static_cast<size_t>(c.seq)];
    spans.push_back({&cache, static_cast<int64_t>(ids.size()),
                     static_cast<int64_t>(c.tokens.size()), LogitsWanted::kAll});
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      ids.push_back(c.tokens[i]);
      pos.push_back(static_cast<int32_t>(cache.length() + static_cast<int64_t>(i)));
    }
  }
  return m.forward(StepInputs{ids, pos, spans, keep_hidden}, out);
}

}  // namespace deepinfer::model::testing
