// The kept rows of a bounded-replay step (see upper_rows.h).
#include "model/deepseek_v41/upper_rows.h"

#include <utility>
#include <vector>

namespace deepinfer::model::deepseek_v41 {

void plan_upper_rows(const StepInputs& in, UpperRows& u) {
  u.active = false;
  for (const SequenceSpan& sq : in.sequences) u.active = u.active || sq.upper_skip > 0;
  if (!u.active) return;
  const auto M = static_cast<int64_t>(in.token_ids.size());
  u.rows.clear();
  u.ids.clear();
  u.pos.clear();
  u.spans.clear();
  u.kept_of.assign(static_cast<size_t>(M), -1);
  u.skipped = 0;
  for (const SequenceSpan& sq : in.sequences) {
    SequenceSpan k = sq;
    k.begin = static_cast<int64_t>(u.rows.size());
    k.count = sq.count - sq.upper_skip;
    k.upper_skip = 0;
    for (int64_t r = sq.begin + sq.upper_skip; r < sq.begin + sq.count; ++r) {
      u.kept_of[static_cast<size_t>(r)] = static_cast<int32_t>(u.rows.size());
      u.rows.push_back(static_cast<int32_t>(r));
      u.ids.push_back(in.token_ids[static_cast<size_t>(r)]);
      u.pos.push_back(in.positions[static_cast<size_t>(r)]);
    }
    u.skipped += sq.upper_skip;
    u.spans.push_back(k);
  }
  u.in = in;
  u.in.token_ids = u.ids;
  u.in.positions = u.pos;
  u.in.sequences = u.spans;
  u.in.sample_specs = {};  // draws belong to the head, which maps its rows itself
}

namespace {

// rows [K] of the int32 matrix in b ([M, cols]) to its first K rows, through tmp (one scatter:
// sources and destinations must not overlap). A bit copy: the entries are indices, not floats.
void keep_int_rows(backend::Ops& ops, std::span<const int32_t> rows, int64_t M, int64_t cols,
                   backend::Buffer& b, backend::Buffer& tmp) {
  if (cols == 0 || rows.empty()) return;
  const size_t row_bytes = static_cast<size_t>(cols) * sizeof(int32_t);
  // Candidate blocks are made only once their source has keys; until then no layer reads them.
  if (b.bytes() < static_cast<size_t>(M) * row_bytes) return;
  auto* dst = static_cast<float*>(tmp.fit_bytes(rows.size() * row_bytes));
  const auto* src = static_cast<const float*>(b.data());
  std::vector<const float*> from;
  std::vector<float*> to;
  for (size_t i = 0; i < rows.size(); ++i) {
    from.push_back(src + static_cast<int64_t>(rows[i]) * cols);
    to.push_back(dst + static_cast<int64_t>(i) * cols);
  }
  ops.scatter_rows(from, to, cols);
  std::swap(b, tmp);
}

}  // namespace

void keep_selection_rows(backend::Ops& ops, std::span<const int32_t> rows, int64_t M,
                         int64_t n_blocks, AttentionScratch& s, Csa2Scratch& cs) {
  if (s.sel_k == 0) return;  // no source has keys yet: no selection, no candidates
  keep_int_rows(ops, rows, M, s.sel_k, s.sel, cs.kept);
  keep_int_rows(ops, rows, M, n_blocks, s.cand, cs.kept);
}

}  // namespace deepinfer::model::deepseek_v41
