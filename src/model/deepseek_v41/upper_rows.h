// Decoder-side bounded replay in a V4.1 step (spec §6.3; docs/bounded_replay.md): the step's
// rows the layers above the last KV source run on when some span skips its first rows there
// (SequenceSpan::upper_skip), as a step of their own. The lower layers run the whole step; at
// the first upper layer the model gathers the kept rows' streams, carried mHC pre, DSpark
// features and the latest selection and candidate blocks (keep_selection_rows), and every
// later part of the step (upper layers, drafter context, head) runs on those rows only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v41/attention.h"
#include "model/step.h"

namespace deepinfer::model::deepseek_v41 {

struct UpperRows {
  bool active = false;            // some span skips rows: the upper layers run `in` below
  std::vector<int32_t> rows;      // step rows kept, ascending
  std::vector<int32_t> kept_of;   // step row -> its row in `in`, or -1 when skipped
  std::vector<int32_t> ids, pos;  // the kept rows' tokens and positions
  std::vector<SequenceSpan> spans;
  StepInputs in;                  // the kept rows as a step (the same caches, counts cut)
  int64_t skipped = 0;            // rows skipped over all spans
};

// Fills u from `in`; u.active is false (and nothing else is filled) when no span skips.
void plan_upper_rows(const StepInputs& in, UpperRows& u);

// The latest selection (s.sel, s.sel_k columns) and candidate blocks (s.cand, n_blocks
// columns; 0 = none made this step) of the step's M rows, cut to the kept rows in place: the
// upper Reuse layers attend to the picks of the last lower index source, and the upper Reindex
// layers score inside its candidate blocks.
void keep_selection_rows(backend::Ops& ops, std::span<const int32_t> rows, int64_t M,
                         int64_t n_blocks, AttentionScratch& s, Csa2Scratch& cs);

}  // namespace deepinfer::model::deepseek_v41
