// The model interface's shared parts (see model.h): loading by family, the single-sequence
// conveniences, and the defaults of the drafter entry points.
#include "model/model.h"

#include <string>
#include <vector>

#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/model.h"
#include "parallel/communicator.h"

namespace deepinfer::model {

const char* drafter_kind_name(DrafterKind k) {
  switch (k) {
    case DrafterKind::kNone:
      return "none";
    case DrafterKind::kMtp:
      return "mtp";
    case DrafterKind::kDSpark:
      return "dspark";
  }
  return "?";
}

Expected<std::unique_ptr<Model>> load_model(const std::string& model_dir, backend::Ops& ops,
                                            const io::LoadOptions& load, const ExpertParallel& ep,
                                            const TensorParallel& tp, const ContextParallel& cp) {
  // config.json alone decides the family; each family's loader opens the whole checkpoint.
  DI_ASSIGN_OR_RETURN(const io::ModelConfig c, io::load_model_config(model_dir));
  DI_TRY(ep.validate(c, ops));
  DI_TRY(tp.validate(c, ops, ep));
  DI_TRY(cp.validate(c, ops, ep));
  if (c.family == io::ModelFamily::kDeepseekV41) {
    return deepseek_v41::load(model_dir, ops, load, ep, tp, cp);
  }
  return deepseek_v4::load(model_dir, ops, load, ep, tp, cp);
}

Status out_of_memory_status(const backend::OutOfMemory& e, const std::string& doing,
                            const std::string& fix) {
  return resource_exhausted(std::string(e.what()) + " while " + doing + ". " + fix);
}

Status guarded_forward(const StepInputs& in, const std::function<Status()>& forward) {
  try {
    return forward();
  } catch (const backend::OutOfMemory& e) {
    return out_of_memory_status(
        e,
        "running a step of " + std::to_string(in.token_ids.size()) + " tokens over " +
            std::to_string(in.sequences.size()) +
            " sequences (their caches are now invalid: discard them)",
        "Fewer concurrent sequences, shorter prompts or smaller prefill chunks need less memory.");
  } catch (const parallel::CollectiveFailure& e) {
    return e.status().with_context("step of " + std::to_string(in.token_ids.size()) +
                                   " tokens (its sequences' caches are now invalid: discard them)");
  }
}

Expected<StepOutputs> Model::extend(SequenceCache& cache, std::span<const int32_t> ids,
                                    LogitsWanted logits, bool keep_hidden, int64_t upper_skip,
                                    int64_t hidden_tail) {
  std::vector<int32_t> pos(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    pos[i] = static_cast<int32_t>(cache.length() + static_cast<int64_t>(i));
  const SequenceSpan span{&cache, 0, static_cast<int64_t>(ids.size()), logits, upper_skip,
                          hidden_tail};
  StepInputs in{ids, pos, {&span, 1}, keep_hidden};
  StepOutputs out;
  DI_TRY(forward(in, out));
  return out;
}

Expected<StepOutputs> Model::decode(SequenceCache& cache, int32_t token) {
  return extend(cache, {&token, 1});
}

Expected<SequenceCache> Model::window_replay_state(const SequenceCache&, std::span<const int32_t>,
                                                   int64_t) const {
  return unimplemented(
      "window replay needs compressed KV shared by KV-source layers "
      "(DeepSeek-V4.1); model " +
      config().source + " has none");
}

Expected<ExpertMoves> Model::set_expert_placements(std::vector<parallel::ExpertPlacement>) {
  return failed_precondition("model " + config().source +
                             " was loaded without expert parallelism: it holds every expert");
}

Expected<std::vector<float>> Model::mtp_draft(SequenceCache&, std::span<const float>,
                                              std::span<const int32_t>) {
  return failed_precondition("model " + config().source +
                             " has no MTP block (drafter: " + drafter_kind_name(drafter()) + ")");
}

Expected<MtpStep> Model::mtp_step(std::span<const MtpRows>, bool, MtpOutputs) {
  return failed_precondition("model " + config().source +
                             " has no MTP block (drafter: " + drafter_kind_name(drafter()) + ")");
}

Expected<MtpChain> Model::mtp_chain(std::span<const MtpRows>, int, bool, bool) {
  return failed_precondition("model " + config().source +
                             " has no MTP block (drafter: " + drafter_kind_name(drafter()) + ")");
}

Expected<DraftBlock> Model::dspark_draft(SequenceCache&, int32_t, int, std::span<const int32_t>) {
  return failed_precondition("model " + config().source + " has no DSpark drafter (drafter: " +
                             drafter_kind_name(drafter()) + ")");
}

Expected<std::vector<DraftBlock>> Model::dspark_draft_all(std::span<const DSparkJob>, int, bool) {
  return failed_precondition("model " + config().source + " has no DSpark drafter (drafter: " +
                             drafter_kind_name(drafter()) + ")");
}

}  // namespace deepinfer::model
