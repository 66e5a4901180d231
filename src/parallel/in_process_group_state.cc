// The meetings of InProcessGroup's ranks (in_process_group_state.h): one mutex, one condition
// variable, a round counter. Collectives here move test-sized data between a few threads, so a
// plain lock is enough; nothing spins.
#include "parallel/in_process_group_state.h"

#include <string>

#include "base/check.h"

namespace deepinfer::parallel {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduceSum:
      return "all_reduce_sum";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatterSum:
      return "reduce_scatter_sum";
    case CollectiveKind::kAllToAllv:
      return "all_to_allv";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kBarrier:
      return "barrier";
  }
  return "collective";
}

InProcessGroupState::InProcessGroupState(int size, InProcessOptions options)
    : size_(size),
      options_(options),
      here_(static_cast<size_t>(size), false),
      attached_(static_cast<size_t>(size), false),
      left_(static_cast<size_t>(size), false),
      posted_(static_cast<size_t>(size)) {}

bool InProcessGroupState::attach(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t r = static_cast<size_t>(rank);
  if (attached_[r]) return false;
  attached_[r] = true;
  return true;
}

void InProcessGroupState::leave(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  left_[static_cast<size_t>(rank)] = true;
  round_closed_.notify_all();
}

void InProcessGroupState::post(int rank, const PostedCall& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  PostedCall& slot = posted_[static_cast<size_t>(rank)];
  slot.kind = call.kind;
  slot.number = call.number;
  slot.send = call.send;
  slot.recv = call.recv;
  slot.send_counts.assign(call.send_counts.begin(), call.send_counts.end());  // keeps capacity
  slot.recv_counts.assign(call.recv_counts.begin(), call.recv_counts.end());
  slot.root = call.root;
}

bool InProcessGroupState::close_round_or_join(std::unique_lock<std::mutex>& lock, int rank,
                                              uint64_t* round) {
  (void)lock;
  *round = round_;
  here_[static_cast<size_t>(rank)] = true;
  if (++present_ < size_) return false;
  present_ = 0;
  here_.assign(here_.size(), false);
  ++round_;
  round_closed_.notify_all();
  return true;
}

Status InProcessGroupState::missing_ranks_failure(const std::string& what, bool left_only,
                                                  const std::string& why) const {
  std::string ranks;
  for (int r = 0; r < size_; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (here_[i] || (left_only && !left_[i])) continue;
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  return failed_precondition("in-process group of " + std::to_string(size_) + " ranks: " + what +
                             " failed: rank(s) " + ranks + " " + why);
}

Status InProcessGroupState::arrive(int rank, const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!failure_.ok()) return failure_;
  uint64_t round = 0;
  if (close_round_or_join(lock, rank, &round)) return Status();
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (;;) {
    // A closed round wins over everything else: every rank of it passes, or none does.
    if (round_ != round) return Status();
    if (!failure_.ok()) return failure_;
    for (int r = 0; r < size_; ++r) {
      if (left_[static_cast<size_t>(r)] && !here_[static_cast<size_t>(r)]) {
        failure_ = missing_ranks_failure(
            what, /*left_only=*/true,
            "left the group (communicator destroyed) while the others waited for them");
        round_closed_.notify_all();
        return failure_;
      }
    }
    if (round_closed_.wait_until(lock, deadline) == std::cv_status::timeout && round_ == round &&
        failure_.ok()) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.timeout);
      failure_ = missing_ranks_failure(
          what, /*left_only=*/false,
          "did not arrive within the timeout of " + std::to_string(ms.count()) + " ms");
      round_closed_.notify_all();
      return failure_;
    }
  }
}

void InProcessGroupState::depart(int rank) {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t round = 0;
  if (close_round_or_join(lock, rank, &round)) return;
  round_closed_.wait(lock, [&] { return round_ != round; });
}

void InProcessGroupState::fail(const Status& reason) {
  DI_CHECK(!reason.ok());
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.ok()) failure_ = reason;
  round_closed_.notify_all();
}

Status InProcessGroupState::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

}  // namespace deepinfer::parallel
