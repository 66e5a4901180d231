// ContextParallel: what a model needs to split a step's tokens (a long prefill) over several
// ranks by causal attention work (context parallelism, docs/parallel.md "Context parallelism").
// Given at load (model::load_model); absent by default, and then nothing changes, bit for bit.
//
// Every rank calls Model::forward with the same whole step. Each sequence's rows are cut into
// 2R chunks and rank r computes chunks r and 2R-1-r (the zig-zag split): a query at position p
// reads a prefix of p + 1 keys, so pairing an early chunk with a late one gives every rank the
// same causal work, where equal contiguous token counts would give the last rank (2R-1)/R
// times the mean. A rank runs everything per token (embedding, mHC, norms, projections, MoE) on
// its rows only. In each layer the per-position state the caches are built from (the K=V
// latent, the compressor's and the indexer compressor's (kv, gate) rows) is all-gathered, so
// every rank advances the compressors and writes the windows over the whole step itself: the
// same inputs through the same code as on one rank, hence the same compressed rows and index
// keys, and every rank ends the step holding the complete cache. Each rank then scores (indexer)
// and attends only its own query rows. The final residual streams are gathered, so every rank
// returns the single-rank logits (and hidden rows) of the whole step; decode continues with the
// same calls (one token goes to rank 0; the others join the gathers with no rows). With expert
// parallelism over the same ranks, each rank's rows go through the expert exchange in every MoE
// layer, and a rank without rows serves its experts there.
//
// Ranks are threads of one process over host memory (parallel::InProcessCommunicator), on the
// CPU backends; DeepSeek-V4 and V4.1 (whose Full layers' compressor rows are gathered the same
// way; its Engram lookups, carried mHC pre and DSpark features are per row).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/mat.h"
#include "backend/ops.h"
#include "base/status.h"
#include "io/model_config.h"
#include "parallel/communicator.h"

namespace deepinfer::model {

struct AttentionRows;
struct ExpertParallel;
struct StepInputs;
struct TensorParallel;

struct ContextParallel {
  // This rank's communicator (its rank() is this rank); null: no context parallelism. Not
  // owned: it must outlive the model.
  parallel::Communicator* comm = nullptr;

  bool enabled() const { return comm != nullptr; }
  // Before anything is loaded: host memory; expert parallelism (if any) over the same ranks or
  // whole groups of them (a multiple of size()). Tensor parallelism beside it needs no check (each
  // rank a tensor-parallel group of its own: a grid). Each message names the problem and the fix.
  Status validate(const io::ModelConfig& config, const backend::Ops& ops,
                  const ExpertParallel& ep) const;
};

// Rows [begin, begin + count) of one sequence cut into 2·size chunks ([k·count/(2·size),
// (k+1)·count/(2·size))): rank r's rows, chunks r and 2·size-1-r, ascending.
std::vector<int64_t> zigzag_rows(int64_t begin, int64_t count, int rank, int size);

// Causal attention work of query rows at these positions: the sum of the keys each attends
// over a full causal prefix (p + 1 for position p). V4's per-query costs (the indexer scoring
// (p + 1)/4 index keys, HCA reading (p + 1)/128 rows, plus a bounded window and top-k) are this
// up to a factor and a per-query constant, so what balances it balances them.
int64_t causal_work(const std::vector<int64_t>& positions);

// One step's split and the gathers over it (host memory).
class ContextSplit {
 public:
  explicit ContextSplit(parallel::Communicator& comm) : comm_(comm) {}

  // Splits every sequence of `in` (zig-zag); every rank computes every rank's rows.
  void plan(const StepInputs& in);
  int64_t step_rows() const { return static_cast<int64_t>(local_of_.size()); }
  // This rank's step rows, ascending, and for each step row its index among them (-1: a peer's).
  const std::vector<int64_t>& mine() const { return rows_of_[static_cast<size_t>(comm_.rank())]; }
  const std::vector<int32_t>& local_of() const { return local_of_; }
  // This rank's rows' token ids, positions and step rows (as int32, copy_rows' row lists).
  const std::vector<int32_t>& ids() const { return ids_; }
  const std::vector<int32_t>& positions() const { return positions_; }
  const std::vector<int32_t>& rows() const { return rows32_; }

  // full [step_rows, cols]: every rank's local rows [mine().size(), cols] put at their step
  // rows. Throws parallel::CollectiveFailure naming `what`.
  void gather_rows(std::vector<backend::CMat> local, std::vector<backend::Mat> full,
                   const char* what);
  // A layer's per-position rows the caches are built from (AttentionRows' K=V latent, the
  // compressor's and the indexer compressor's kv and gate; the layer's empty ones left out):
  // this rank's rows on entry; on return r's views hold every rank's rows [step_rows(), cols], in
  // this split's own storage (valid until the next call). Throws parallel::CollectiveFailure.
  void gather_cache_rows(AttentionRows& r);

 private:
  parallel::Communicator& comm_;
  std::vector<std::vector<int64_t>> rows_of_;  // per rank
  std::vector<int32_t> local_of_;
  std::vector<int32_t> ids_, positions_, rows32_;
  std::vector<float> send_, recv_;
  std::vector<float> cache_rows_[5];  // gather_cache_rows' storage, one per part
};

}  // namespace deepinfer::model
