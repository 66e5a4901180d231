// The hidden streams a step hands back (StepInputs::keep_hidden): which rows, and their copy
// out of the backend's memory, shared by the model families.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/buffer.h"
#include "backend/mat.h"
#include "backend/ops.h"
#include "model/step.h"

namespace deepinfer::model {

// The rows of `sq` whose hidden streams the step returns: its last hidden_tail (all with -1).
int64_t hidden_rows_kept(const SequenceSpan& sq);

// out = the kept rows of X (the step's final streams, [M, width]), sequence by sequence
// (step.h: StepOutputs::hidden). Adjacent kept rows are copied in one go: with every row kept,
// one copy, as before spans could keep fewer.
void download_hidden(backend::Ops& ops, backend::CMat X, std::span<const SequenceSpan> sequences,
                     backend::HostFloats& out);

}  // namespace deepinfer::model
