// rebind_routed_experts (see expert_rebind.h): stage every layer's new expert list, then swap.
#include "model/layers/expert_rebind.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/check.h"
#include "model/layers/binder.h"

namespace deepinfer::model {

namespace {

std::string expert_prefix(size_t layer, int32_t expert) {
  return "layers." + std::to_string(layer) + ".ffn.experts." + std::to_string(expert) + ".";
}

// One layer's experts after the rebind, not yet visible to the model.
struct StagedLayer {
  std::vector<int32_t> ids;
  std::vector<backend::ExpertWeights> experts;
};

}  // namespace

Expected<ExpertMoves> rebind_routed_experts(const io::Checkpoint& ckpt, backend::Ops& ops,
                                            WeightStore& store, std::span<MoeWeights* const> layers,
                                            MoeExchange& exchange,
                                            std::vector<parallel::ExpertPlacement> placements) {
  ExpertParallel next = exchange.context();
  next.placements = std::move(placements);
  DI_TRY(next.validate(ckpt.config(), ops));
  DI_CHECK(layers.size() == ckpt.config().layers.size());

  // Binding counts into store.stats as it goes: restored if anything fails.
  const WeightStats stats_before = store.stats;
  auto fail = [&](const Status& s, size_t layer) {
    store.stats = stats_before;
    return s.with_context("rebinding the routed experts of layer " + std::to_string(layer));
  };
  Binder binder(ckpt, ops, store);
  ExpertMoves moves;
  WeightStats released;
  std::vector<StagedLayer> staged(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const MoeWeights& now = *layers[l];
    DI_CHECK(now.ep_layer == static_cast<int>(l) && now.local_experts.size() == now.experts.size());
    StagedLayer& st = staged[l];
    st.ids = next.placement(l).experts_of(next.rank());
    for (int32_t e : st.ids) {
      // Both lists are ascending: a kept expert keeps its views.
      const auto it = std::lower_bound(now.local_experts.begin(), now.local_experts.end(), e);
      if (it != now.local_experts.end() && *it == e) {
        st.experts.push_back(now.experts[static_cast<size_t>(it - now.local_experts.begin())]);
        continue;
      }
      const int64_t bytes_before = store.stats.bytes;
      auto bound = binder.expert(expert_prefix(l, e));
      if (!bound.ok()) return fail(bound.status(), l);
      st.experts.push_back(*bound);
      ++moves.bound;
      moves.bytes_bound += store.stats.bytes - bytes_before;
    }
    for (int32_t e : now.local_experts) {
      if (std::binary_search(st.ids.begin(), st.ids.end(), e)) continue;
      auto footprint = binder.expert_footprint(expert_prefix(l, e));
      if (!footprint.ok()) return fail(footprint.status(), l);
      released.tensors += footprint->tensors;
      released.bytes += footprint->bytes;
      ++moves.released;
    }
  }

  // Nothing can fail from here on.
  store.stats.tensors -= released.tensors;
  store.stats.bytes -= released.bytes;
  store.stats.routed_experts += moves.bound - moves.released;
  store.stats.routed_expert_bytes += moves.bytes_bound - released.bytes;
  moves.bytes_released = released.bytes;
  for (size_t l = 0; l < layers.size(); ++l) {
    layers[l]->local_experts = std::move(staged[l].ids);
    layers[l]->experts = std::move(staged[l].experts);
  }
  exchange.set_placements(std::move(next.placements));
  return moves;
}

}  // namespace deepinfer::model
