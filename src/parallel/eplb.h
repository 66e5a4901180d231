// EPLB: expert-parallel load balancing. Where the routed experts of each MoE layer live, given
// how many tokens each expert received, and the counters that collect those numbers.
//
// The policy is the one DeepSeek published (github.com/deepseek-ai/EPLB), re-implemented here:
//   * extra physical slots (num_replicas - num_experts) become redundant replicas: one slot at a
//     time goes to the expert whose load per replica is currently the highest;
//   * physical experts are packed onto GPUs with the same number per GPU, heaviest first, each
//     to the lightest GPU that still has a free slot;
//   * hierarchical when num_groups % num_nodes == 0: expert groups are first packed onto nodes
//     (equal groups per node, by group load), replicas are made inside each node and packed onto
//     that node's GPUs, so a group's experts and all their replicas stay on one node (the routing
//     of a token limited to a few groups then crosses few nodes); otherwise one global pass, as if
//     there were a single group and a single node.
// A plan assumes an expert's tokens are split evenly over its replicas: the load of a physical
// expert is load[e] / replica_count[e], and a GPU's load is the sum over its physical experts.
//
// Everything is deterministic: no randomness, ties broken by the lower index (expert, group,
// GPU; a replica goes first to the expert with fewer replicas). Two replicas of one expert may land
// on the same GPU (the published packing allows it; that GPU then carries both halves, which the
// GPU loads account for).
//
// A plan is applied by turning it into per-layer ExpertPlacements (expert_placements() below),
// which the model takes at load (model/expert_parallel.h): each rank then loads the copies it
// holds and EpDispatcher spreads pairs over the copies. Moving weights between plans while
// serving, and deciding when to rebalance, are not done here; see docs/parallel.md, "EPLB".
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "base/status.h"
#include "parallel/ep_dispatch.h"

namespace deepinfer::parallel {

struct EplbConfig {
  int num_replicas = 0;  // physical experts per layer over all GPUs (>= logical experts)
  int num_groups = 1;    // expert groups of the router (1: no groups)
  int num_nodes = 1;     // servers; GPUs of one node share the fast interconnect
  int num_gpus = 1;      // total GPUs (expert-parallel ranks), a multiple of num_nodes

  // Every constraint, for a model with num_experts logical experts per layer; the message names
  // the field and how to fix it.
  Status validate(int num_experts) const;
  // Hierarchical when the groups divide over the nodes, else global.
  bool hierarchical() const { return num_nodes > 0 && num_groups % num_nodes == 0; }
};

// One layer's plan. Physical expert p lives on GPU p / replicas_per_gpu, slot p % replicas_per_gpu.
struct EplbLayerPlacement {
  std::vector<int32_t> physical_to_logical;  // [num_replicas]: the logical expert of each slot
  std::vector<int32_t> replica_count;        // [num_experts]: >= 1 each; sums to num_replicas
  // [num_experts][replica_count[e]]: the physical slots of expert e, ascending.
  std::vector<std::vector<int32_t>> logical_to_physical;
  std::vector<double> gpu_load;  // [num_gpus]: the load this plan puts on each GPU
};

struct EplbPlacement {
  bool hierarchical = false;  // which policy made it
  int num_gpus = 0;
  int replicas_per_gpu = 0;
  std::vector<EplbLayerPlacement> layers;

  int gpu_of(int physical) const { return physical / replicas_per_gpu; }
};

// load: [layers][logical experts], tokens (or any non-negative weight) per expert; every layer
// the same size. A layer of all zeros gets a valid plan (no replication decisions matter).
Expected<EplbPlacement> rebalance(const std::vector<std::vector<double>>& load,
                                  const EplbConfig& config);

// Max GPU load over mean GPU load: 1.0 is perfect; an all-zero (or empty) load counts as 1.0.
double balance(std::span<const double> gpu_load);

// The per-GPU load of an ExpertPlacement, each expert's load split evenly over its copies (a
// contiguous or round-robin placement is the peer a plan is compared with). load: [num_experts]
// of one layer.
Expected<std::vector<double>> gpu_load(std::span<const double> load,
                                       const ExpertPlacement& placement);

// The plan as one ExpertPlacement per layer: slot p of a layer on rank plan.gpu_of(p). What a
// model loads with (model::ExpertParallel::placements); plan.num_gpus must be the rank count.
Expected<std::vector<ExpertPlacement>> expert_placements(const EplbPlacement& plan);

// Routed tokens per logical expert and layer, counted while serving.
//
// Thread safety: any number of threads may call add()/add_counts() (on the same or different
// layers) concurrently with each other and with snapshot(), decay() and reset(); counts are
// relaxed atomics, and decay() takes each count with an atomic exchange, so no token added
// concurrently is lost (it lands before or after the fold; reset() drops everything, whatever
// races it). A snapshot taken while writers run is exact per expert, not one instant across
// experts. Negative sizes are treated as 0.
class ExpertLoadCounter {
 public:
  ExpertLoadCounter(int num_layers, int num_experts);

  int num_layers() const { return num_layers_; }
  int num_experts() const { return num_experts_; }

  // One count per entry of expert_ids (e.g. a batch's [tokens, top_k] routing); ids < 0 (padding,
  // dropped) are skipped. An id >= num_experts or a bad layer is an error and counts nothing.
  Status add(int layer, std::span<const int32_t> expert_ids);
  // Adds a histogram: counts[e] tokens to expert e (e.g. the device's per-expert counts).
  Status add_counts(int layer, std::span<const int64_t> counts);

  // [layers][experts]: the decayed history plus everything added since the last decay.
  std::vector<std::vector<double>> snapshot() const;
  // history = (history + new counts) * factor, factor in [0, 1]: an exponential moving window
  // when called once per period. decay(0) is reset().
  Status decay(double factor);
  void reset();

 private:
  int num_layers_;
  int num_experts_;
  std::unique_ptr<std::atomic<int64_t>[]> counts_;  // [layers * experts], since the last fold
  mutable std::mutex history_mutex_;
  std::vector<double> history_;  // [layers * experts], guarded by history_mutex_
};

}  // namespace deepinfer::parallel
