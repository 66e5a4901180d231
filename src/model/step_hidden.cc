// Kept hidden rows of a step (see step_hidden.h).
#include "model/step_hidden.h"

#include <algorithm>
#include <utility>

namespace deepinfer::model {

int64_t hidden_rows_kept(const SequenceSpan& sq) {
  return sq.hidden_tail < 0 ? sq.count : std::min(sq.hidden_tail, sq.count);
}

void download_hidden(backend::Ops& ops, backend::CMat X, std::span<const SequenceSpan> sequences,
                     backend::HostFloats& out) {
  // Runs of adjacent kept rows [first, end): a decode step's spans keep their one row each and
  // form one run; a prefill's span keeps its tail.
  std::vector<std::pair<int64_t, int64_t>> runs;
  int64_t rows = 0;
  for (const SequenceSpan& sq : sequences) {
    const int64_t kept = hidden_rows_kept(sq);
    if (kept == 0) continue;
    const int64_t first = sq.begin + sq.count - kept;
    if (!runs.empty() && runs.back().second == first) {
      runs.back().second += kept;
    } else {
      runs.emplace_back(first, first + kept);
    }
    rows += kept;
  }
  out.resize(static_cast<size_t>(rows * X.cols));
  float* to = out.data();
  for (const auto& [first, end] : runs) {
    backend::download_mat(ops, X.rows_slice(first, end - first), to);
    to += (end - first) * X.cols;
  }
}

}  // namespace deepinfer::model
