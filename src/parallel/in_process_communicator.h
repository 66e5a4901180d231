// InProcessCommunicator: the ranks of a group are threads of one process and the buffers are host
// memory. It is the oracle the NCCL communicator is checked against and the way CPU tests run
// multi-rank code (expert-parallel dispatch, data-parallel schedulers) without GPUs.
//
// Every collective is a rendezvous: each rank posts a description of its call, waits until all
// ranks have posted, checks that the calls agree (same collective, dtype and sizes; all_to_allv
// counts that pair up), then copies what it needs straight out of its peers' buffers, and waits
// again until every rank has finished reading before it returns (so a caller may reuse its send
// buffer as soon as its call returns). Sums follow the rank order of communicator.h exactly.
//
// Failures end in a Status on every rank, never a hang:
//   * arguments wrong on one rank (local checks) or calls that disagree between ranks fail the
//     group, and every rank's pending and later calls return an error naming the collective;
//   * InProcessGroup::abort(reason) (run_ranks calls it for a rank that throws or returns an
//     error) does the same;
//   * a rank that leaves (its communicator is destroyed) while others wait for it, or a wait
//     longer than InProcessOptions::timeout, fails the group with a message that names the
//     collective, its call number and the ranks that never arrived.
// A failed group stays failed: make a new one.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace deepinfer::parallel {

struct InProcessOptions {
  // How long a rank waits inside one collective for the other ranks before the group fails.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

class InProcessGroupState;  // in_process_group_state.h
struct PostedCall;          // in_process_group_state.h
class InProcessCommunicator;

// The shared state of n ranks. Create it once, hand communicator(r) to the thread of rank r.
class InProcessGroup {
 public:
  static std::shared_ptr<InProcessGroup> create(int size, InProcessOptions options = {});

  int size() const;
  // The communicator of `rank` (0 <= rank < size()); at most one live communicator per rank,
  // used by one thread at a time. Destroying it makes the rank leave the group.
  std::unique_ptr<InProcessCommunicator> communicator(int rank);
  // Fails the group: every rank's pending and later collective returns an error that carries
  // `reason`. The first reason wins; later calls are ignored.
  void abort(const Status& reason);
  // OK while the group works; afterwards the Status its collectives return.
  Status status() const;

 private:
  explicit InProcessGroup(std::shared_ptr<InProcessGroupState> state);
  std::shared_ptr<InProcessGroupState> state_;
};

class InProcessCommunicator final : public Communicator {
 public:
  ~InProcessCommunicator() override;  // leaves the group
  InProcessCommunicator(const InProcessCommunicator&) = delete;
  InProcessCommunicator& operator=(const InProcessCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override;
  const char* kind() const override { return "in_process"; }

  Status all_reduce_sum(ConstBuffer send, MutableBuffer recv) override;
  Status all_gather(ConstBuffer send, MutableBuffer recv) override;
  Status reduce_scatter_sum(ConstBuffer send, MutableBuffer recv) override;
  Status all_to_allv(ConstBuffer send, std::span<const int64_t> send_counts, MutableBuffer recv,
                     std::span<const int64_t> recv_counts) override;
  Status broadcast(MutableBuffer buffer, int root) override;
  Status barrier() override;

 private:
  friend class InProcessGroup;

  InProcessCommunicator(std::shared_ptr<InProcessGroupState> state, int rank);
  // Posts `call`, meets the other ranks, checks that the calls agree, runs this rank's part of
  // the copy or sum and meets them again.
  Status run(PostedCall& call);
  // This rank's share of the collective all ranks agreed on (between the two meetings).
  Status execute(const PostedCall& mine);
  // An argument check failed on this rank before it posted: fail the group so that the other
  // ranks do not wait for a call that will never come.
  Status reject(const Status& status, const char* op);

  std::shared_ptr<InProcessGroupState> state_;
  int rank_;
  int64_t calls_ = 0;                 // collectives this rank has entered (names them in messages)
  std::vector<std::byte> scratch_;    // the result when recv overlaps a buffer a peer reads
  int64_t scratch_result_bytes_ = 0;  // bytes of this call's result waiting in scratch_
};

// Runs body(communicator) for every rank of a new group, one thread per rank, and returns each
// rank's Status (index = rank). A rank whose body throws or returns an error aborts the group,
// so the other ranks' collectives return errors instead of waiting for it.
std::vector<Status> run_ranks(int size, const std::function<Status(Communicator&)>& body,
                              InProcessOptions options = {});

}  // namespace deepinfer::parallel
