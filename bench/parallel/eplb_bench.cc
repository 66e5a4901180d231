// eplb_bench: how even EPLB makes the per-GPU expert load, at V4-Flash's shape (256 routed
// experts, 43 MoE layers, no expert groups: the config has no n_group field), for 2, 4, 8 and
// 16 GPUs with 32 redundant experts (288 physical), next to the no-replica peers: round-robin
// (expert e on GPU e % G) and contiguous (ExpertPlacement::contiguous, what EpDispatcher uses).
//
// The loads are synthetic: per layer a Zipf law, load(rank r) = 1 / (r + 1)^s, with the ranks
// shuffled differently per layer (Fisher-Yates on a fixed splitmix64 stream, so every run and
// platform prints the same), so neither peer is favoured by hot experts sitting at low ids.
// s = 0 is uniform; no measured V4 expert histogram is in the repository yet. Prints, per case,
// the mean and worst balance over the layers, EPLB with no redundant experts (packing only), and
// the ratio of the round-robin peer's mean to EPLB's; `--csv PATH` writes the same rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "parallel/eplb.h"

namespace {

using deepinfer::parallel::balance;
using deepinfer::parallel::EplbConfig;
using deepinfer::parallel::ExpertPlacement;

constexpr int kExperts = 256;
constexpr int kLayers = 43;
constexpr int kRedundant = 32;

struct Stat {
  double mean = 0.0, worst = 0.0;
  void add(double b) {
    mean += b / kLayers;
    worst = std::max(worst, b);
  }
};

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<std::vector<double>> zipf_load(double s) {
  std::vector<std::vector<double>> load(kLayers, std::vector<double>(kExperts));
  uint64_t state = 2026;
  std::vector<int> rank(kExperts);
  for (int l = 0; l < kLayers; ++l) {
    for (int e = 0; e < kExperts; ++e) rank[static_cast<size_t>(e)] = e;
    for (int i = kExperts - 1; i > 0; --i) {
      const auto j = static_cast<size_t>(splitmix64(&state) % static_cast<uint64_t>(i + 1));
      std::swap(rank[static_cast<size_t>(i)], rank[j]);
    }
    for (int e = 0; e < kExperts; ++e) {
      load[static_cast<size_t>(l)][static_cast<size_t>(e)] =
          1.0 / std::pow(rank[static_cast<size_t>(e)] + 1.0, s);
    }
  }
  return load;
}

Stat plan_balance(const std::vector<std::vector<double>>& load, const EplbConfig& config) {
  auto plan = deepinfer::parallel::rebalance(load, config);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", plan.status().to_string().c_str());
    std::exit(1);
  }
  Stat st;
  for (const auto& layer : plan->layers) st.add(balance(layer.gpu_load));
  return st;
}

Stat peer(const std::vector<std::vector<double>>& load, const ExpertPlacement& placement) {
  Stat st;
  for (const auto& layer : load) {
    st.add(balance(*deepinfer::parallel::gpu_load(layer, placement)));
  }
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  std::FILE* csv = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
      csv = std::fopen(argv[++i], "w");
      if (csv == nullptr) {
        std::fprintf(stderr, "eplb_bench: cannot write %s\n", argv[i]);
        return 1;
      }
    } else {
      std::fprintf(stderr, "usage: eplb_bench [--csv PATH]\n");
      return 2;
    }
  }
  if (csv != nullptr) {
    std::fprintf(csv,
                 "gpus,nodes,zipf_s,eplb_mean,eplb_max,packing_only_mean,rr_mean,rr_max,"
                 "contiguous_mean,rr_over_eplb\n");
  }
  std::printf(
      "EPLB balance (max/mean GPU load; 1.00 = perfect), %d experts + %d redundant "
      "(+0: none, packing only), %d layers, Zipf(s) loads; rr: round-robin, ctg: "
      "contiguous, no replicas\n",
      kExperts, kRedundant, kLayers);
  std::printf("%4s %5s %5s | %9s %9s | %9s | %9s %9s | %9s | %7s\n", "gpus", "nodes", "s",
              "eplb mean", "eplb max", "+0 mean", "rr mean", "rr max", "ctg mean", "rr/eplb");
  for (double s : {0.0, 0.5, 0.8, 1.0, 1.2}) {
    const auto load = zipf_load(s);
    for (int gpus : {2, 4, 8, 16}) {
      EplbConfig config;
      config.num_replicas = kExperts + kRedundant;
      config.num_groups = 1;
      config.num_nodes = gpus > 8 ? gpus / 8 : 1;
      config.num_gpus = gpus;
      const Stat eplb = plan_balance(load, config);
      EplbConfig no_redundant = config;
      no_redundant.num_replicas = kExperts;
      const Stat packed = plan_balance(load, no_redundant);
      ExpertPlacement rr;
      rr.num_ranks = gpus;
      for (int e = 0; e < kExperts; ++e) rr.replicas.push_back({e % gpus});
      const Stat round_robin = peer(load, rr);
      const Stat contiguous = peer(load, ExpertPlacement::contiguous(kExperts, gpus));
      std::printf("%4d %5d %5.2f | %9.4f %9.4f | %9.4f | %9.4f %9.4f | %9.4f | %7.3f\n", gpus,
                  config.num_nodes, s, eplb.mean, eplb.worst, packed.mean, round_robin.mean,
                  round_robin.worst, contiguous.mean, round_robin.mean / eplb.mean);
      if (csv != nullptr) {
        std::fprintf(csv, "%d,%d,%.2f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", gpus, config.num_nodes,
                     s, eplb.mean, eplb.worst, packed.mean, round_robin.mean, round_robin.worst,
                     contiguous.mean, round_robin.mean / eplb.mean);
      }
    }
  }
  if (csv != nullptr) std::fclose(csv);
  return 0;
}
