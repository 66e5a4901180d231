// decode_bench --long-context N: decode steps at batch B with every sequence holding N tokens,
// so the parts of a step that grow with context (the compressed rows attention reads, the
// indexer's scores over every compressed key, its top-k) count as in long-context serving.
//
// Each sequence is prefilled on its own in chunks of at most 4,096 rows (one batched prefill of
// B x N rows would need activations for all of them at once). The floor of a step is the
// weight floor of the short-context table plus the cache bytes of the B sequences at the copy
// bandwidth, the cache bytes being the pages each sequence holds (PagePool bytes_in_use): an
// upper bound on what one step reads, so that floor may be above the true one.
#pragma once

#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ceilings.h"
#include "full_model.h"
#include "model/model.h"

namespace deepinfer::bench {

// Median wall time (ms) of `steps` decode steps, one token per sequence with its logits copied
// to the host, after four warm-up steps (a CUDA graph bucket records on first use).
Expected<double> median_decode_ms(model::Model& model, std::vector<model::SequenceCache>& seqs,
                                  int steps, std::mt19937& rng);

struct LongContextOptions {
  int64_t tokens = 0;        // N: prompt tokens of every sequence
  std::vector<int> batches;  // B values
  int steps = 8;             // timed decode steps per batch
};

struct LongContextInputs {
  const WeightBytes& weights;
  const Ceilings& ceilings;
  int bench_layers = 0, full_layers = 0;
  // (batch, step ms) of the short-context table, for the "x short" ratio.
  std::span<const std::pair<int, double>> short_steps;
};

// Runs every batch, prints its table, appends its full-model rows to `full_rows`; returns the
// JSON object. A batch whose caches do not fit is reported and skipped, not fatal.
std::string run_long_context(model::Model& model, const LongContextOptions& o,
                             const LongContextInputs& in, std::mt19937& rng,
                             std::vector<std::string>& full_rows);

}  // namespace deepinfer::bench
