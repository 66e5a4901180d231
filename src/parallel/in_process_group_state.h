// The shared state behind InProcessGroup (internal to src/parallel): the calls the ranks posted,
// the two meeting points of every collective, and the group's failure.
//
// A collective meets twice. arrive() waits until every rank has posted its call; it is where a
// missing rank shows, so it fails on the group's failure, on a rank that left, and on the
// timeout. depart() waits until every rank has finished reading its peers' buffers; it cannot
// fail: once arrive() completed for one rank it completed for all (the round is closed under the
// lock), and between the two meetings a rank only checks and copies, so every rank gets there.
// Because depart() always completes, a rank's buffers and posted call are never read after its
// collective returned, whatever failed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/in_process_communicator.h"

namespace deepinfer::parallel {

enum class CollectiveKind : uint8_t {
  kAllReduceSum,
  kAllGather,
  kReduceScatterSum,
  kAllToAllv,
  kBroadcast,
  kBarrier,
};
const char* collective_name(CollectiveKind kind);

// One rank's call as its peers see it. The counts are copies: a peer may still read them while
// the caller's own vectors are gone.
struct PostedCall {
  CollectiveKind kind = CollectiveKind::kBarrier;
  int64_t number = 0;  // 1 for the rank's first collective, 2 for its second, ...
  ConstBuffer send;
  MutableBuffer recv;
  std::vector<int64_t> send_counts, recv_counts;
  int root = 0;
};

class InProcessGroupState {
 public:
  InProcessGroupState(int size, InProcessOptions options);

  int size() const { return size_; }

  // Claims `rank` for one communicator (false when it is already claimed).
  bool attach(int rank);
  // The rank's communicator is gone: ranks waiting for it fail instead of timing out.
  void leave(int rank);

  // Stores `call` as this rank's call of the current collective.
  void post(int rank, const PostedCall& call);
  // The calls of the current collective; valid between arrive() and depart().
  const PostedCall& posted(int rank) const { return posted_[static_cast<size_t>(rank)]; }

  // The first meeting (see the header comment). `what` names the collective in messages.
  Status arrive(int rank, const std::string& what);
  // The second meeting; never fails.
  void depart(int rank);

  void fail(const Status& reason);  // the first reason wins
  Status failure() const;

 private:
  // Both meetings: the last rank in closes the round; the others wait for that.
  bool close_round_or_join(std::unique_lock<std::mutex>& lock, int rank, uint64_t* round);
  // A failure of `what` naming the ranks not at the meeting (only those that left, if left_only).
  Status missing_ranks_failure(const std::string& what, bool left_only,
                               const std::string& why) const;

  const int size_;
  const InProcessOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable round_closed_;
  uint64_t round_ = 0;      // bumped when every rank has met
  int present_ = 0;         // ranks at the current meeting
  std::vector<bool> here_;  // which ranks they are
  std::vector<bool> attached_, left_;
  std::vector<PostedCall> posted_;
  Status failure_;
};

}  // namespace deepinfer::parallel
