// Checkpoint inspection for front ends (`deepinfer inspect`, deepinfer.checkpoint): a model
// directory validated the way the engine will load it, described as one JSON object: the
// config, layer kinds, parameters and bytes per dtype and group, quantization, KV cache per
// token, warnings (src/io/inspect_report.h lists the fields). Errors name the file, field or
// tensor at fault; a missing file or directory is NotFound.
#pragma once

#include <string>

#include "deepinfer/status.h"

namespace deepinfer {

// config_only: read only config.json (no tensors; then model_dir may also be a config.json).
// indent: as nlohmann::json::dump (-1: one line).
Expected<std::string> inspect_model_json(const std::string& model_dir, bool config_only,
                                         int indent = -1);

// config.json (a file or a model directory) parsed into the typed config, every field, as JSON.
Expected<std::string> model_config_json(const std::string& path);

}  // namespace deepinfer
