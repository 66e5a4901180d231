// JSON descriptions of a config and of a validated checkpoint, shared by `deepinfer inspect`
// and the Python front end (deepinfer.checkpoint). Plain data, no tensors.
#pragma once

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/model_config.h"

namespace deepinfer::io {

// Every field of ModelConfig (names as in the struct; enums as strings).
nlohmann::json model_config_to_json(const ModelConfig& config);

// Summary of a config alone: sizes, layer kinds, quantization as declared, parameter count
// implied by the config, KV cache per token.
nlohmann::json inspect_config(const ModelConfig& config);

// inspect_config plus what the files hold: layout, name family, parameters and bytes per dtype
// and per group, quantization found, MTP availability, unknown tensors, warnings.
nlohmann::json inspect_checkpoint(const Checkpoint& checkpoint);

}  // namespace deepinfer::io
