// Compressor of CSA / HCA layers and of the CSA indexer (spec §2.4, cache rules §3).
//
// Split in two so that a step batches its projections over all sequences:
//   compressor_project  kv = wkv·u, gate = wgate·u + ape[pos mod m] for all M rows (FP32);
//   compressor_advance  for every sequence of the step at once: folds each sequence's rows into
//                       its running state, emits every compressed row whose window closes
//                       inside the step (pool, norm, RoPE at w·m, fake-quant: one op chain over
//                       the rows of all sequences), and appends them to the row lists (one
//                       scatter for all rows, one for all state rows).
// A row is emitted by the token that closes its window, whatever the step shape (prefill,
// chunk, decode), so chunked prefill and decode give the same rows as a single prefill.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "model/cache.h"
#include "model/layers/numerics.h"
#include "model/layers/weights.h"

namespace deepinfer::model {

enum class CompressedRowKind : uint8_t {
  kAttention,  // official: FP8 fake-quant of the non-rope channels
  kIndexKey,   // official: Hadamard + FP4 fake-quant of all channels
};

struct CompressorScratch {
  explicit CompressorScratch(backend::Ops& ops) : rows(ops) {}
  std::vector<backend::PoolSlot> slots;
  backend::Buffer rows;
  std::vector<int32_t> positions;
  std::vector<const float*> src, state_src;  // scatter lists: emitted rows, state rows
  std::vector<float*> dst, state_dst;
};

// One sequence's part of a compressor_advance: its rows [begin, begin + count) of the step's
// kv / gate, the first at absolute position `start` == the state's size.
struct CompressorJob {
  CompressorState* state = nullptr;
  int64_t begin = 0, count = 0, start = 0;
};

// ape_rows [M]: each row's position mod w.ratio (RowInputs::ape_rows); ape: scratch of M
// gathered ape rows.
void compressor_project(backend::Ops& ops, const CompressorWeights& w, backend::CMat u,
                        const int32_t* ape_rows, backend::Mat kv, backend::Mat gate,
                        backend::Buffer& ape);

// kv / gate: the step's rows (all sequences); jobs: the sequences, in any order, each state at
// most once. Returns the number of rows emitted in all.
int64_t compressor_advance(backend::Ops& ops, const Numerics& num, const CompressorWeights& w,
                           CompressedRowKind kind, std::span<const float> freqs, backend::CMat kv,
                           backend::CMat gate, std::span<const CompressorJob> jobs,
                           CompressorScratch& scratch);

}  // namespace deepinfer::model
