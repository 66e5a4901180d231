// Compressor of V4's CSA / HCA layers and CSA indexer, and of V4.1's KV sources (spec §2.4,
// §6.2, cache rules §3).
//
// Split so that a step batches its work over all sequences:
//   compressor_project  kv = wkv·u, gate = wgate·u (+ ape[pos mod m], V4) for all M rows (FP32);
//   compressor_pool     for every sequence of the step at once: folds each sequence's rows into
//                       its running state and pools every compressed row whose window closes
//                       inside the step (one op chain over the rows of all sequences: softmax
//                       pool, norm; at ratio 1 the row is the token's own kv row), the latents;
//   append_closed_rows  appends one row per closed window to each sequence's row list (one
//                       scatter for all of them);
//   compressor_advance  V4's whole chain: pool, RoPE at w·m, fake-quant, append.
// V4.1 turns each latent into two rows, the compressed KV and the index key
// (deepseek_v41/attention.cc). A row is emitted by the token that closes its window, whatever
// the step shape (prefill, chunk, decode), so chunked prefill and decode give the same rows as a
// single prefill.
#pragma once

#include <cstdint>
#include <functional>
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
  std::vector<int32_t> positions, row_ids;
  std::vector<const float*> src, state_src;  // scatter lists: emitted rows, state rows
  std::vector<float*> dst, state_dst;
};

// One sequence's part of a compressor_advance: its rows [begin, begin + count) of the step's
// kv / gate, the first at absolute position `start` == the state's size.
struct CompressorJob {
  CompressorState* state = nullptr;
  int64_t begin = 0, count = 0, start = 0;
  CompressorState* keys = nullptr;  // V4.1 Full layers: where the index keys of the rows go
};

// opts: the projections' LinearOpts (Numerics::gemm_on_act: u is the block input, rounded in
// official semantics). ape_rows [M]: each row's position mod w.ratio (RowInputs::ape_rows; null
// without ape); ape: scratch of M gathered ape rows. gate is not written without wgate (ratio 1).
void compressor_project(backend::Ops& ops, const CompressorWeights& w, backend::CMat u,
                        const backend::LinearOpts& opts, const int32_t* ape_rows, backend::Mat kv,
                        backend::Mat gate, backend::Buffer& ape);

// The latents of every row that closes in the step (jobs in order, rows in order): [n, d_c] in
// scratch.rows, normalised (and BF16-rounded in official semantics), the position of each row's
// first token in scratch.positions. The states take the step's rows afterwards. kv / gate: the
// step's rows (all sequences).
backend::Mat compressor_pool(backend::Ops& ops, const Numerics& num, const CompressorWeights& w,
                             backend::CMat kv, backend::CMat gate,
                             std::span<const CompressorJob> jobs, CompressorScratch& scratch);

// Appends rows [n, width] (compressor_pool's order) to list_of(job) of each job; one scatter.
void append_closed_rows(backend::Ops& ops, int ratio, std::span<const CompressorJob> jobs,
                        backend::CMat rows,
                        const std::function<PagedRows&(const CompressorJob&)>& list_of,
                        CompressorScratch& scratch);

// kv / gate: the step's rows (all sequences); jobs: the sequences, in any order, each state at
// most once. Returns the number of rows emitted in all.
int64_t compressor_advance(backend::Ops& ops, const Numerics& num, const CompressorWeights& w,
                           CompressedRowKind kind, std::span<const float> freqs, backend::CMat kv,
                           backend::CMat gate, std::span<const CompressorJob> jobs,
                           CompressorScratch& scratch);

}  // namespace deepinfer::model
