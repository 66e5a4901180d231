// DeepSeek-V4 weight binding: the checkpoint's tensors (spec §4) as the layer pieces' weight
// structs (model/layers/weights.h), plus what only V4 has: the hc_head collapse of the main
// model and of each MTP block, and the MTP blocks themselves (spec §2.8). Bound once at load;
// the layer's LayerSpec decides its parts (compressor for CSA/HCA, indexer with its own
// compressor for CSA, tid2eid for hash MoE).
#pragma once

#include <vector>

#include "base/status.h"
#include "io/checkpoint.h"
#include "model/expert_parallel.h"
#include "model/layers/weights.h"

namespace deepinfer::model::deepseek_v4 {

// Final collapse + norm of a stack (main model or an MTP block); the vocabulary head is shared.
struct HeadWeights {
  HcWeights hc;
  backend::WeightRef norm;
};

struct MtpWeights {
  BlockWeights block;
  backend::WeightRef e_proj, h_proj, enorm, hnorm;
  HeadWeights head;
};

struct ModelWeights {
  backend::WeightRef embed, lm_head;
  HeadWeights head;
  std::vector<BlockWeights> layers;
  std::vector<MtpWeights> mtp;  // empty when the checkpoint has no mtp.* tensors
  WeightStore store;
};

// Binds every tensor the config implies. Errors name the tensor (kDataLoss / kInvalidArgument);
// the checkpoint was validated by io, so these only fire on formats the backend cannot take.
// Weights end up in `ops`' memory (backend::place_weight): zero-copy on the CPU, uploaded once
// to a GPU, still in their stored formats. With expert parallelism (ep enabled) the main
// layers bind only this rank's routed experts (model/expert_parallel.h); the MTP block all.
Expected<ModelWeights> bind_weights(const io::Checkpoint& ckpt, backend::Ops& ops,
                                    const ExpertParallel& ep = {}, const TensorParallel& tp = {});

}  // namespace deepinfer::model::deepseek_v4
