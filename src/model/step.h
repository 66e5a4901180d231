// StepInputs: everything one forward step needs, passed explicitly (no global forward context).
//
// A step is M new tokens from one or more sequences. Rows of a sequence are contiguous
// ([begin, begin + count)), continue that sequence's cache (positions[begin + i] ==
// cache.length() + i) and may be any number of tokens: a whole prompt, a chunk of it, one decode
// token, or a block to verify. Dense parts of every layer (projections, mHC, MoE) run over all
// M rows at once; only the parts that read a cache run per sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/host_memory.h"
#include "model/cache.h"
#include "sample/sample_spec.h"

namespace deepinfer::model {

enum class LogitsWanted : uint8_t { kNone, kLast, kAll };

struct SequenceSpan {
  SequenceCache* cache = nullptr;
  int64_t begin = 0;  // first row of the step
  int64_t count = 0;
  LogitsWanted logits = LogitsWanted::kLast;
  // Decoder-side bounded replay (DeepSeek-V4.1 only, docs/bounded_replay.md): the layers above
  // the last KV-source layer, and the drafter's context, skip the span's first upper_skip rows
  // (positions before the prompt's kept suffix); the layers up to that source run every row.
  // The skipped rows are never computed there, so no logits or hidden rows can be asked of them.
  int64_t upper_skip = 0;
  // With StepInputs::keep_hidden: the hidden streams of only the span's last hidden_tail rows
  // (-1: all of them). A drafter whose state reaches back a window of positions (MTP) needs no
  // more: a long prompt's earlier rows would only be copied out and fed to it for nothing.
  int64_t hidden_tail = -1;
};

struct StepInputs {
  std::span<const int32_t> token_ids;  // [M]
  std::span<const int32_t> positions;  // [M], absolute
  std::span<const SequenceSpan> sequences;
  bool keep_hidden = false;  // return the final residual streams of the rows kept (MTP input)
  // Non-empty: one draw per logits row (in StepOutputs::logit_row_of order), run by the backend
  // next to its logits (Ops::sample: a GPU returns token ids, not vocabulary-sized rows), into
  // StepOutputs::sampled; logits are then not returned.
  std::span<const sample::SampleSpec> sample_specs = {};
};

struct StepOutputs {
  // Logits of the rows asked for, sequence by sequence in step order, row-major [rows, vocab].
  // (Page-locked on a device backend, backend/host_memory.h: the copy out is several times
  // faster.)
  backend::HostFloats logits;
  int64_t logit_rows = 0;
  // With StepInputs::sample_specs: the token (or sample::kSampleNoToken / kSampleNonFinite) of
  // each logits row, instead of the logits.
  std::vector<int32_t> sampled;
  std::vector<int64_t> logit_row_of;  // step row of each logits row
  // With keep_hidden: final streams [rows, hc_mult · hidden] (after the last layer, before
  // hc_head) of each span's kept rows (SequenceSpan::hidden_tail; all M rows by default),
  // sequence by sequence in step order.
  backend::HostFloats hidden;
};

}  // namespace deepinfer::model
