// ExpertRebalancer (expert_rebalancer.h): the EPLB options, the load window and the plans.
#include "runtime/expert_rebalancer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/check.h"
#include "runtime/core_grid.h"

namespace deepinfer::runtime {

namespace {

// The ranks the routed experts are split over: every core, data-parallel ranks x the
// tensor- or context-parallel cores of each (context x tensor in a grid).
int expert_ranks(const EngineOptions& o) {
  return GridShape::of(o).cores() * std::max(1, o.data_parallel_size);
}

// The policy's config for in-process ranks: one node (the ranks share its memory), and one group
// (V4's configs route without expert groups), so a single global pass.
parallel::EplbConfig eplb_config(const EngineOptions& o, const io::ModelConfig& c) {
  parallel::EplbConfig e;
  e.num_replicas = c.n_routed_experts + o.num_redundant_experts;
  e.num_groups = 1;
  e.num_nodes = 1;
  e.num_gpus = expert_ranks(o);
  return e;
}

// balance() per layer, averaged over the layers (what bench/parallel/eplb_bench reports).
double mean_balance(const std::vector<std::vector<double>>& gpu_loads) {
  if (gpu_loads.empty()) return 1.0;
  double sum = 0;
  for (const auto& g : gpu_loads) sum += parallel::balance(g);
  return sum / static_cast<double>(gpu_loads.size());
}

}  // namespace

Status validate_eplb_options(const EngineOptions& o, const io::ModelConfig* config) {
  if (!o.enable_eplb) {
    if (o.num_redundant_experts != 0) {
      return invalid_argument("num_redundant_experts (--num-redundant-experts) is " +
                              std::to_string(o.num_redundant_experts) +
                              ": redundant experts are EPLB's replicas; give enable_eplb "
                              "(--enable-eplb) too, or leave it at 0");
    }
    return Status::ok_status();
  }
  if (expert_ranks(o) < 2 || !o.enable_expert_parallel) {
    return invalid_argument(
        "enable_eplb (--enable-eplb) balances experts split over ranks: give "
        "enable_expert_parallel (--enable-expert-parallel) with data_parallel_size "
        "(--data-parallel-size) or tensor_parallel_size (--tensor-parallel-size) >= 2 (now " +
        std::string(o.enable_expert_parallel ? "on" : "off") + " and " +
        std::to_string(expert_ranks(o)) + "), or leave EPLB off");
  }
  if (o.num_redundant_experts < 0) {
    return invalid_argument("num_redundant_experts (--num-redundant-experts) is " +
                            std::to_string(o.num_redundant_experts) + ": give 0 or more");
  }
  if (o.eplb_step_interval < 0) {
    return invalid_argument("eplb_step_interval (--eplb-step-interval) is " +
                            std::to_string(o.eplb_step_interval) +
                            ": give the engine steps between rebalances, or 0 to rebalance only "
                            "on rebalance_experts()");
  }
  if (o.eplb_window_size < 1) {
    return invalid_argument("eplb_window_size (--eplb-window-size) is " +
                            std::to_string(o.eplb_window_size) +
                            ": give the engine steps of expert load to plan from, 1 or more");
  }
  if (config == nullptr) return Status::ok_status();
  const int experts = config->n_routed_experts;
  const int ranks = expert_ranks(o);
  const int slots = experts + o.num_redundant_experts;
  if (slots % ranks != 0) {
    const int up = (slots + ranks - 1) / ranks * ranks - experts;
    return invalid_argument("num_redundant_experts (--num-redundant-experts) " +
                            std::to_string(o.num_redundant_experts) + ": the " +
                            std::to_string(experts) + " routed experts of " + config->source +
                            " plus the redundant ones (" + std::to_string(slots) +
                            " slots) must split evenly over the " + std::to_string(ranks) +
                            " expert-parallel ranks; give " + std::to_string(up) +
                            " (or that plus a multiple of " + std::to_string(ranks) + ")");
  }
  return Status::ok_status();
}

ExpertRebalancer::ExpertRebalancer(const EngineOptions& o, const io::ModelConfig& c)
    : eplb_(eplb_config(o, c)),
      num_layers_(static_cast<int>(c.layers.size())),
      num_experts_(c.n_routed_experts),
      step_interval_(o.eplb_step_interval),
      counter_(static_cast<int>(c.layers.size()), c.n_routed_experts),
      sum_(c.layers.size() * static_cast<size_t>(c.n_routed_experts), 0) {
  ring_.resize(static_cast<size_t>(o.eplb_window_size));
}

Expected<std::unique_ptr<ExpertRebalancer>> ExpertRebalancer::create(
    const EngineOptions& options, const io::ModelConfig& config) {
  DI_TRY(validate_eplb_options(options, &config));
  DI_CHECK(options.enable_eplb);
  auto r = std::unique_ptr<ExpertRebalancer>(new ExpertRebalancer(options, config));
  // No counts yet: the policy on a uniform load (every expert equally hot), so the redundant
  // slots and the packing start from something the plan format already describes.
  const std::vector<std::vector<double>> uniform(
      static_cast<size_t>(r->num_layers_),
      std::vector<double>(static_cast<size_t>(r->num_experts_), 1.0));
  DI_ASSIGN_OR_RETURN(const parallel::EplbPlacement plan, parallel::rebalance(uniform, r->eplb_));
  DI_ASSIGN_OR_RETURN(r->placements_, parallel::expert_placements(plan));
  return r;
}

bool ExpertRebalancer::end_step() {
  // No rank is in a forward: nothing adds while the step's counts are taken.
  const std::vector<std::vector<double>> step = counter_.snapshot();
  counter_.reset();
  std::vector<int32_t>& row = ring_[next_];
  if (row.empty()) row.assign(sum_.size(), 0);
  size_t i = 0;
  for (const auto& layer : step) {
    for (double count : layer) {
      sum_[i] += static_cast<int64_t>(count) - row[i];
      row[i] = static_cast<int32_t>(count);
      ++i;
    }
  }
  next_ = (next_ + 1) % ring_.size();
  filled_ = std::min(filled_ + 1, ring_.size());
  ++steps_since_;
  return step_interval_ > 0 && steps_since_ >= step_interval_;
}

std::vector<std::vector<double>> ExpertRebalancer::window_load() const {
  std::vector<std::vector<double>> load(static_cast<size_t>(num_layers_));
  for (size_t l = 0; l < load.size(); ++l) {
    const auto first = sum_.begin() + static_cast<std::ptrdiff_t>(l * num_experts_);
    load[l].assign(first, first + num_experts_);
  }
  return load;
}

Expected<ExpertRebalancer::Plan> ExpertRebalancer::plan() const {
  const std::vector<std::vector<double>> load = window_load();
  DI_ASSIGN_OR_RETURN(const parallel::EplbPlacement eplb, parallel::rebalance(load, eplb_));
  Plan p;
  DI_ASSIGN_OR_RETURN(p.placements, parallel::expert_placements(eplb));
  std::vector<std::vector<double>> before, after;
  for (size_t l = 0; l < load.size(); ++l) {
    DI_ASSIGN_OR_RETURN(std::vector<double> g, parallel::gpu_load(load[l], placements_[l]));
    before.push_back(std::move(g));
    after.push_back(eplb.layers[l].gpu_load);
  }
  p.balance_before = mean_balance(before);
  p.balance_after = mean_balance(after);
  return p;
}

void ExpertRebalancer::adopt(std::vector<parallel::ExpertPlacement> placements) {
  placements_ = std::move(placements);
  steps_since_ = 0;
}

}  // namespace deepinfer::runtime
