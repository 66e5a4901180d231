// Step checks (see step_check.h).
#include "model/step_check.h"

#include <string>

namespace deepinfer::model {

Status check_step(const StepInputs& in, int64_t vocab, bool draft) {
  const int64_t M = static_cast<int64_t>(in.token_ids.size());
  if (static_cast<int64_t>(in.positions.size()) != M) {
    return invalid_argument("step has " + std::to_string(M) + " token ids but " +
                            std::to_string(in.positions.size()) + " positions");
  }
  for (int64_t i = 0; i < M; ++i) {
    if (in.token_ids[i] < 0 || in.token_ids[i] >= vocab) {
      return out_of_range("token id " + std::to_string(in.token_ids[i]) + " at step row " +
                          std::to_string(i) + " is outside the vocabulary [0, " +
                          std::to_string(vocab) + ")");
    }
  }
  int64_t next = 0;
  for (size_t k = 0; k < in.sequences.size(); ++k) {
    const SequenceSpan& sq = in.sequences[k];
    if (sq.cache == nullptr || sq.begin != next || sq.count < 0 || sq.begin + sq.count > M) {
      return invalid_argument("step sequences must be non-null and cover the rows contiguously");
    }
    for (size_t j = 0; j < k; ++j) {
      if (in.sequences[j].cache == sq.cache) {
        return invalid_argument("step lists the same sequence cache twice (spans " +
                                std::to_string(j) + " and " + std::to_string(k) + ")");
      }
    }
    const int64_t L = draft ? sq.cache->draft_length() : sq.cache->length();
    for (int64_t i = 0; i < sq.count; ++i) {
      if (in.positions[sq.begin + i] != L + i) {
        return invalid_argument("position " + std::to_string(in.positions[sq.begin + i]) +
                                " at step row " + std::to_string(sq.begin + i) +
                                " does not continue its sequence (length " + std::to_string(L) +
                                ")");
      }
    }
    next = sq.begin + sq.count;
    if (sq.hidden_tail < -1) {
      return invalid_argument("hidden_tail " + std::to_string(sq.hidden_tail) +
                              " of step span " + std::to_string(k) +
                              ": give the rows to keep (>= 0), or -1 for all of them");
    }
    DI_TRY(check_upper_skip(sq, in.keep_hidden, draft));
  }
  if (next != M) return invalid_argument("step sequences do not cover every row");
  return {};
}

Status check_upper_skip(const SequenceSpan& sq, bool keep_hidden, bool draft) {
  if (sq.upper_skip == 0) return {};
  if (sq.upper_skip < 0 || sq.upper_skip > sq.count) {
    return invalid_argument("upper_skip " + std::to_string(sq.upper_skip) +
                            " is outside [0, the span's " + std::to_string(sq.count) + " rows]");
  }
  // Skipped rows have no final streams: nothing can be read from them.
  if (draft || keep_hidden || sq.logits == LogitsWanted::kAll ||
      (sq.logits == LogitsWanted::kLast && sq.upper_skip == sq.count)) {
    return invalid_argument(
        "bounded replay (upper_skip " + std::to_string(sq.upper_skip) +
        ") skips rows whose logits or hidden streams the step asks for: requests that need "
        "every prompt row (prompt logprobs, scoring, hidden-reading drafters) run the full "
        "prefill");
  }
  return {};
}

bool has_upper_skip(const StepInputs& in) {
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.upper_skip > 0) return true;
  }
  return false;
}

Status plan_logit_rows(const StepInputs& in, StepOutputs& out) {
  out.logit_row_of.clear();
  for (const SequenceSpan& sq : in.sequences) {
    if (sq.count == 0 || sq.logits == LogitsWanted::kNone) continue;
    const int64_t first = sq.logits == LogitsWanted::kAll ? sq.begin : sq.begin + sq.count - 1;
    for (int64_t r = first; r < sq.begin + sq.count; ++r) out.logit_row_of.push_back(r);
  }
  out.logit_rows = static_cast<int64_t>(out.logit_row_of.size());
  if (!in.sample_specs.empty() &&
      static_cast<int64_t>(in.sample_specs.size()) != out.logit_rows) {
    return invalid_argument("step asks for " + std::to_string(in.sample_specs.size()) +
                            " draws but has " + std::to_string(out.logit_rows) +
                            " logits rows: give one SampleSpec per row that wants logits");
  }
  return {};
}

}  // namespace deepinfer::model
