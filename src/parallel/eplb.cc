// EPLB placement (eplb.h): three small greedy steps (pack groups onto nodes, replicate inside a
// node, pack physical experts onto the node's GPUs) composed per layer, and the load counter.
// Sizes are small (hundreds of experts, a handful of GPUs), so the steps are plain quadratic
// scans: simple to read, and their tie-breaking by lower index is obvious.
#include "parallel/eplb.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace deepinfer::parallel {
namespace {

// Items with weights go into num_bins bins of exactly weights.size() / num_bins items each:
// heaviest item first (equal weights: lower index first), each into the currently lightest bin
// that has room (equal bins: lower index). bin[i] and slot[i] say where item i went; a bin's
// slots are filled 0, 1, ... in the order items arrive.
struct Packing {
  std::vector<int> bin;
  std::vector<int> slot;
};

Packing pack_evenly(const std::vector<double>& weights, int num_bins) {
  const int n = static_cast<int>(weights.size());
  const int per_bin = n / num_bins;
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return weights[static_cast<size_t>(a)] > weights[static_cast<size_t>(b)];
  });
  Packing p;
  p.bin.assign(static_cast<size_t>(n), -1);
  p.slot.assign(static_cast<size_t>(n), -1);
  std::vector<double> bin_weight(static_cast<size_t>(num_bins), 0.0);
  std::vector<int> bin_items(static_cast<size_t>(num_bins), 0);
  for (int item : order) {
    int best = -1;
    for (int b = 0; b < num_bins; ++b) {
      if (bin_items[static_cast<size_t>(b)] == per_bin) continue;
      if (best < 0 || bin_weight[static_cast<size_t>(b)] < bin_weight[static_cast<size_t>(best)]) {
        best = b;
      }
    }
    p.bin[static_cast<size_t>(item)] = best;
    p.slot[static_cast<size_t>(item)] = bin_items[static_cast<size_t>(best)]++;
    bin_weight[static_cast<size_t>(best)] += weights[static_cast<size_t>(item)];
  }
  return p;
}

// num_slots >= weights.size() physical slots for the experts: slot i < n holds expert i, each
// further slot goes to the expert with the largest weight / replicas (ties: fewer replicas, then
// lower index, so an all-zero layer spreads its spare slots over experts 0, 1, ... instead of
// stacking them on expert 0).
// Returns the expert of each slot; *count gets the replicas per expert.
std::vector<int> replicate(const std::vector<double>& weights, int num_slots,
                           std::vector<int>* count) {
  const int n = static_cast<int>(weights.size());
  std::vector<int> expert_of_slot(static_cast<size_t>(num_slots));
  std::iota(expert_of_slot.begin(), expert_of_slot.begin() + n, 0);
  count->assign(static_cast<size_t>(n), 1);
  for (int s = n; s < num_slots; ++s) {
    int best = 0;
    for (int e = 1; e < n; ++e) {
      // w[e] / count[e] > w[best] / count[best], as cross products: no division, so equal
      // ratios such as 1/3 and 2/6 compare equal and fall to the tie-break.
      const double lhs = weights[static_cast<size_t>(e)] * (*count)[static_cast<size_t>(best)];
      const double rhs = weights[static_cast<size_t>(best)] * (*count)[static_cast<size_t>(e)];
      if (lhs > rhs ||
          (lhs == rhs && (*count)[static_cast<size_t>(e)] < (*count)[static_cast<size_t>(best)])) {
        best = e;
      }
    }
    expert_of_slot[static_cast<size_t>(s)] = best;
    ++(*count)[static_cast<size_t>(best)];
  }
  return expert_of_slot;
}

// One layer with the policy's grouping: groups/nodes are (num_groups, num_nodes) for the
// hierarchical policy and (1, 1) for the global one.
EplbLayerPlacement place_layer(const std::vector<double>& load, int num_replicas, int num_groups,
                               int num_nodes, int num_gpus) {
  const int num_experts = static_cast<int>(load.size());
  const int group_size = num_experts / num_groups;
  const int experts_per_node = num_experts / num_nodes;
  const int replicas_per_node = num_replicas / num_nodes;
  const int gpus_per_node = num_gpus / num_nodes;
  const int replicas_per_gpu = num_replicas / num_gpus;

  // 1. Groups onto nodes by their total load.
  std::vector<double> group_load(static_cast<size_t>(num_groups), 0.0);
  for (int e = 0; e < num_experts; ++e) {
    group_load[static_cast<size_t>(e / group_size)] += load[static_cast<size_t>(e)];
  }
  const Packing groups = pack_evenly(group_load, num_nodes);

  // The logical experts of each node: its groups in slot order, each group's experts ascending.
  std::vector<int> node_expert(static_cast<size_t>(num_experts));  // [node * experts_per_node + i]
  for (int g = 0; g < num_groups; ++g) {
    const int base = groups.bin[static_cast<size_t>(g)] * experts_per_node +
                     groups.slot[static_cast<size_t>(g)] * group_size;
    for (int i = 0; i < group_size; ++i) {
      node_expert[static_cast<size_t>(base + i)] = g * group_size + i;
    }
  }

  EplbLayerPlacement out;
  out.physical_to_logical.assign(static_cast<size_t>(num_replicas), -1);
  out.replica_count.assign(static_cast<size_t>(num_experts), 0);
  for (int node = 0; node < num_nodes; ++node) {
    // 2. Replicas inside the node.
    std::vector<double> local_load(static_cast<size_t>(experts_per_node));
    for (int i = 0; i < experts_per_node; ++i) {
      local_load[static_cast<size_t>(i)] =
          load[static_cast<size_t>(node_expert[static_cast<size_t>(node * experts_per_node + i)])];
    }
    std::vector<int> local_count;
    const std::vector<int> local_of_slot = replicate(local_load, replicas_per_node, &local_count);

    // 3. The node's physical experts onto its GPUs, by load per replica.
    std::vector<double> slot_load(static_cast<size_t>(replicas_per_node));
    for (int s = 0; s < replicas_per_node; ++s) {
      const int i = local_of_slot[static_cast<size_t>(s)];
      slot_load[static_cast<size_t>(s)] =
          local_load[static_cast<size_t>(i)] / local_count[static_cast<size_t>(i)];
    }
    const Packing gpus = pack_evenly(slot_load, gpus_per_node);
    for (int s = 0; s < replicas_per_node; ++s) {
      const int physical = node * replicas_per_node +
                           gpus.bin[static_cast<size_t>(s)] * replicas_per_gpu +
                           gpus.slot[static_cast<size_t>(s)];
      const int i = local_of_slot[static_cast<size_t>(s)];
      out.physical_to_logical[static_cast<size_t>(physical)] =
          node_expert[static_cast<size_t>(node * experts_per_node + i)];
    }
    for (int i = 0; i < experts_per_node; ++i) {
      out.replica_count[static_cast<size_t>(
          node_expert[static_cast<size_t>(node * experts_per_node + i)])] =
          local_count[static_cast<size_t>(i)];
    }
  }

  out.logical_to_physical.assign(static_cast<size_t>(num_experts), {});
  out.gpu_load.assign(static_cast<size_t>(num_gpus), 0.0);
  for (int p = 0; p < num_replicas; ++p) {
    const int e = out.physical_to_logical[static_cast<size_t>(p)];
    out.logical_to_physical[static_cast<size_t>(e)].push_back(p);
    out.gpu_load[static_cast<size_t>(p / replicas_per_gpu)] +=
        load[static_cast<size_t>(e)] / out.replica_count[static_cast<size_t>(e)];
  }
  return out;
}

std::string field_hint(const char* field, const std::string& problem, const std::string& fix) {
  return std::string("eplb config: ") + field + " " + problem + "; " + fix;
}

}  // namespace

Status EplbConfig::validate(int num_experts) const {
  const std::string n = std::to_string(num_experts);
  if (num_experts < 1) {
    return invalid_argument("eplb: the load has " + n + " experts per layer; need at least 1");
  }
  if (num_gpus < 1) {
    return invalid_argument(field_hint("num_gpus", "is " + std::to_string(num_gpus),
                                       "set it to the number of expert-parallel GPUs (>= 1)"));
  }
  if (num_nodes < 1 || num_gpus % num_nodes != 0) {
    return invalid_argument(
        field_hint("num_nodes",
                   "is " + std::to_string(num_nodes) + " with num_gpus " + std::to_string(num_gpus),
                   "it must be >= 1 and divide num_gpus (the same GPU count on every node)"));
  }
  if (num_groups < 1 || num_experts % num_groups != 0) {
    return invalid_argument(field_hint(
        "num_groups", "is " + std::to_string(num_groups) + " with " + n + " experts",
        "it must be >= 1 and divide the expert count (use 1 for a router without groups)"));
  }
  if (num_replicas < num_experts) {
    return invalid_argument(field_hint(
        "num_replicas", "is " + std::to_string(num_replicas) + ", fewer than the " + n + " experts",
        "every expert needs a slot: use " + n + " plus the redundant replicas"));
  }
  if (num_replicas % num_gpus != 0) {
    return invalid_argument(
        field_hint("num_replicas",
                   "is " + std::to_string(num_replicas) + ", not a multiple of num_gpus " +
                       std::to_string(num_gpus),
                   "every GPU holds the same number of physical experts; round it to a multiple"));
  }
  return Status();
}

Expected<EplbPlacement> rebalance(const std::vector<std::vector<double>>& load,
                                  const EplbConfig& config) {
  if (load.empty()) return invalid_argument("eplb: the load has no layers");
  const size_t num_experts = load.front().size();
  for (size_t l = 0; l < load.size(); ++l) {
    if (load[l].size() != num_experts) {
      return invalid_argument("eplb: layer " + std::to_string(l) + " of the load has " +
                              std::to_string(load[l].size()) + " experts, layer 0 has " +
                              std::to_string(num_experts) + "; every layer needs the same count");
    }
    for (size_t e = 0; e < num_experts; ++e) {
      if (!(load[l][e] >= 0.0) || !std::isfinite(load[l][e])) {
        return invalid_argument("eplb: load of layer " + std::to_string(l) + ", expert " +
                                std::to_string(e) + " is " + std::to_string(load[l][e]) +
                                "; loads must be finite and >= 0");
      }
    }
  }
  DI_TRY(config.validate(static_cast<int>(num_experts)));

  const bool hierarchical = config.hierarchical();
  const int groups = hierarchical ? config.num_groups : 1;
  const int nodes = hierarchical ? config.num_nodes : 1;
  EplbPlacement placement;
  placement.hierarchical = hierarchical;
  placement.num_gpus = config.num_gpus;
  placement.replicas_per_gpu = config.num_replicas / config.num_gpus;
  placement.layers.reserve(load.size());
  for (const std::vector<double>& layer : load) {
    placement.layers.push_back(
        place_layer(layer, config.num_replicas, groups, nodes, config.num_gpus));
  }
  return placement;
}

double balance(std::span<const double> gpu_load) {
  if (gpu_load.empty()) return 1.0;
  double sum = 0.0, max = 0.0;
  for (double x : gpu_load) {
    sum += x;
    max = std::max(max, x);
  }
  if (sum <= 0.0) return 1.0;
  return max / (sum / static_cast<double>(gpu_load.size()));
}

Expected<std::vector<double>> gpu_load(std::span<const double> load,
                                       const ExpertPlacement& placement) {
  DI_TRY(placement.validate());
  if (static_cast<size_t>(placement.num_experts()) != load.size()) {
    return invalid_argument("eplb: the placement has " + std::to_string(placement.num_experts()) +
                            " experts, the load " + std::to_string(load.size()));
  }
  std::vector<double> out(static_cast<size_t>(placement.num_ranks), 0.0);
  for (size_t e = 0; e < load.size(); ++e) {
    const std::vector<int>& copies = placement.replicas[e];
    for (int r : copies)
      out[static_cast<size_t>(r)] += load[e] / static_cast<double>(copies.size());
  }
  return out;
}

Expected<std::vector<ExpertPlacement>> expert_placements(const EplbPlacement& plan) {
  std::vector<ExpertPlacement> out;
  out.reserve(plan.layers.size());
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const EplbLayerPlacement& layer = plan.layers[l];
    auto p = ExpertPlacement::from_physical(
        layer.physical_to_logical, static_cast<int>(layer.replica_count.size()), plan.num_gpus);
    if (!p.ok()) return p.status().with_context("eplb plan, layer " + std::to_string(l));
    out.push_back(std::move(*p));
  }
  return out;
}

// --- ExpertLoadCounter ---------------------------------------------------------------------

ExpertLoadCounter::ExpertLoadCounter(int num_layers, int num_experts)
    : num_layers_(std::max(num_layers, 0)),
      num_experts_(std::max(num_experts, 0)),
      counts_(new std::atomic<int64_t>[static_cast<size_t>(num_layers_) *
                                       static_cast<size_t>(num_experts_)]),
      history_(static_cast<size_t>(num_layers_) * static_cast<size_t>(num_experts_), 0.0) {
  for (size_t i = 0; i < history_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

Status ExpertLoadCounter::add(int layer, std::span<const int32_t> expert_ids) {
  if (layer < 0 || layer >= num_layers_) {
    return out_of_range("expert load counter: layer " + std::to_string(layer) + " outside 0.." +
                        std::to_string(num_layers_ - 1));
  }
  for (int32_t id : expert_ids) {
    if (id >= num_experts_) {
      return out_of_range("expert load counter: expert id " + std::to_string(id) + " in layer " +
                          std::to_string(layer) + " is >= the " + std::to_string(num_experts_) +
                          " experts (nothing of this call was counted)");
    }
  }
  std::atomic<int64_t>* row =
      &counts_[static_cast<size_t>(layer) * static_cast<size_t>(num_experts_)];
  for (int32_t id : expert_ids) {
    if (id >= 0) row[id].fetch_add(1, std::memory_order_relaxed);
  }
  return Status();
}

Status ExpertLoadCounter::add_counts(int layer, std::span<const int64_t> counts) {
  if (layer < 0 || layer >= num_layers_) {
    return out_of_range("expert load counter: layer " + std::to_string(layer) + " outside 0.." +
                        std::to_string(num_layers_ - 1));
  }
  if (counts.size() != static_cast<size_t>(num_experts_)) {
    return invalid_argument("expert load counter: " + std::to_string(counts.size()) +
                            " counts for " + std::to_string(num_experts_) + " experts");
  }
  for (size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] < 0) {
      return invalid_argument("expert load counter: count " + std::to_string(counts[e]) +
                              " for expert " + std::to_string(e) + " is negative");
    }
  }
  std::atomic<int64_t>* row =
      &counts_[static_cast<size_t>(layer) * static_cast<size_t>(num_experts_)];
  for (size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] != 0) row[e].fetch_add(counts[e], std::memory_order_relaxed);
  }
  return Status();
}

std::vector<std::vector<double>> ExpertLoadCounter::snapshot() const {
  std::vector<std::vector<double>> out(static_cast<size_t>(num_layers_));
  std::lock_guard<std::mutex> lock(history_mutex_);
  for (int l = 0; l < num_layers_; ++l) {
    std::vector<double>& row = out[static_cast<size_t>(l)];
    row.resize(static_cast<size_t>(num_experts_));
    for (int e = 0; e < num_experts_; ++e) {
      const size_t i =
          static_cast<size_t>(l) * static_cast<size_t>(num_experts_) + static_cast<size_t>(e);
      row[static_cast<size_t>(e)] =
          history_[i] + static_cast<double>(counts_[i].load(std::memory_order_relaxed));
    }
  }
  return out;
}

Status ExpertLoadCounter::decay(double factor) {
  if (!(factor >= 0.0 && factor <= 1.0)) {
    return invalid_argument("expert load counter: decay factor " + std::to_string(factor) +
                            " outside [0, 1]");
  }
  std::lock_guard<std::mutex> lock(history_mutex_);
  for (size_t i = 0; i < history_.size(); ++i) {
    const int64_t fresh = counts_[i].exchange(0, std::memory_order_relaxed);
    history_[i] = (history_[i] + static_cast<double>(fresh)) * factor;
  }
  return Status();
}

void ExpertLoadCounter::reset() {
  std::lock_guard<std::mutex> lock(history_mutex_);
  for (size_t i = 0; i < history_.size(); ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
    history_[i] = 0.0;
  }
}

}  // namespace deepinfer::parallel
