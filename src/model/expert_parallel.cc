// ExpertParallel's load-time checks (see expert_parallel.h).
#include "model/expert_parallel.h"

#include <string>

namespace deepinfer::model {

Status ExpertParallel::validate(const io::ModelConfig& c, const backend::Ops& ops) const {
  if (!enabled()) return {};
  const std::string what = "expert parallelism (model::ExpertParallel): ";
  if (ops.device_kind() != DeviceKind::kCpu) {
    return unimplemented(what + "backend '" + ops.name() +
                         "' keeps activations in device memory, and the expert exchange runs on "
                         "host memory only (in-process ranks on the CPU backends); load without "
                         "ExpertParallel on this backend, or use the CPU backend");
  }
  const size_t layers = c.layers.size();
  if (placements.size() != 1 && placements.size() != layers) {
    return invalid_argument(what + std::to_string(placements.size()) + " placements for " +
                            std::to_string(layers) +
                            " layers: give one per layer of the main model, or one for all");
  }
  for (size_t l = 0; l < placements.size(); ++l) {
    const parallel::ExpertPlacement& p = placements[l];
    const std::string at = what + "placement " + std::to_string(l) + ": ";
    if (p.num_ranks != comm->size()) {
      return invalid_argument(at + "made for " + std::to_string(p.num_ranks) +
                              " ranks, the communicator has " + std::to_string(comm->size()) +
                              " (plan with the rank count of the group)");
    }
    if (p.num_experts() != c.n_routed_experts) {
      return invalid_argument(at + "places " + std::to_string(p.num_experts()) +
                              " experts, config " + c.source + " has " +
                              std::to_string(c.n_routed_experts) +
                              " routed experts per layer (make the placement for this model)");
    }
    if (Status s = p.validate(); !s.ok()) return s.with_context(at.substr(0, at.size() - 2));
  }
  if (load_counter != nullptr && (load_counter->num_layers() != static_cast<int>(layers) ||
                                  load_counter->num_experts() != c.n_routed_experts)) {
    return invalid_argument(what + "the load counter is " +
                            std::to_string(load_counter->num_layers()) + " layers x " +
                            std::to_string(load_counter->num_experts()) + " experts, the model " +
                            std::to_string(layers) + " x " + std::to_string(c.n_routed_experts) +
                            " (make it as ExpertLoadCounter(layers, routed experts))");
  }
  return {};
}

Status ExpertParallel::check_whole_groups(const std::string& what, int group_size,
                                          const char* kind) const {
  if (!enabled() || comm->size() % group_size == 0) return {};
  return invalid_argument(what + "over " + std::to_string(group_size) +
                          " ranks and expert parallelism over " + std::to_string(comm->size()) +
                          ", not a multiple: give expert parallelism the same ranks or whole " +
                          kind + " groups");
}

}  // namespace deepinfer::model
