// Drafters that run the checkpoint's own draft layers (drafter.h): DeepSeek-V4.1's DSpark block
// drafter (spec §6.4; model::Model::dspark_draft): from the anchor (the last context token, not
// yet processed) it drafts a block of k positions in one forward of its stages over the
// context features the main layers left in the cache, chooses them left to right through its
// Markov head, and scores each with its confidence head (σ of the logit = the estimated
// survival of position j given j - 1 survived).
#include <algorithm>
#include <cmath>

#include "runtime/spec/drafter.h"

namespace deepinfer::runtime::spec {
namespace {

class DSparkDrafter final : public Drafter {
 public:
  explicit DSparkDrafter(model::Model& m) : model_(m) {}
  std::string name() const override { return "dspark"; }

  Status propose(model::SequenceCache& cache, std::span<const int32_t> ctx, int k,
                 DraftProposal& out) override {
    out.clear();
    // The drafter was trained on blocks of dspark_block_size positions: never more.
    k = std::min<int>(k, model_.config().dspark.block_size);
    if (k <= 0 || ctx.empty()) return {};
    DI_ASSIGN_OR_RETURN(model::DraftBlock block, model_.dspark_draft(cache, ctx.back(), k));
    out.tokens = std::move(block.tokens);
    out.confidence.reserve(block.confidence.size());
    for (const float c : block.confidence) out.confidence.push_back(1.0f / (1.0f + std::exp(-c)));
    return {};
  }

 private:
  model::Model& model_;
};

}  // namespace

Expected<std::unique_ptr<Drafter>> make_dspark_drafter(model::Model& model) {
  if (model.drafter() != model::DrafterKind::kDSpark) {
    return failed_precondition(std::string("speculative method 'dspark' needs a DeepSeek-V4.1 "
                                           "checkpoint with DSpark draft layers; this one has ") +
                               model::drafter_kind_name(model.drafter()));
  }
  return std::unique_ptr<Drafter>(std::make_unique<DSparkDrafter>(model));
}

}  // namespace deepinfer::runtime::spec
