// The attention core of a DeepSeek-V4.1 layer (CSA2, spec §6.2, §6.7 items 3-4, 6-7), composed
// from the shared pieces (model/layers/attention.h):
//   Full     its compressor pools the step's rows (ratio 2: softmax over the group's two tokens;
//            ratio 1: each token's own row) into latents; each latent becomes an index key
//            (MXFP4 of RoPE(k_norm(wk · latent))) and a compressed KV row (NVFP4 of RoPE(latent)),
//            both appended to this layer's lists, which every later layer of its group reads;
//            then it selects like a Reindex layer;
//   Reindex  its own indexer query scores the KV source's keys and keeps the top-k (restricted to
//            the candidate blocks after the candidate source, which makes them);
//   Reuse    attends to the picks of the latest index source;
// and every layer attends to its own window plus those picks. The dense projections and the
// output projection are the shared ones (attention_project / attention_output).
#pragma once

#include <cstddef>

#include "backend/buffer.h"
#include "model/layers/attention.h"

namespace deepinfer::model::deepseek_v41 {

struct Csa2Scratch {
  explicit Csa2Scratch(backend::Ops& ops) : keys(ops), rows(ops), kept(ops) {}
  backend::Buffer keys, rows;  // a Full layer's new index keys and compressed KV rows
  backend::Buffer kept;        // bounded replay: the selection cut to the kept rows (upper_rows.h)
};

// r.o [rows of `in`] = attention of main layer `layer`; caches as above.
void csa2_core(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
               size_t layer, const AttentionRows& r, const StepInputs& in, AttentionScratch& s,
               Csa2Scratch& cs);

}  // namespace deepinfer::model::deepseek_v41
