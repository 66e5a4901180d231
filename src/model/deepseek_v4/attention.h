// Attention of one V4 layer, all three kinds (spec §2.3-§2.5): SWA (window only), CSA (window +
// indexer-selected compressed rows) and HCA (window + every visible compressed row).
//
// Shape of one call: the dense projections (q path, shared K=V latent, compressor and indexer
// projections, output projection) run over all M rows of the step; the CSA selection (indexer
// scores + top-k) runs over all rows at once, each row reading its own sequence's index keys;
// the key lists are built per sequence and each query's key set (window rows oldest→newest,
// then compressed rows) is gathered into one key matrix, so a single sparse_attention call
// serves every sequence. The cache
// is updated at the end of the call (window rows, compressor state, emitted rows); the
// sequence's length is advanced by the caller after the last layer.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/ops.h"
#include "io/model_config.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/numerics.h"
#include "model/deepseek_v4/step.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer::model::deepseek_v4 {

// Activations live in the backend's memory (Buffer); index lists are host arrays, which every
// backend accepts (a device backend stages them).
struct AttentionScratch {
  explicit AttentionScratch(backend::Ops& ops)
      : qr(ops),
        q(ops),
        kv(ops),
        o(ops),
        z(ops),
        comp_kv(ops),
        comp_gate(ops),
        idx_kv(ops),
        idx_gate(ops),
        iq(ops),
        iw(ops),
        scores(ops),
        keys(ops),
        comp(ops) {}
  backend::Buffer qr, q, kv, o, z;
  backend::Buffer comp_kv, comp_gate, idx_kv, idx_gate;  // compressor projections
  backend::Buffer iq, iw, scores;                        // indexer
  backend::Buffer keys;                                  // gathered key/value rows
  std::vector<int32_t> idx, sel, visible, remap;
  std::vector<const float*> key_src;    // gathered key rows, in key order
  std::vector<backend::CMat> row_keys;  // each query row's index keys (its sequence's)
  std::vector<CompressorJob> comp_jobs, idx_jobs;
  std::vector<const float*> win_src;  // this step's window rows and their ring slots
  std::vector<float*> win_dst;
  CompressorScratch comp;
};

// Everything a layer reads besides its weights and its rows.
struct LayerEnv {
  backend::Ops& ops;
  const io::ModelConfig& config;
  const Numerics& num;
  const RopeTables& rope;
};

// out [M, D] = Attn(u) for the rows of `in`. `mtp` selects the caches' MTP layer list;
// `cache_index` the layer within it.
void attention_forward(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       bool mtp, size_t cache_index, backend::CMat u, const StepInputs& in,
                       backend::Mat out, AttentionScratch& s);

}  // namespace deepinfer::model::deepseek_v4
