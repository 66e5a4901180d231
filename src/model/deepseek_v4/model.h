// The DeepSeek-V4 family (V4-Flash, V4-Pro; spec §1-§4) behind the model::Model interface:
// the block composition (mHC -> attention -> mHC -> MoE with hc_pre collapsing with its own
// mix), the hc_head collapse and the MTP block (spec §2.8). Load through model::load_model.
#pragma once

#include <memory>

#include "model/model.h"

namespace deepinfer::model::deepseek_v4 {

// Checks that `ops` supports every feature the checkpoint needs, binds its weights and returns
// the model. Errors name the directory / tensor / missing backend feature.
// ep, tp, cp: expert, tensor and context parallelism (model/expert_parallel.h,
// tensor_parallel.h, context_parallel.h), checked by load_model.
Expected<std::unique_ptr<model::Model>> load(const std::string& model_dir, backend::Ops& ops,
                                             const io::LoadOptions& load = {},
                                             const ExpertParallel& ep = {},
                                             const TensorParallel& tp = {},
                                             const ContextParallel& cp = {});

// The cache layout of a V4 config (model/cache.h): every layer a window; CSA layers compressed
// rows and index keys with their overlapping compressor states, HCA layers compressed rows.
CachePlan cache_plan(const io::ModelConfig& c);

}  // namespace deepinfer::model::deepseek_v4
