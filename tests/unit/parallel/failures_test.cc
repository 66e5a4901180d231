// What goes wrong between ranks must end in an error on every rank, promptly, never in a hang:
// calls that disagree, arguments one rank gets wrong, a rank that throws, returns early or
// stalls. Each test would hang (CTest's timeout) if a rank were left waiting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "parallel/in_process_communicator.h"

namespace deepinfer::parallel {
namespace {

using ::testing::HasSubstr;

void expect_all_failed(const std::vector<Status>& statuses, const std::string& mentions) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r << " succeeded";
    EXPECT_NE(statuses[r].message().find(mentions), std::string::npos)
        << "rank " << r << ": " << statuses[r].to_string() << "\n  does not mention: " << mentions;
  }
}

int last_rank(const Communicator& comm) { return comm.size() - 1; }

class Failures : public ::testing::TestWithParam<int> {};

TEST_P(Failures, MismatchedCountsFailEveryRank) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  auto statuses = run_ranks(n, [](Communicator& comm) {
    DI_TRY(comm.barrier());  // the mismatch is the second collective
    std::vector<float> send(comm.rank() == last_rank(comm) ? 5 : 4, 1.0f), recv(send.size());
    return comm.all_reduce_sum(const_buffer<float>(send), mutable_buffer<float>(recv));
  });
  expect_all_failed(statuses, "all_reduce_sum #2");
  for (const Status& s : statuses) EXPECT_THAT(s.message(), HasSubstr("same count"));
}

TEST_P(Failures, DifferentCollectivesFailEveryRank) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  auto statuses = run_ranks(n, [](Communicator& comm) {
    std::vector<float> v(4, 1.0f), gathered(4 * static_cast<size_t>(comm.size()));
    if (comm.rank() == 1) return comm.barrier();
    return comm.all_gather(const_buffer<float>(v), mutable_buffer<float>(gathered));
  });
  expect_all_failed(statuses, "same collectives in the same order");
}

TEST_P(Failures, AllToAllvCountsThatDoNotPairUp) {
  const int n = GetParam();
  auto statuses = run_ranks(n, [n](Communicator& comm) {
    std::vector<int64_t> send_counts(static_cast<size_t>(n), 1),
        recv_counts(static_cast<size_t>(n), 1);
    if (comm.rank() == n - 1) recv_counts[0] = 2;  // rank 0 sends it 1
    std::vector<float> send(static_cast<size_t>(n), 1.0f), recv(static_cast<size_t>(n) + 1);
    return comm.all_to_allv(const_buffer<float>(send), send_counts, mutable_buffer<float>(recv),
                            recv_counts);
  });
  expect_all_failed(statuses, "which expects 2");
}

TEST_P(Failures, BadArgumentsOnOneRankFailTheOthers) {
  const int n = GetParam();
  auto statuses = run_ranks(n, [](Communicator& comm) {
    std::vector<float> v(4, 1.0f);
    // The last rank's recv is one block short.
    std::vector<float> gathered(4 * static_cast<size_t>(comm.size()) -
                                (comm.rank() == last_rank(comm) ? 4 : 0));
    return comm.all_gather(const_buffer<float>(v), mutable_buffer<float>(gathered));
  });
  expect_all_failed(statuses, "recv must hold");
  EXPECT_EQ(statuses.back().code(), StatusCode::kInvalidArgument);
}

TEST_P(Failures, ARankThatThrowsFailsTheOthers) {
  const int n = GetParam();
  auto statuses = run_ranks(n, [](Communicator& comm) {
    if (comm.rank() == last_rank(comm)) throw std::runtime_error("expert kernel exploded");
    return comm.barrier();
  });
  expect_all_failed(statuses, "expert kernel exploded");
}

TEST_P(Failures, ARankThatReturnsAnErrorFailsTheOthers) {
  const int n = GetParam();
  auto statuses = run_ranks(n, [](Communicator& comm) -> Status {
    std::vector<float> v(3, 1.0f);
    DI_TRY(comm.all_reduce_sum(const_buffer<float>(v), mutable_buffer<float>(v)));
    if (comm.rank() == 0) return not_found("rank 0 lost its weights");
    return comm.all_reduce_sum(const_buffer<float>(v), mutable_buffer<float>(v));
  });
  expect_all_failed(statuses, "lost its weights");
}

TEST_P(Failures, ARankThatLeavesEarlyFailsTheOthers) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "one rank has no one to wait for";
  auto statuses = run_ranks(n, [](Communicator& comm) {
    DI_TRY(comm.barrier());
    if (comm.rank() == 1) return Status();  // done, as far as it knows
    return comm.barrier();
  });
  EXPECT_TRUE(statuses[1].ok());
  for (int r = 0; r < n; ++r) {
    if (r == 1) continue;
    EXPECT_THAT(statuses[static_cast<size_t>(r)].message(), HasSubstr("barrier #2"));
    EXPECT_THAT(statuses[static_cast<size_t>(r)].message(), HasSubstr("rank(s) 1 left the group"));
  }
}

TEST_P(Failures, AStalledRankTimesOutNamingTheCollective) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "one rank has no one to wait for";
  InProcessOptions options;
  options.timeout = std::chrono::milliseconds(100);
  const auto start = std::chrono::steady_clock::now();
  auto statuses = run_ranks(
      n,
      [](Communicator& comm) {
        if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
        std::vector<int32_t> v = {1}, sum = {0};
        return comm.all_reduce_sum(const_buffer<int32_t>(v), mutable_buffer<int32_t>(sum));
      },
      options);
  // Every rank, the sleeper included (its call finds the group failed), reports the timeout.
  expect_all_failed(
      statuses, "all_reduce_sum #1 failed: rank(s) 0 did not arrive within the timeout of 100 ms");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Failures, AFailedGroupStaysFailed) {
  auto group = InProcessGroup::create(2);
  std::vector<Status> later(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group->communicator(r);
      std::vector<float> v(r + 1, 1.0f);  // counts disagree
      (void)comm->all_reduce_sum(const_buffer<float>(v), mutable_buffer<float>(v));
      later[static_cast<size_t>(r)] = comm->barrier();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(group->status().ok());
  for (const Status& s : later) EXPECT_THAT(s.message(), HasSubstr("all_reduce_sum #1"));
}

TEST(Failures, AbortReachesAWaitingRank) {
  auto group = InProcessGroup::create(2);
  Status waited;
  std::thread waiter([&] {
    auto comm = group->communicator(0);
    waited = comm->barrier();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  group->abort(internal_error("operator pressed stop"));
  waiter.join();
  EXPECT_THAT(waited.message(), HasSubstr("operator pressed stop"));
}

TEST(Failures, SumsRejectDtypesWithoutADefinedSum) {
  auto statuses = run_ranks(2, [](Communicator& comm) {
    std::vector<uint16_t> bf16(4), out(4);
    return comm.all_reduce_sum({bf16.data(), 4, DType::kBF16}, {out.data(), 4, DType::kBF16});
  });
  expect_all_failed(statuses, "sums are defined for F32 and I32");
}

INSTANTIATE_TEST_SUITE_P(Ranks, Failures, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "_ranks";
                         });

}  // namespace
}  // namespace deepinfer::parallel
