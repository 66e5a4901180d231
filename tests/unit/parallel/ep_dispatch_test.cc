// Expert-parallel dispatch/combine with a toy expert (a per-expert scale and shift): the
// combined output of every token must be bit-identical to a serial computation, for 1, 2, 3 and
// 4 ranks, any split of the tokens over the ranks (some ranks with none), and both a contiguous
// and a strided expert placement.
#include "parallel/ep_dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "parallel/in_process_communicator.h"

namespace deepinfer::parallel {
namespace {

constexpr int kExperts = 8;
constexpr int kTopK = 3;
constexpr int64_t kHidden = 16;

struct Batch {
  int64_t num_tokens = 0;
  std::vector<float> tokens;        // [num_tokens, kHidden]
  std::vector<int32_t> expert_ids;  // [num_tokens, kTopK], distinct per token
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
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int k = 0; k < kTopK; ++k) {
      b.expert_ids.push_back(experts[static_cast<size_t>(k)]);
      b.weights.push_back(weight(rng));
    }
  }
  return b;
}

// The toy expert e: y = x * scale(e) + shift(e); per row, so its bits do not depend on batching.
float expert_scale(int e) { return 0.75f + 0.3125f * static_cast<float>(e); }
float expert_shift(int e) { return -0.1f * static_cast<float>(e); }

// Serial reference: out[t] = sum over k in order of w[t, k] * expert(ids[t, k], x[t]), from 0.
std::vector<float> serial_moe(const Batch& b) {
  std::vector<float> out(static_cast<size_t>(b.num_tokens * kHidden), 0.0f);
  for (int64_t t = 0; t < b.num_tokens; ++t) {
    for (int k = 0; k < kTopK; ++k) {
      const int e = b.expert_ids[static_cast<size_t>(t * kTopK + k)];
      const float w = b.weights[static_cast<size_t>(t * kTopK + k)];
      for (int64_t h = 0; h < kHidden; ++h) {
        const float y =
            b.tokens[static_cast<size_t>(t * kHidden + h)] * expert_scale(e) + expert_shift(e);
        out[static_cast<size_t>(t * kHidden + h)] += w * y;
      }
    }
  }
  return out;
}

// Runs the batch on n ranks; rank r holds tokens [split[r], split[r + 1]).
std::vector<float> expert_parallel_moe(const Batch& b, int n, const std::vector<int64_t>& split,
                                       const ExpertPlacement& placement, int* layout_errors) {
  std::vector<float> out(static_cast<size_t>(b.num_tokens * kHidden), -1.0f);
  std::vector<int> errors(static_cast<size_t>(n), 0);
  const std::vector<Status> statuses = run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const int64_t begin = split[static_cast<size_t>(r)], end = split[static_cast<size_t>(r) + 1];
    const int64_t mine = end - begin;
    EpDispatcher dispatcher(comm, placement, kHidden);
    DispatchedRows rows;
    DI_TRY(dispatcher.dispatch(
        std::span<const float>(b.tokens).subspan(static_cast<size_t>(begin * kHidden),
                                                 static_cast<size_t>(mine * kHidden)),
        mine, kTopK,
        std::span<const int32_t>(b.expert_ids)
            .subspan(static_cast<size_t>(begin * kTopK), static_cast<size_t>(mine * kTopK)),
        &rows));
    // The experts: one segment per local expert, every row of it for that expert.
    std::vector<float> y(rows.rows.size());
    for (size_t i = 0; i < rows.local_experts.size(); ++i) {
      const int e = rows.local_experts[i];
      errors[static_cast<size_t>(r)] += !placement.holds(r, e);
      for (int64_t row = rows.expert_offsets[i]; row < rows.expert_offsets[i + 1]; ++row) {
        errors[static_cast<size_t>(r)] += rows.expert_ids[static_cast<size_t>(row)] != e;
        for (int64_t h = 0; h < kHidden; ++h) {
          const size_t at = static_cast<size_t>(row * kHidden + h);
          y[at] = rows.rows[at] * expert_scale(e) + expert_shift(e);
        }
      }
    }
    errors[static_cast<size_t>(r)] += rows.expert_offsets.back() != rows.num_rows();
    return dispatcher.combine(
        y,
        std::span<const float>(b.weights).subspan(static_cast<size_t>(begin * kTopK),
                                                  static_cast<size_t>(mine * kTopK)),
        std::span<float>(out).subspan(static_cast<size_t>(begin * kHidden),
                                      static_cast<size_t>(mine * kHidden)));
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok())
        << "rank " << r << ": " << statuses[static_cast<size_t>(r)].to_string();
    *layout_errors += errors[static_cast<size_t>(r)];
  }
  return out;
}

ExpertPlacement strided(int n) {
  ExpertPlacement p;
  p.num_ranks = n;
  for (int e = 0; e < kExperts; ++e) p.replicas.push_back({(e * 3 + 1) % n});
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EpDispatch, SameBitsForEveryRankCountSplitAndPlacement) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const Batch batch = make_batch(23 + seed % 5, seed);
    const std::vector<float> expected = serial_moe(batch);
    for (int n : {1, 2, 3, 4}) {
      // Uneven splits; the second leaves the last rank (or all but one) without tokens.
      std::mt19937 rng(seed * 31u + static_cast<uint32_t>(n));
      std::vector<std::vector<int64_t>> splits;
      std::vector<int64_t> random_split = {0};
      for (int r = 1; r < n; ++r)
        random_split.push_back(static_cast<int64_t>(rng() % (batch.num_tokens + 1)));
      random_split.push_back(batch.num_tokens);
      std::sort(random_split.begin(), random_split.end());
      splits.push_back(random_split);
      std::vector<int64_t> lopsided = {0};
      for (int r = 0; r < n; ++r) lopsided.push_back(batch.num_tokens);
      splits.push_back(lopsided);
      for (const auto& split : splits) {
        for (const ExpertPlacement& placement :
             {ExpertPlacement::contiguous(kExperts, n), strided(n)}) {
          int layout_errors = 0;
          const std::vector<float> got =
              expert_parallel_moe(batch, n, split, placement, &layout_errors);
          EXPECT_EQ(layout_errors, 0);
          EXPECT_TRUE(same_bits(got, expected)) << "seed " << seed << ", " << n << " ranks";
        }
      }
    }
  }
}

TEST(EpDispatch, BadExpertIdFailsWithAMessage) {
  const std::vector<Status> statuses = run_ranks(2, [](Communicator& comm) {
    EpDispatcher dispatcher(comm, ExpertPlacement::contiguous(kExperts, 2), 2);
    const std::vector<float> tokens = {1.0f, 2.0f};
    const std::vector<int32_t> ids = {comm.rank() == 0 ? kExperts : 0};
    DispatchedRows rows;
    return dispatcher.dispatch(tokens, 1, 1, ids, &rows);
  });
  EXPECT_NE(statuses[0].message().find("routes to expert 8"), std::string::npos)
      << statuses[0].to_string();
  EXPECT_FALSE(statuses[1].ok());  // its peer never came: the group reports rank 0 as gone
}

TEST(EpDispatch, PlacementMustMatchTheGroup) {
  const std::vector<Status> statuses = run_ranks(2, [](Communicator& comm) {
    EpDispatcher dispatcher(comm, ExpertPlacement::contiguous(kExperts, 4), 2);
    DispatchedRows rows;
    return dispatcher.dispatch({}, 0, 1, {}, &rows);
  });
  for (const Status& s : statuses)
    EXPECT_NE(s.message().find("placement is for 4 ranks"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::parallel
