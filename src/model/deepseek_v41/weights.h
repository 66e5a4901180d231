// DeepSeek-V4.1 weight binding (spec §6.6, §6.7 item 8): the shared block pieces
// (model/layers/weights.h) per the layer's CSA2 role, plus what only V4.1 has: the Engram memory
// of its Engram layers and the DSpark drafter's stages and heads. Bound once at load.
//
// The Engram tables stay where the checkpoint maps them (host memory) on every backend: the
// released ones are ~100 GB each, bigger than a GPU, and a step reads 24 rows per token from
// them (engram.h gathers those rows and hands only them to the backend).
#pragma once

#include <optional>
#include <vector>

#include "base/status.h"
#include "io/checkpoint.h"
#include "model/expert_parallel.h"
#include "model/layers/weights.h"

namespace deepinfer::model::deepseek_v41 {

struct EngramWeights {
  int index = 0;                  // position in engram_layer_ids (the hash layout's layer)
  backend::WeightRef table;       // [rows, head_dim], host memory: FP8 with row scales, or dense
  backend::WeightRef wkv;         // [(n + 1)·D, (N - 1)·heads·head_dim]
  const float* w_prod = nullptr;  // [n, D] = q_weight ⊙ k_weight (FP32, backend memory)
};

struct Block {
  BlockWeights base;
  std::optional<EngramWeights> engram;
};

// The drafter (spec §6.4, §6.7 item 10): SWA stages with their own routed experts; stage 0
// projects the target features, the last stage owns the final norm and the two heads.
struct DSparkWeights {
  std::vector<BlockWeights> stages;
  backend::WeightRef main_proj;       // [D, T·D]
  backend::WeightRef main_norm;       // [1, D]
  backend::WeightRef norm;            // [1, D]
  backend::WeightRef markov_embed;    // [V, r] (an embedding table)
  backend::WeightRef markov_head;     // [V, r]
  const float* confidence = nullptr;  // [D + r] FP32 (backend memory)
};

struct ModelWeights {
  backend::WeightRef embed, lm_head, norm;
  std::vector<Block> layers;
  std::optional<DSparkWeights> dspark;  // absent when the checkpoint has no mtp.* tensors
  WeightStore store;
};

// Binds every tensor the config implies; errors name the tensor. With expert parallelism (ep
// enabled) the main layers bind only this rank's routed experts; the DSpark stages all.
Expected<ModelWeights> bind_weights(const io::Checkpoint& ckpt, backend::Ops& ops,
                                    const ExpertParallel& ep = {}, const TensorParallel& tp = {});

}  // namespace deepinfer::model::deepseek_v41
