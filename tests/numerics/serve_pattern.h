// A scripted serving pattern over three sequences, shared by the CPU test of the recorded step
// form (model_recorded_test.cc) and its GPU twin (cuda/model_cuda_test.cc, CUDA graphs):
// prefills of 3, 20 and 37 tokens (growing buckets when steps are padded: 4, 24, 40 rows),
// decodes of three sequences together and of two, a step mixing a 9-token chunk with two
// decodes, a 100-token prefill (eager under a 64-row recording limit), and decodes again.
// Returns every step's logits in order; on a failed step, sets *error and stops.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace deepinfer::model::testing {

// prompt: at least 100 ids.
inline std::vector<float> serve_pattern(Model& m, std::span<const int32_t> prompt,
                                        std::string* error) {
  std::vector<float> all;
  SequenceCache a = m.new_sequence(), b = m.new_sequence(), c = m.new_sequence();
  auto take = [&](const Expected<StepOutputs>& out) {
    if (!out.ok()) {
      if (error->empty()) *error = out.status().to_string();
      return;
    }
    all.insert(all.end(), out->logits.begin(), out->logits.end());
  };
  auto step = [&](std::vector<SequenceCache*> seqs, std::vector<int64_t> counts) {
    std::vector<int32_t> ids, pos;
    std::vector<SequenceSpan> spans;
    for (size_t k = 0; k < seqs.size(); ++k) {
      const int64_t L = seqs[k]->length();
      spans.push_back({seqs[k], static_cast<int64_t>(ids.size()), counts[k], LogitsWanted::kAll});
      for (int64_t i = 0; i < counts[k]; ++i) {
        ids.push_back(prompt[static_cast<size_t>((L + i + 7 * static_cast<int64_t>(k)) % 60)]);
        pos.push_back(static_cast<int32_t>(L + i));
      }
    }
    StepOutputs out;
    const Status st = m.forward(StepInputs{ids, pos, spans, false}, out);
    if (!st.ok() && error->empty()) *error = st.to_string();
    all.insert(all.end(), out.logits.begin(), out.logits.end());
  };
  take(m.extend(c, prompt.subspan(11, 3), LogitsWanted::kAll));
  take(m.extend(b, prompt.subspan(5, 20), LogitsWanted::kAll));
  take(m.extend(a, prompt.first(37), LogitsWanted::kAll));
  for (int t = 0; t < 6; ++t) step({&a, &b, &c}, {1, 1, 1});
  for (int t = 0; t < 4; ++t) step({&b, &c}, {1, 1});
  step({&c, &a, &b}, {9, 1, 1});
  for (int t = 0; t < 3; ++t) step({&a, &b, &c}, {1, 1, 1});
  take(m.extend(a, prompt.first(100), LogitsWanted::kLast));
  for (int t = 0; t < 3; ++t) step({&a, &b, &c}, {1, 1, 1});
  return all;
}

}  // namespace deepinfer::model::testing
