// The DeepSeek-V4.1 family (V4.1-Flash; spec §6) behind the model::Model interface: single-pass
// mHC (each site collapses with the previous site's pre), Engram memory before the attention
// site of its layers, CSA2 attention (Full / Reindex / Reuse layers sharing compressed KV and
// picks, hierarchical candidate selection), score-routed MoE with gate_temp, the final collapse
// with the last pre (no hc_head), and the DSpark drafter (spec §6.4, §6.7 item 10). Load through
// model::load_model.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"

namespace deepinfer::model::deepseek_v41 {

// Checks that `ops` supports every feature the checkpoint needs, builds the Engram hash layout
// from the checkpoint's tokenizer.json, binds the weights and returns the model. ep, tp, cp:
// expert, tensor and context parallelism (checked by load_model).
Expected<std::unique_ptr<model::Model>> load(const std::string& model_dir, backend::Ops& ops,
                                             const io::LoadOptions& load = {},
                                             const ExpertParallel& ep = {},
                                             const TensorParallel& tp = {},
                                             const ContextParallel& cp = {});

// The cache layout of a V4.1 config (model/cache.h): every layer and DSpark stage a window; each
// KV source (Full layer) its compressed KV and index keys, and at ratio 2 the pending token of an
// unfinished group; the Engram look-back of N-1 compressed ids.
CachePlan cache_plan(const io::ModelConfig& c);

}  // namespace deepinfer::model::deepseek_v41
