// include/deepinfer/inspect.h over the checkpoint loader and inspect_report.h.
#include "deepinfer/inspect.h"
#include "io/checkpoint.h"
#include "io/inspect_report.h"
#include "io/model_config.h"

namespace deepinfer {

Expected<std::string> inspect_model_json(const std::string& model_dir, bool config_only,
                                         int indent) {
  if (config_only) {
    DI_ASSIGN_OR_RETURN(io::ModelConfig config, io::load_model_config(model_dir));
    return io::inspect_config(config).dump(indent);
  }
  DI_ASSIGN_OR_RETURN(io::Checkpoint checkpoint, io::Checkpoint::open(model_dir));
  return io::inspect_checkpoint(checkpoint).dump(indent);
}

Expected<std::string> model_config_json(const std::string& path) {
  DI_ASSIGN_OR_RETURN(io::ModelConfig config, io::load_model_config(path));
  return io::model_config_to_json(config).dump();
}

}  // namespace deepinfer
