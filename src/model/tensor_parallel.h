// TensorParallel: what a model needs to split its dense parts over several ranks that all run
// the same tokens (tensor parallelism, docs/parallel.md "Tensor parallelism"). Given at load
// (model::load_model); absent by default, and then nothing changes, bit for bit.
//
// Every split here keeps each output element's FP32 sum on one rank, so every rank's logits are
// the single-rank model's bit for bit (the CPU GEMMs compute each (row, weight row) dot the same
// way whatever the weight's row count, opt_gemm.cc):
//   * attention, by whole output groups (o_groups) and the heads they read: wq_b's rows, the
//     sink, wo_a's groups; the groups' outputs are all-gathered, then wo_b is split by output
//     rows (hidden channels) and its outputs all-gathered;
//   * the shared expert, by intermediate rows (w1, w3), the SwiGLU output all-gathered, then
//     w2 split by output rows and all-gathered;
//   * the LM head, by vocabulary rows, the logits all-gathered.
// Replicated on every rank: embedding, mHC, norms, wq_a, the K=V projection (one head), the
// compressors and the indexer (their sums span heads), the router and the routed experts (unless
// an ExpertParallel over the same ranks splits them: model/layers/moe.h), the
// drafter blocks (V4 MTP, V4.1 DSpark; their head is the shared, split LM head), and so the KV
// cache (one K=V head: nothing in it is per query head).
//
// Ranks are threads of one process over host memory (parallel::InProcessCommunicator), on the
// CPU backends. Every rank calls Model::forward (and the drafting calls) with the same inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/mat.h"
#include "backend/ops.h"
#include "base/status.h"
#include "io/model_config.h"
#include "parallel/communicator.h"

namespace deepinfer::model {

struct ExpertParallel;

struct TensorParallel {
  // This rank's communicator (its rank() is this rank); null: no tensor parallelism. Not owned:
  // it must outlive the model.
  parallel::Communicator* comm = nullptr;

  bool enabled() const { return comm != nullptr; }
  int rank() const { return comm->rank(); }
  int size() const { return comm->size(); }
  // Before anything is loaded: host memory, and expert parallelism beside it (if any) over the
  // same ranks or whole tensor-parallel groups (a multiple of size()). Each message names the
  // problem and the fix.
  Status validate(const io::ModelConfig& config, const backend::Ops& ops,
                  const ExpertParallel& ep) const;
};

// A contiguous run of `count` units from `begin` (heads' groups, rows): rank r of n gets
// [r·units/n, (r+1)·units/n), so shards differ by at most one unit and may be empty (more
// ranks than units: those ranks hold none and only take part in the gathers).
struct Shard {
  int64_t begin = 0, count = 0;
  int64_t end() const { return begin + count; }
};
Shard shard_of(int64_t units, int rank, int size);

// The model's gathers over its communicator (host memory), with their scratch.
class TensorParallelGather {
 public:
  explicit TensorParallelGather(parallel::Communicator& comm) : comm_(comm) {}

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  Shard shard(int64_t units) const { return shard_of(units, rank(), size()); }

  // full [M, units·unit] = every rank's local [M, shard(units).count·unit] side by side in rank
  // order (each rank's columns start at its shard's begin). local may be a view of full.
  // Throws parallel::CollectiveFailure naming `what`.
  void gather_cols(backend::CMat local, int64_t units, int64_t unit, backend::Mat full,
                   const char* what);
  // full [M, cols]: this rank's rows shard(M) are in place on entry; on return every rank's rows
  // are (tensor with expert parallelism: each rank runs its share of a step's rows through the
  // expert exchange, moe.cc). Only bytes move. Throws parallel::CollectiveFailure naming `what`.
  void gather_rows(backend::Mat full, const char* what);
  // y [M, N] = x · Wᵀ with this rank holding W's rows shard(N) (w_shard): the local product,
  // then gather_cols. Each element's sum is the one rank's own: the single-rank bits.
  void linear_gathered(backend::Ops& ops, backend::CMat x, const backend::WeightRef& w_shard,
                       const backend::LinearOpts& opts, backend::Mat y, const char* what);

 private:
  // recv_ [size() x block] = every rank's send_ [block] in rank order (send_ filled, padded to
  // `block`). Throws parallel::CollectiveFailure naming `what`.
  void all_gather_blocks(int64_t block, const char* what);

  parallel::Communicator& comm_;
  std::vector<float> local_, send_, recv_;
};

}  // namespace deepinfer::model
