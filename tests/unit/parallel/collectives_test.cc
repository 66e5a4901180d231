// Every collective of InProcessCommunicator with 1..4 ranks against a serial reference, bit for
// bit. The FP32 data spans many magnitudes, so a sum taken in another order than rank order
// gives other bits (RankOrderMatters checks that the data really is that sensitive).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "parallel/in_process_communicator.h"

namespace deepinfer::parallel {
namespace {

// Values whose sums depend on the order: random signs, magnitudes from 2^-20 to 2^20.
std::vector<float> order_sensitive_values(int rank, int64_t count, uint32_t seed) {
  std::mt19937 rng(seed * 1000003u + static_cast<uint32_t>(rank));
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
  return v;
}

// The serial reference: element i is ((v[0][i] + v[1][i]) + v[2][i]) + ...
std::vector<float> rank_order_sum(const std::vector<std::vector<float>>& per_rank, int64_t begin,
                                  int64_t count) {
  std::vector<float> sum(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    float acc = per_rank[0][static_cast<size_t>(begin + i)];
    for (size_t r = 1; r < per_rank.size(); ++r) acc += per_rank[r][static_cast<size_t>(begin + i)];
    sum[static_cast<size_t>(i)] = acc;
  }
  return sum;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_all_ok(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].to_string();
  }
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST(RankOrderSum, RankOrderMatters) {
  // The data of these tests must be able to tell rank order from any other: with 4 ranks,
  // summing 3, 2, 1, 0 gives other bits for some element.
  std::vector<std::vector<float>> v;
  for (int r = 0; r < 4; ++r) v.push_back(order_sensitive_values(r, 64, 7));
  const std::vector<float> forward = rank_order_sum(v, 0, 64);
  std::vector<std::vector<float>> reversed(v.rbegin(), v.rend());
  EXPECT_FALSE(same_bits(forward, rank_order_sum(reversed, 0, 64)));
  // The classic case: (1 + 2^30) - 2^30 = 0 in FP32, 1 + (2^30 - 2^30) = 1.
  const float a = 1.0f, b = 1073741824.0f, c = -1073741824.0f;
  const void* parts[] = {&a, &b, &c};
  float out = -1.0f;
  ASSERT_TRUE(sum_in_rank_order(parts, 1, DType::kF32, &out).ok());
  EXPECT_EQ(out, 0.0f);
}

TEST_P(Collectives, AllReduceSumF32InRankOrder) {
  const int n = GetParam();
  const int64_t count = 257;
  std::vector<std::vector<float>> inputs, outputs(static_cast<size_t>(n)), in_place(inputs);
  for (int r = 0; r < n; ++r) inputs.push_back(order_sensitive_values(r, count, 1));
  in_place = inputs;
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    const size_t r = static_cast<size_t>(comm.rank());
    outputs[r].assign(static_cast<size_t>(count), -1.0f);
    DI_TRY(comm.all_reduce_sum(const_buffer<float>(inputs[r]), mutable_buffer<float>(outputs[r])));
    // In place: recv is send.
    return comm.all_reduce_sum(const_buffer<float>(in_place[r]),
                               mutable_buffer<float>(in_place[r]));
  }));
  const std::vector<float> expected = rank_order_sum(inputs, 0, count);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(same_bits(outputs[static_cast<size_t>(r)], expected)) << "rank " << r;
    EXPECT_TRUE(same_bits(in_place[static_cast<size_t>(r)], expected))
        << "rank " << r << " in place";
  }
}

TEST_P(Collectives, AllReduceSumI32Wraps) {
  const int n = GetParam();
  std::vector<std::vector<int32_t>> outputs(static_cast<size_t>(n));
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    const std::vector<int32_t> mine = {comm.rank(), INT32_MAX, -7 * comm.rank(), INT32_MIN};
    outputs[static_cast<size_t>(comm.rank())].assign(4, 0);
    return comm.all_reduce_sum(const_buffer<int32_t>(mine),
                               mutable_buffer<int32_t>(outputs[static_cast<size_t>(comm.rank())]));
  }));
  uint32_t expected[4] = {0, 0, 0, 0};
  for (int r = 0; r < n; ++r) {
    const int32_t mine[4] = {r, INT32_MAX, -7 * r, INT32_MIN};
    for (int i = 0; i < 4; ++i) expected[i] += static_cast<uint32_t>(mine[i]);
  }
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(static_cast<uint32_t>(outputs[static_cast<size_t>(r)][static_cast<size_t>(i)]),
                expected[i]);
    }
  }
}

TEST_P(Collectives, AllGatherAnyDtype) {
  const int n = GetParam();
  const int64_t count = 13;
  std::vector<std::vector<uint16_t>> bf16(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> i32(static_cast<size_t>(n));
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    const size_t r = static_cast<size_t>(comm.rank());
    std::vector<uint16_t> mine(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      mine[static_cast<size_t>(i)] = static_cast<uint16_t>(r * 1000 + i);
    bf16[r].assign(static_cast<size_t>(count * n), 0);
    DI_TRY(comm.all_gather({mine.data(), count, DType::kBF16},
                           {bf16[r].data(), count * n, DType::kBF16}));
    const std::vector<int32_t> one = {-static_cast<int32_t>(r)};
    i32[r].assign(static_cast<size_t>(n), 99);
    return comm.all_gather(const_buffer<int32_t>(one), mutable_buffer<int32_t>(i32[r]));
  }));
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < count; ++i) {
        EXPECT_EQ(bf16[static_cast<size_t>(r)][static_cast<size_t>(q * count + i)], q * 1000 + i);
      }
      EXPECT_EQ(i32[static_cast<size_t>(r)][static_cast<size_t>(q)], -q);
    }
  }
}

TEST_P(Collectives, ReduceScatterSumInRankOrder) {
  const int n = GetParam();
  const int64_t block = 31;
  std::vector<std::vector<float>> inputs, outputs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) inputs.push_back(order_sensitive_values(r, block * n, 2));
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    const size_t r = static_cast<size_t>(comm.rank());
    outputs[r].assign(static_cast<size_t>(block), -1.0f);
    return comm.reduce_scatter_sum(const_buffer<float>(inputs[r]),
                                   mutable_buffer<float>(outputs[r]));
  }));
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(
        same_bits(outputs[static_cast<size_t>(r)], rank_order_sum(inputs, r * block, block)))
        << "rank " << r;
  }
}

// counts[p][q]: elements rank p sends to rank q: uneven, with zeros, and rank 1 sends nothing.
int64_t a2a_count(int p, int q) { return p == 1 ? 0 : (p * 7 + q * 3 + 1) % 5; }
float a2a_value(int p, int q, int64_t j) { return static_cast<float>(p * 10000 + q * 100 + j); }

TEST_P(Collectives, AllToAllvUnevenAndZeroCounts) {
  const int n = GetParam();
  const float kUntouched = -12345.0f;
  std::vector<std::vector<float>> outputs(static_cast<size_t>(n));
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    const int p = comm.rank();
    std::vector<int64_t> send_counts, recv_counts;
    std::vector<float> send;
    for (int q = 0; q < n; ++q) {
      send_counts.push_back(a2a_count(p, q));
      recv_counts.push_back(a2a_count(q, p));
      for (int64_t j = 0; j < a2a_count(p, q); ++j) send.push_back(a2a_value(p, q, j));
    }
    send.push_back(kUntouched);  // capacity beyond the counts is allowed
    int64_t arriving = 0;
    for (int64_t c : recv_counts) arriving += c;
    std::vector<float>& recv = outputs[static_cast<size_t>(p)];
    recv.assign(static_cast<size_t>(arriving + 3), kUntouched);
    return comm.all_to_allv(const_buffer<float>(send), send_counts, mutable_buffer<float>(recv),
                            recv_counts);
  }));
  for (int q = 0; q < n; ++q) {
    const std::vector<float>& recv = outputs[static_cast<size_t>(q)];
    size_t at = 0;
    for (int p = 0; p < n; ++p) {
      for (int64_t j = 0; j < a2a_count(p, q); ++j) EXPECT_EQ(recv[at++], a2a_value(p, q, j));
    }
    for (; at < recv.size(); ++at)
      EXPECT_EQ(recv[at], kUntouched) << "rank " << q << " wrote past its counts";
  }
}

TEST_P(Collectives, AllToAllEqualBlocks) {
  const int n = GetParam();
  std::vector<std::vector<int32_t>> outputs(static_cast<size_t>(n));
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    std::vector<int32_t> send;
    for (int q = 0; q < n; ++q) {
      for (int j = 0; j < 2; ++j) send.push_back(comm.rank() * 100 + q * 10 + j);
    }
    std::vector<int32_t>& recv = outputs[static_cast<size_t>(comm.rank())];
    recv.assign(send.size(), -1);
    return comm.all_to_all(const_buffer<int32_t>(send), mutable_buffer<int32_t>(recv));
  }));
  for (int q = 0; q < n; ++q) {
    for (int p = 0; p < n; ++p) {
      for (int j = 0; j < 2; ++j) {
        EXPECT_EQ(outputs[static_cast<size_t>(q)][static_cast<size_t>(p * 2 + j)],
                  p * 100 + q * 10 + j);
      }
    }
  }
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const int n = GetParam();
  for (int root = 0; root < n; ++root) {
    std::vector<std::vector<float>> buffers(static_cast<size_t>(n));
    expect_all_ok(run_ranks(n, [&](Communicator& comm) {
      std::vector<float>& buffer = buffers[static_cast<size_t>(comm.rank())];
      buffer = order_sensitive_values(comm.rank(), 19, 3);
      return comm.broadcast(mutable_buffer<float>(buffer), root);
    }));
    const std::vector<float> expected = order_sensitive_values(root, 19, 3);
    for (int r = 0; r < n; ++r) EXPECT_TRUE(same_bits(buffers[static_cast<size_t>(r)], expected));
  }
}

TEST_P(Collectives, BarrierOrdersWritesBeforeReads) {
  const int n = GetParam();
  std::vector<int> written(static_cast<size_t>(n), 0);
  std::vector<int> seen(static_cast<size_t>(n), 0);
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    written[static_cast<size_t>(comm.rank())] =
        comm.rank() + 1;  // plain writes: the barrier orders them
    DI_TRY(comm.barrier());
    int sum = 0;
    for (int v : written) sum += v;
    seen[static_cast<size_t>(comm.rank())] = sum;
    return Status();
  }));
  for (int r = 0; r < n; ++r) EXPECT_EQ(seen[static_cast<size_t>(r)], n * (n + 1) / 2);
}

// Many rounds of every collective with sizes that change each round: catches a rank that reads
// a peer's buffer after the peer moved on (and, under ThreadSanitizer, any unordered access).
TEST_P(Collectives, ManyRoundsOfMixedCollectives) {
  const int n = GetParam();
  constexpr int kRounds = 300;
  std::vector<int> mismatches(static_cast<size_t>(n), 0);
  expect_all_ok(run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    int& bad = mismatches[static_cast<size_t>(r)];
    for (int round = 0; round < kRounds; ++round) {
      const int64_t count = 1 + (round * 37) % 23;
      // Each rank can recompute every peer's input, so it checks its own results itself.
      std::vector<std::vector<float>> all;
      for (int q = 0; q < n; ++q)
        all.push_back(order_sensitive_values(q, count * n, static_cast<uint32_t>(round)));
      std::vector<float> buf = all[static_cast<size_t>(r)];
      // In place, so the next collective overwrites what the peers just read.
      DI_TRY(comm.all_reduce_sum(const_buffer<float>(buf), mutable_buffer<float>(buf)));
      bad += !same_bits(buf, rank_order_sum(all, 0, count * n));
      std::vector<float> scattered(static_cast<size_t>(count));
      DI_TRY(comm.reduce_scatter_sum(const_buffer<float>(all[static_cast<size_t>(r)]),
                                     mutable_buffer<float>(scattered)));
      bad += !same_bits(scattered, rank_order_sum(all, r * count, count));
      std::vector<float> gathered(static_cast<size_t>(count * n * n));
      DI_TRY(comm.all_gather(const_buffer<float>(all[static_cast<size_t>(r)]),
                             mutable_buffer<float>(gathered)));
      for (int q = 0; q < n; ++q) {
        bad += std::memcmp(gathered.data() + q * count * n, all[static_cast<size_t>(q)].data(),
                           static_cast<size_t>(count * n) * sizeof(float)) != 0;
      }
      std::vector<int32_t> token = {r == round % n ? round : -1};
      DI_TRY(comm.broadcast(mutable_buffer<int32_t>(token), round % n));
      bad += token[0] != round;
      std::vector<int64_t> counts(static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) counts[static_cast<size_t>(q)] = (round + q) % 3;
      std::vector<int64_t> from(static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) from[static_cast<size_t>(q)] = (round + r) % 3;
      std::vector<int32_t> send, recv(static_cast<size_t>(3 * n), -1);
      for (int q = 0; q < n; ++q) {
        for (int64_t j = 0; j < counts[static_cast<size_t>(q)]; ++j)
          send.push_back(round * 1000 + r * 10 + q);
      }
      send.resize(send.size() + 1);  // never empty, so .data() is not null for a zero count
      DI_TRY(comm.all_to_allv(const_buffer<int32_t>(send), counts, mutable_buffer<int32_t>(recv),
                              from));
      size_t at = 0;
      for (int q = 0; q < n; ++q) {
        for (int64_t j = 0; j < from[static_cast<size_t>(q)]; ++j)
          bad += recv[at++] != round * 1000 + q * 10 + r;
      }
    }
    return Status();
  }));
  for (int r = 0; r < n; ++r) EXPECT_EQ(mismatches[static_cast<size_t>(r)], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "_ranks";
                         });

}  // namespace
}  // namespace deepinfer::parallel
