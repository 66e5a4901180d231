// The weights of the pieces both DeepSeek-V4 families are built from (mHC sites, attention with
// its compressor and indexer, MoE), as the backend::WeightRef views and FP32 parameter pointers
// the layer code reads. Filled once at load by a family's binding (deepseek_v4/weights.cc,
// deepseek_v41/weights.cc) through the shared Binder (binder.h).
//
// Big weights stay zero-copy views of the memory-mapped checkpoint on the CPU backends; a GPU
// backend gets device copies (backend::place_weight), kept alive by WeightStore::placed. Every
// optional part is present exactly when the layer's role needs it, so layer code tests presence
// rather than re-deriving the role.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "backend/buffer.h"
#include "backend/mat.h"
#include "backend/ops.h"
#include "backend/weight_ref.h"
#include "io/model_config.h"
#include "model/tensor_parallel.h"

namespace deepinfer::model {

// One mHC site (spec §2.2): fn [(2+n)n, nD] (or [n, nD] for a V4 head), base, scale, all FP32.
struct HcWeights {
  backend::CMat fn;
  const float* base = nullptr;
  const float* scale = nullptr;
};

// The op parameters of one mHC site: its weights plus the config's streams, eps and Sinkhorn
// iterations; norm_eps is the model's RMS eps (Numerics::eps).
inline backend::HcParams hc_params(const HcWeights& h, const io::ModelConfig& c, float norm_eps) {
  backend::HcParams p;
  p.n = c.hc_mult;
  p.fn = h.fn;
  p.base = h.base;
  p.scale = h.scale;
  p.norm_eps = norm_eps;
  p.hc_eps = static_cast<float>(c.hc_eps);
  p.sinkhorn_iters = c.hc_sinkhorn_iters;
  return p;
}

// Compressor of an attention layer or of a V4 indexer (spec §2.4, §6.2).
struct CompressorWeights {
  backend::WeightRef wkv;                   // [c·d_c, D], FP32 compute
  std::optional<backend::WeightRef> wgate;  // [c·d_c, D]; absent at ratio 1 (V4.1: no pooling)
  const float* ape = nullptr;               // [ratio, c·d_c]; null in V4.1 (no position bias)
  backend::WeightRef norm;                  // [1, d_c]
  int ratio = 0;
  int d_c = 0;
  bool overlap = false;  // V4 ratio 4: c = 2, rows pool the previous window's first half too
  int width() const { return overlap ? 2 * d_c : d_c; }
};

// Lightning indexer of an index-source layer. V4: its own compressor makes the index keys.
// V4.1 (spec §6.7 item 4): a Full layer derives them from its compressed latent (wk, k_norm);
// a Reindex layer has neither and scores the keys of its KV source.
struct IndexerWeights {
  backend::WeightRef wq_b;                       // [Hi·di, q_lora]
  backend::WeightRef weights_proj;               // [Hi, D]
  std::optional<CompressorWeights> compressor;   // V4: d_c = index_head_dim, overlapping
  std::optional<backend::WeightRef> wk, k_norm;  // V4.1 Full layers: [di, d], [1, di]
};

// Tensor parallelism (model/tensor_parallel.h): the part of a block's split weights this rank
// holds. split == false: all of them (one rank, or a drafter block).
struct TensorSplit {
  bool split = false;
  Shard groups;  // output groups (o_groups) of the attention, and the query heads they read
  Shard hidden;  // output rows (hidden channels) of wo_b and of the experts' w2
  Shard inter;   // intermediate rows of the shared expert's w1 and w3
  // The routed experts split too (a main-model layer without expert parallelism): their w1/w3
  // hold rows routed_inter of routed_inter_rows, their w2 rows `hidden` (layers/moe_tp.h).
  bool routed = false;
  Shard routed_inter;
  int64_t routed_inter_rows = 0;
};

struct AttentionWeights {
  // With tensor parallelism wq_b holds the rows of this rank's heads, wo_b the rows of its
  // hidden channels (tp).
  backend::WeightRef wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b;
  const float* sink = nullptr;  // [heads]: this rank's heads
  int64_t heads = 0;            // query heads here: num_heads, or this rank's share
  TensorSplit tp;
  std::optional<CompressorWeights> compressor;  // V4 CSA/HCA; V4.1 KV sources (Full layers)
  std::optional<IndexerWeights> indexer;        // V4 CSA; V4.1 index sources
};

struct MoeWeights {
  io::MoeKind kind = io::MoeKind::kScore;
  backend::WeightRef gate;      // [E, D]
  const float* bias = nullptr;  // [E], score routing only (may be null)
  TensorView tid2eid;           // [V, k] I32/I64, hash routing only
  // Indexed by expert id; with expert parallelism (ep_layer >= 0) only this rank's experts,
  // ascending by id (local_experts). With tensor parallelism and no expert parallelism
  // (tp.routed): every expert, w1/w3 rows tp.routed_inter, w2 rows tp.hidden.
  std::vector<backend::ExpertWeights> experts;
  // With tensor parallelism (tp.split): w1/w3 hold rows tp.inter, w2 rows tp.hidden.
  std::optional<backend::ExpertWeights> shared;
  TensorSplit tp;
  int top_k = 0;  // routed experts per token (the layer's, which a V4.1 drafter stage sets)
  // Expert parallelism (model/expert_parallel.h): the main-model layer whose placement bound
  // `experts`, or -1 (every expert here: one rank, or a drafter block).
  int ep_layer = -1;
  std::vector<int32_t> local_experts;  // with ep_layer >= 0: the id of each entry of `experts`
};

struct BlockWeights {
  io::LayerSpec spec;
  backend::WeightRef attn_norm, ffn_norm;
  HcWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights moe;
};

// What a model's binding took from the checkpoint (Model::weight_stats): the bytes each rank of
// expert parallelism holds. Counts every tensor bound as a matrix or vector (linear, vector,
// host_table), stored bytes (data + scales); small FP32 parameters (mHC, biases, sinks) aside.
struct WeightStats {
  int64_t tensors = 0;
  int64_t bytes = 0;
  int64_t routed_experts = 0;  // routed experts bound, over every MoE layer (drafter included)
  int64_t routed_expert_bytes = 0;
  // Tensor parallelism: the tensors bound as this rank's rows only, and their bytes.
  int64_t split_tensors = 0;
  int64_t split_bytes = 0;
};

// Memory a family's weights own besides the mapped checkpoint: FP32 copies of small parameters
// that were not stored as F32 (a deque: pointers stay valid), and backend-memory copies of every
// weight when the backend's memory is not host memory (a GPU).
struct WeightStore {
  std::deque<std::vector<float>> owned;
  std::vector<backend::Buffer> placed;
  std::deque<std::vector<uint8_t>> host_bytes;  // dummy weights the model reads on the host
  WeightStats stats;
};

}  // namespace deepinfer::model
