// Checks of a step's inputs shared by the model families, run before anything of the step
// runs: a refused step leaves every cache as it was.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "model/step.h"

namespace deepinfer::model {

// Ids inside [0, vocab), one position per id, sequence spans that cover the rows contiguously,
// each cache at most once, positions continuing each sequence (its length(), or its
// draft_length() for a draft-layer step).
Status check_step(const StepInputs& in, int64_t vocab, bool draft);

// Part of check_step: a span's upper_skip (step.h) within its rows and never over a row the
// step reads out (logits, hidden streams) or in a draft-layer step.
Status check_upper_skip(const SequenceSpan& sq, bool keep_hidden, bool draft);
// Whether some span of the step skips rows in the upper layers.
bool has_upper_skip(const StepInputs& in);

// out.logit_row_of / logit_rows: the step rows whose logits the spans ask for, sequence by
// sequence; InvalidArgument when in.sample_specs is given but does not have one draw per row.
Status plan_logit_rows(const StepInputs& in, StepOutputs& out);

}  // namespace deepinfer::model
