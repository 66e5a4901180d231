// Compressor of CSA / HCA layers and of the CSA indexer (spec §2.4, cache rules §3).
//
// Split in two so that a step batches its projections over all sequences:
//   compressor_project  kv = wkv·u, gate = wgate·u + ape[pos mod m] for all M rows (FP32);
//   compressor_advance  per sequence: folds the step's rows into the running state, emits every
//                       compressed row whose window closes inside the step (pool, norm, RoPE at
//                       w·m, fake-quant), and appends it to the row list.
// A row is emitted by the token that closes its window, whatever the step shape (prefill,
// chunk, decode), so chunked prefill and decode give the same rows as a single prefill.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "model/deepseek_v4/cache.h"
#include "model/deepseek_v4/numerics.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::model::deepseek_v4 {

enum class CompressedRowKind : uint8_t {
  kAttention,  // official: FP8 fake-quant of the non-rope channels
  kIndexKey,   // official: Hadamard + FP4 fake-quant of all channels
};

struct CompressorScratch {
  explicit CompressorScratch(backend::Ops& ops) : rows(ops), ape_rows(ops) {}
  std::vector<backend::PoolSlot> slots;
  backend::Buffer rows, ape_rows;
  std::vector<int32_t> positions, ape_index;
};

void compressor_project(backend::Ops& ops, const CompressorWeights& w, backend::CMat u,
                        const int32_t* positions, backend::Mat kv, backend::Mat gate,
                        CompressorScratch& scratch);

// kv / gate: this sequence's rows of the step (count rows, first at absolute position `start`
// == the state's size). Returns the number of rows emitted.
int64_t compressor_advance(backend::Ops& ops, const Numerics& num, const CompressorWeights& w,
                           CompressedRowKind kind, std::span<const float> freqs, backend::CMat kv,
                           backend::CMat gate, int64_t start, CompressorState& state,
                           CompressorScratch& scratch);

}  // namespace deepinfer::model::deepseek_v4
