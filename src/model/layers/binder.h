// Binder: the validated checkpoint (io::Checkpoint) turned into backend::WeightRef views and
// FP32 parameter pointers, once at load. Both families bind through it, so the formats a weight
// may have (dense, FP8 block, FP4 block) and the placement on a GPU backend are decided in one
// place; what a family adds is only which tensors its layers have. A dummy checkpoint's weights
// (load format "dummy", io/dummy_weights.h) come without bytes: the binder generates them where
// they are placed instead of copying them there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "io/checkpoint.h"
#include "model/layers/weights.h"

namespace deepinfer::model {

// Which routed experts a block binds: all of them (ep_layer < 0), or under expert parallelism
// (model/expert_parallel.h) the ones this rank holds in main-model layer ep_layer, ascending.
// The others' tensors are never touched: not placed on the backend, their mapped pages not read.
struct ExpertSelection {
  int ep_layer = -1;
  std::vector<int32_t> held;
};

// Which part of the tensor-parallel weights a block binds (model/tensor_parallel.h): all of them
// (split == false), or this rank's shards. The other rows are never touched.
struct TensorSelection {
  bool split = false;
  int rank = 0, size = 1;
};

class Binder {
 public:
  Binder(const io::Checkpoint& ckpt, backend::Ops& ops, WeightStore& store)
      : ckpt_(ckpt), ops_(ops), store_(store) {}

  const io::Checkpoint& checkpoint() const { return ckpt_; }

  // A linear (or expert linear) in whatever format the checkpoint stores it, in the backend's
  // memory.
  Expected<backend::WeightRef> linear(const std::string& name);
  // Rows [rows.begin, rows.end()) of a linear only (tensor parallelism): a view of the mapped
  // bytes when the slice starts on a scale block or lies inside one, else a copy of the rows
  // whose FP8 scales are repeated per row (block_n 1: the same dequantized values, so the same
  // bits). Only the slice is counted in WeightStats.
  Expected<backend::WeightRef> linear_rows(const std::string& name, Shard rows);
  // The same, but left where the checkpoint maps it (host memory) whatever the backend: tables
  // the model gathers rows from on the host (V4.1 Engram), which may be bigger than a GPU.
  Expected<backend::WeightRef> host_table(const std::string& name);
  // A 1-D float vector (RMSNorm weight) as a dense [1, n] WeightRef over the same bytes.
  Expected<backend::WeightRef> vector(const std::string& name);
  // FP32 data of a small float tensor in the backend's memory (the mapped bytes when stored F32
  // on a host backend, else an owned FP32 copy).
  Expected<const float*> floats(const std::string& name);
  // A small float tensor as FP32 values on the host (to combine at load), and FP32 values the
  // binding computed placed in the backend's memory.
  Expected<std::vector<float>> host_floats(const std::string& name);
  const float* place_floats(std::vector<float> values);
  TensorView place(const TensorView& t);

  // mHC site `prefix`_fn / _base / _scale with fn [rows, cols].
  Expected<HcWeights> hc(const std::string& prefix, int64_t rows, int64_t cols);
  // Compressor at `prefix` (ending in '.'): wkv, norm, and wgate / ape when the layout has them.
  Expected<CompressorWeights> compressor(const std::string& prefix, int ratio, int d_c,
                                         bool overlap, bool has_ape);
  Expected<backend::ExpertWeights> expert(const std::string& prefix);
  // What expert(prefix) counts in WeightStats (tensors and stored bytes), without binding it:
  // what a rank gives back when it stops holding the expert (model/layers/expert_rebind.h).
  Expected<WeightStats> expert_footprint(const std::string& prefix) const;
  // embed.weight (dense: an embedding table) and head.weight, or the embedding again when the
  // checkpoint ties them (no head.weight). With `tensor` split, lm_head is this rank's
  // vocabulary rows only (the embedding stays whole).
  Status embedding_and_head(backend::WeightRef* embed, backend::WeightRef* lm_head,
                            const TensorSelection& tensor = {});
  // What every block of both families has: norms, the two mHC sites, the attention projections
  // and sink, and the MoE of `spec.moe` kind with `n_experts` routed experts (top_k per token),
  // those of `selection`.
  // With `tensor` split, the attention's and the shared expert's split weights are this rank's
  // shards (BlockWeights::attn.tp, moe.tp).
  Expected<BlockWeights> block_common(const std::string& prefix, const io::LayerSpec& spec,
                                      int n_experts, int top_k,
                                      const ExpertSelection& selection = {},
                                      const TensorSelection& tensor = {});

 private:
  backend::WeightRef place(const backend::WeightRef& w);
  // The weight in the backend's memory: a checkpoint's mapped bytes placed there (zero-copy on a
  // host backend, a copy on a GPU), a dummy weight's bytes generated there.
  Expected<backend::WeightRef> resident(const io::Weight& w);
  // `w` with bytes: unchanged when it has them; a dummy weight (io::Weight::generated) with its
  // data and scale generated, in the backend's memory (Ops::fill_random: on a GPU a kernel, no
  // host copy) or, on_host, in host memory the store owns (tables the model reads on the host).
  io::Weight materialized(io::Weight w, bool on_host);
  TensorView generate(const TensorView& layout, const RandomFill& fill, bool on_host);

  const io::Checkpoint& ckpt_;
  backend::Ops& ops_;
  WeightStore& store_;
};

}  // namespace deepinfer::model
