// Expert placements with replicas (EPLB's redundant copies) and the weighted dispatch with the
// expert-order combine that the model's expert parallelism uses (model/layers/moe_ep.h): the
// result must be the same bits as a serial sum in ascending expert id for 1-4 ranks, any token
// split, any placement with or without replicas; skipped pairs (id -1) are not sent; an EPLB
// plan turns into placements; a placement that leaves an expert out is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "parallel/ep_dispatch.h"
#include "parallel/eplb.h"
#include "parallel/in_process_communicator.h"

namespace deepinfer::parallel {
namespace {

constexpr int kExperts = 8;
constexpr int kTopK = 3;
constexpr int64_t kHidden = 8;

struct Batch {
  int64_t num_tokens = 0;
  std::vector<float> tokens;        // [num_tokens, kHidden]
  std::vector<int32_t> expert_ids;  // [num_tokens, kTopK], distinct per token; some -1
  std::vector<float> weights;       // [num_tokens, kTopK]
};

Batch make_batch(int64_t num_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f), weight(0.01f, 1.0f);
  Batch b;
  b.num_tokens = num_tokens;
  for (int64_t i = 0; i < num_tokens * kHidden; ++i) b.tokens.push_back(value(rng));
  std::vector<int32_t> experts(kExperts);
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);  // top-k order is not id order
    for (int k = 0; k < kTopK; ++k) {
      b.expert_ids.push_back(rng() % 11 == 0 ? -1 : experts[static_cast<size_t>(k)]);
      b.weights.push_back(weight(rng));
    }
  }
  return b;
}

// The toy expert applies the weight itself (as the official semantics do before w2).
float toy_expert(int e, float w, float x) { return (x * (0.75f + 0.3125f * e) - 0.1f * e) * w; }

// Serial reference: per token, its experts in ascending id, summed from zero.
std::vector<float> serial_in_expert_order(const Batch& b) {
  std::vector<float> out(static_cast<size_t>(b.num_tokens * kHidden), 0.0f);
  for (int64_t t = 0; t < b.num_tokens; ++t) {
    std::vector<int> order(kTopK);
    std::iota(order.begin(), order.end(), 0);
    const int32_t* ids = b.expert_ids.data() + t * kTopK;
    std::stable_sort(order.begin(), order.end(), [&](int p, int q) { return ids[p] < ids[q]; });
    for (int k : order) {
      if (ids[k] < 0) continue;
      for (int64_t h = 0; h < kHidden; ++h) {
        out[static_cast<size_t>(t * kHidden + h)] +=
            toy_expert(ids[k], b.weights[static_cast<size_t>(t * kTopK + k)],
                       b.tokens[static_cast<size_t>(t * kHidden + h)]);
      }
    }
  }
  return out;
}

// Runs the batch on n ranks (rank r holds tokens [split[r], split[r + 1])); counts the rows
// each rank served.
std::vector<float> run_ep(const Batch& b, int n, const std::vector<int64_t>& split,
                          const ExpertPlacement& placement, std::vector<int64_t>* served) {
  std::vector<float> out(static_cast<size_t>(b.num_tokens * kHidden), -1.0f);
  served->assign(static_cast<size_t>(n), 0);
  const std::vector<Status> statuses = run_ranks(n, [&](Communicator& comm) -> Status {
    const int r = comm.rank();
    const int64_t begin = split[static_cast<size_t>(r)],
                  mine = split[static_cast<size_t>(r) + 1] - begin;
    const auto pairs = [&](const auto& v) {
      return std::span(v).subspan(static_cast<size_t>(begin * kTopK),
                                  static_cast<size_t>(mine * kTopK));
    };
    EpDispatcher dispatcher(comm, placement, kHidden);
    DispatchedRows rows;
    for (int round = 0; round < 2; ++round) {  // a dispatcher is reused across calls
      DI_TRY(dispatcher.dispatch_weighted(
          std::span(b.tokens).subspan(static_cast<size_t>(begin * kHidden),
                                      static_cast<size_t>(mine * kHidden)),
          mine, kTopK, pairs(b.expert_ids), pairs(b.weights), &rows));
      if (rows.weights.size() != rows.expert_ids.size()) return internal_error("weights lost");
      std::vector<float> y(rows.rows.size());
      for (int64_t row = 0; row < rows.num_rows(); ++row) {
        const int e = rows.expert_ids[static_cast<size_t>(row)];
        if (!placement.holds(r, e)) return internal_error("row for an expert not held");
        for (int64_t h = 0; h < kHidden; ++h) {
          const size_t at = static_cast<size_t>(row * kHidden + h);
          y[at] = toy_expert(e, rows.weights[static_cast<size_t>(row)], rows.rows[at]);
        }
      }
      (*served)[static_cast<size_t>(r)] = rows.num_rows();
      DI_TRY(dispatcher.combine_in_expert_order(
          y, std::span(out).subspan(static_cast<size_t>(begin * kHidden),
                                    static_cast<size_t>(mine * kHidden))));
    }
    return Status();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok())
        << "rank " << r << ": " << statuses[static_cast<size_t>(r)].to_string();
  }
  return out;
}

// Every expert on every rank, and a few doubled copies on one rank.
ExpertPlacement replicated(int n) {
  ExpertPlacement p;
  p.num_ranks = n;
  for (int e = 0; e < kExperts; ++e) {
    std::vector<int> copies;
    for (int r = 0; r < n; ++r) copies.push_back((e + r) % n);
    if (e % 3 == 0) copies.push_back(e % n);  // two copies on one rank
    p.replicas.push_back(copies);
  }
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EpReplicas, ExpertOrderCombineIsTheSerialSumForEveryPlacement) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const Batch batch = make_batch(19 + seed % 4, seed);
    const std::vector<float> expected = serial_in_expert_order(batch);
    for (int n : {1, 2, 3, 4}) {
      std::vector<int64_t> split = {0};
      for (int r = 1; r < n; ++r) split.push_back(std::min<int64_t>(batch.num_tokens, 7 * r));
      split.push_back(batch.num_tokens);
      std::vector<int64_t> lopsided = {0};  // every token on rank 0, none elsewhere
      for (int r = 0; r < n; ++r) lopsided.push_back(batch.num_tokens);
      for (const auto& s : {split, lopsided}) {
        for (const ExpertPlacement& placement :
             {ExpertPlacement::contiguous(kExperts, n), replicated(n)}) {
          std::vector<int64_t> served;
          const std::vector<float> got = run_ep(batch, n, s, placement, &served);
          EXPECT_TRUE(same_bits(got, expected)) << "seed " << seed << ", " << n << " ranks";
        }
      }
    }
  }
}

TEST(EpReplicas, CopiesShareTheLoad) {
  // Every expert on both ranks: the (token + k) choice sends each rank about half the pairs.
  const Batch batch = make_batch(40, 7);
  ExpertPlacement both;
  both.num_ranks = 2;
  both.replicas.assign(kExperts, {0, 1});
  std::vector<int64_t> served;
  run_ep(batch, 2, {0, 20, 40}, both, &served);
  const int64_t total = served[0] + served[1];
  EXPECT_GT(served[0], total / 3);
  EXPECT_GT(served[1], total / 3);
}

TEST(EpReplicas, PlacementFromAnEplbPlan) {
  // Expert 0 is hot: the plan gives it spare slots, and the placement lists them.
  std::vector<std::vector<double>> load = {{100, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 50}};
  EplbConfig config;
  config.num_replicas = 12;
  config.num_gpus = 4;
  auto plan = rebalance(load, config);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto placements = expert_placements(*plan);
  ASSERT_TRUE(placements.ok()) << placements.status().to_string();
  ASSERT_EQ(placements->size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    const ExpertPlacement& p = (*placements)[l];
    EXPECT_TRUE(p.validate().ok());
    EXPECT_EQ(p.num_ranks, 4);
    for (int e = 0; e < kExperts; ++e) {
      EXPECT_EQ(static_cast<int>(p.replicas[static_cast<size_t>(e)].size()),
                plan->layers[l].replica_count[static_cast<size_t>(e)]);
    }
  }
  EXPECT_GT((*placements)[0].replicas[0].size(), 1u);
  EXPECT_GT((*placements)[1].replicas[7].size(), 1u);
}

TEST(EpReplicas, ErrorsNameTheProblem) {
  ExpertPlacement gap = ExpertPlacement::contiguous(kExperts, 2);
  gap.replicas[5].clear();
  EXPECT_NE(gap.validate().message().find("expert 5 is held by no rank"), std::string::npos)
      << gap.validate().to_string();
  const std::vector<int32_t> slots = {0, 1, 2};
  EXPECT_NE(ExpertPlacement::from_physical(slots, 3, 2).status().message().find("spread evenly"),
            std::string::npos);
  const std::vector<int32_t> missing = {0, 0, 1, 1};
  EXPECT_NE(ExpertPlacement::from_physical(missing, 3, 2)
                .status()
                .message()
                .find("expert 2 is held by no rank"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::parallel
