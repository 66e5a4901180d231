// Weight binding: the validated checkpoint (io::Checkpoint) turned, once at load, into the
// backend::WeightRef views and FP32 parameter pointers every layer of the forward pass reads.
//
// Nothing is copied except small float parameters that are not stored as F32 (mHC, sinks, ape,
// router bias may be BF16 in some saves): those get an owned FP32 copy so the ops can take plain
// float pointers. Big weights stay zero-copy views of the memory-mapped files, so the Checkpoint
// must outlive the ModelWeights (Model owns both). On a GPU backend every view is replaced by a
// device copy in `placed` at bind time. The binding follows the config's per-layer
// LayerSpec, so a layer only has the parts its kind needs (compressor for CSA/HCA, indexer for
// CSA, tid2eid for hash MoE).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "backend/buffer.h"
#include "backend/mat.h"
#include "backend/ops.h"
#include "backend/weight_ref.h"
#include "base/status.h"
#include "io/checkpoint.h"
#include "io/model_config.h"

namespace deepinfer::model::deepseek_v4 {

// One mHC site (spec §2.2): fn [(2+n)n, nD] (or [n, nD] for a head), base, scale, all FP32.
struct HcWeights {
  backend::CMat fn;
  const float* base = nullptr;
  const float* scale = nullptr;
};

// Compressor of an attention layer or of an indexer (spec §2.4).
struct CompressorWeights {
  backend::WeightRef wkv, wgate;  // [c·d_c, D], FP32 compute
  const float* ape = nullptr;     // [ratio, c·d_c]
  backend::WeightRef norm;        // [1, d_c]
  int ratio = 0;
  int d_c = 0;
  bool overlap = false;  // ratio 4: c = 2, rows pool the previous window's first half too
  int width() const { return overlap ? 2 * d_c : d_c; }
};

struct IndexerWeights {
  backend::WeightRef wq_b;          // [Hi·di, q_lora]
  backend::WeightRef weights_proj;  // [Hi, D]
  CompressorWeights compressor;     // d_c = index_head_dim, overlapping
};

struct AttentionWeights {
  backend::WeightRef wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b;
  std::vector<backend::WeightRef> wo_a_groups;  // wo_a rows [g·o_lora, (g+1)·o_lora), per group
  const float* sink = nullptr;                  // [H]
  std::optional<CompressorWeights> compressor;  // CSA, HCA
  std::optional<IndexerWeights> indexer;        // CSA
};

struct MoeWeights {
  io::MoeKind kind = io::MoeKind::kScore;
  backend::WeightRef gate;      // [E, D]
  const float* bias = nullptr;  // [E], score routing only (may be null)
  TensorView tid2eid;           // [V, k] I32/I64, hash routing only
  std::vector<backend::ExpertWeights> experts;
  std::optional<backend::ExpertWeights> shared;
};

struct BlockWeights {
  io::LayerSpec spec;
  backend::WeightRef attn_norm, ffn_norm;
  HcWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights moe;
};

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

  // FP32 copies of small parameters that were not stored as F32. A deque: pointers stay valid.
  std::deque<std::vector<float>> owned;
  // Backend-memory copies of every weight and parameter when the backend's memory is not host
  // memory (a GPU); empty for the CPU backends, whose views stay on the mapped checkpoint.
  std::vector<backend::Buffer> placed;
};

// Binds every tensor the config implies. Errors name the tensor (kDataLoss / kInvalidArgument);
// the checkpoint was validated by io, so these only fire on formats the backend cannot take.
// Weights end up in `ops`' memory (backend::place_weight): zero-copy on the CPU, uploaded once
// to a GPU, still in their stored formats.
Expected<ModelWeights> bind_weights(const io::Checkpoint& ckpt, backend::Ops& ops);

}  // namespace deepinfer::model::deepseek_v4
