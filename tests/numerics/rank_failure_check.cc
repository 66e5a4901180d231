// The rank tests' shared failure check (see rank_failure_check.h).
#include "rank_failure_check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "parallel/in_process_communicator.h"

namespace deepinfer::model::testing {

void expect_rank_failure_propagates(const FailingRankBody& body, const std::string& needle) {
  parallel::InProcessOptions options;
  options.timeout = std::chrono::seconds(60);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> forward_errors(3);
  const std::vector<Status> statuses = parallel::run_ranks(
      3,
      [&](parallel::Communicator& comm) -> Status {
        const Status s = body(comm, comm.rank() == 1 ? 2 : -1);
        forward_errors[static_cast<size_t>(comm.rank())] = s;
        return s;
      },
      options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 30.0) << "the failure was not propagated; the ranks waited for the timeout";
  for (int r : {0, 2}) {
    EXPECT_FALSE(statuses[static_cast<size_t>(r)].ok());
    EXPECT_NE(forward_errors[static_cast<size_t>(r)].message().find(needle), std::string::npos)
        << forward_errors[static_cast<size_t>(r)].to_string();
  }
  EXPECT_FALSE(statuses[1].ok());
}

}  // namespace deepinfer::model::testing
