// InProcessCommunicator (in_process_communicator.h): argument checks, the cross-rank agreement
// check, and each collective's copies and sums. The meetings live in in_process_group_state.cc.
#include "parallel/in_process_communicator.h"

#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "base/check.h"
#include "parallel/in_process_group_state.h"

namespace deepinfer::parallel {
namespace {

bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  if (a_bytes <= 0 || b_bytes <= 0) return false;
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

int64_t offset_of(const std::vector<int64_t>& counts, int index) {
  int64_t offset = 0;
  for (int i = 0; i < index; ++i) offset += counts[static_cast<size_t>(i)];
  return offset;
}

// Every rank runs this on the same posted calls, so every rank reaches the same verdict and the
// same message.
Status check_agreement(const InProcessGroupState& state, const std::string& what) {
  const int n = state.size();
  const PostedCall& first = state.posted(0);
  for (int r = 1; r < n; ++r) {
    const PostedCall& call = state.posted(r);
    const std::string who = what + ": rank " + std::to_string(r);
    if (call.kind != first.kind) {
      return invalid_argument(who + " called " + collective_name(call.kind) +
                              " where rank 0 called " + collective_name(first.kind) +
                              " (every rank must call the same collectives in the same order)");
    }
    if (call.send.dtype != first.send.dtype) {
      return invalid_argument(who + " passes " + std::string(dtype_name(call.send.dtype)) +
                              ", rank 0 " + std::string(dtype_name(first.send.dtype)));
    }
    switch (call.kind) {
      case CollectiveKind::kAllReduceSum:
      case CollectiveKind::kAllGather:
      case CollectiveKind::kReduceScatterSum:
      case CollectiveKind::kBroadcast:
        if (call.send.count != first.send.count) {
          return invalid_argument(who + " passes " + std::to_string(call.send.count) +
                                  " elements, rank 0 " + std::to_string(first.send.count) +
                                  " (every rank must pass the same count)");
        }
        if (call.kind == CollectiveKind::kBroadcast && call.root != first.root) {
          return invalid_argument(who + " names root " + std::to_string(call.root) +
                                  ", rank 0 root " + std::to_string(first.root));
        }
        break;
      case CollectiveKind::kAllToAllv:
      case CollectiveKind::kBarrier:
        break;
    }
  }
  if (first.kind == CollectiveKind::kAllToAllv) {
    for (int p = 0; p < n; ++p) {
      for (int q = 0; q < n; ++q) {
        const int64_t sent = state.posted(p).send_counts[static_cast<size_t>(q)];
        const int64_t expected = state.posted(q).recv_counts[static_cast<size_t>(p)];
        if (sent != expected) {
          return invalid_argument(
              what + ": rank " + std::to_string(p) + " sends " + std::to_string(sent) +
              " elements to rank " + std::to_string(q) + ", which expects " +
              std::to_string(expected) +
              " (send_counts[q] on rank p must equal recv_counts[p] on rank q)");
        }
      }
    }
  }
  return Status();
}

}  // namespace

// ---- InProcessGroup ----------------------------------------------------------------------------

InProcessGroup::InProcessGroup(std::shared_ptr<InProcessGroupState> state)
    : state_(std::move(state)) {}

std::shared_ptr<InProcessGroup> InProcessGroup::create(int size, InProcessOptions options) {
  DI_CHECK(size >= 1);
  return std::shared_ptr<InProcessGroup>(
      new InProcessGroup(std::make_shared<InProcessGroupState>(size, options)));
}

int InProcessGroup::size() const { return state_->size(); }

std::unique_ptr<InProcessCommunicator> InProcessGroup::communicator(int rank) {
  DI_CHECK(rank >= 0 && rank < state_->size());
  DI_CHECK(state_->attach(rank));  // one communicator per rank
  return std::unique_ptr<InProcessCommunicator>(new InProcessCommunicator(state_, rank));
}

void InProcessGroup::abort(const Status& reason) {
  state_->fail(failed_precondition("in-process group of " + std::to_string(state_->size()) +
                                   " ranks aborted: " + reason.to_string()));
}

Status InProcessGroup::status() const { return state_->failure(); }

// ---- InProcessCommunicator ---------------------------------------------------------------------

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<InProcessGroupState> state, int rank)
    : state_(std::move(state)), rank_(rank) {}

InProcessCommunicator::~InProcessCommunicator() { state_->leave(rank_); }

int InProcessCommunicator::size() const { return state_->size(); }

Status InProcessCommunicator::reject(const Status& status, const char* op) {
  ++calls_;
  state_->fail(failed_precondition("in-process group of " + std::to_string(size()) + " ranks: " +
                                   op + " #" + std::to_string(calls_) + " failed on rank " +
                                   std::to_string(rank_) + ": " + status.to_string()));
  return status;
}

Status InProcessCommunicator::run(PostedCall& call) {
  call.number = ++calls_;
  const std::string what =
      std::string(collective_name(call.kind)) + " #" + std::to_string(call.number);
  state_->post(rank_, call);
  DI_TRY(state_->arrive(rank_, what));
  // From here to depart() the peers' posted calls and buffers stay as they are.
  Status status = check_agreement(*state_, what);
  if (status.ok()) {
    status = execute(state_->posted(rank_));
  } else {
    state_->fail(status);
  }
  state_->depart(rank_);
  if (status.ok() && scratch_result_bytes_ > 0) {
    // The result waited in scratch_ because recv overlaps a buffer a peer was still reading.
    std::memcpy(call.recv.data, scratch_.data(), static_cast<size_t>(scratch_result_bytes_));
  }
  return status;
}

Status InProcessCommunicator::execute(const PostedCall& mine) {
  const int n = size();
  const int elem = dtype_size(mine.send.dtype);
  scratch_result_bytes_ = 0;
  if (mine.kind == CollectiveKind::kBarrier) return Status();
  if (mine.kind == CollectiveKind::kBroadcast && rank_ == mine.root) return Status();

  // The bytes of recv this rank writes (all_to_allv may leave a tail of its buffer alone).
  const int64_t recv_bytes = mine.recv.count * elem;
  const int64_t result_bytes =
      mine.kind == CollectiveKind::kAllToAllv ? offset_of(mine.recv_counts, n) * elem : recv_bytes;
  // Write straight into recv unless it overlaps a buffer some rank reads in this collective
  // (in-place all_reduce, threads that share memory): then into scratch_, copied after depart().
  std::byte* out = static_cast<std::byte*>(mine.recv.data);
  for (int q = 0; q < n; ++q) {
    const PostedCall& peer = state_->posted(q);
    if (overlaps(peer.send.data, peer.send.count * elem, mine.recv.data, result_bytes)) {
      if (scratch_.size() < static_cast<size_t>(result_bytes)) {
        scratch_.resize(static_cast<size_t>(result_bytes));
      }
      out = scratch_.data();
      scratch_result_bytes_ = result_bytes;
      break;
    }
  }

  std::vector<const void*> parts(static_cast<size_t>(n));
  switch (mine.kind) {
    case CollectiveKind::kAllReduceSum:
      for (int q = 0; q < n; ++q) parts[static_cast<size_t>(q)] = state_->posted(q).send.data;
      return sum_in_rank_order(parts, mine.recv.count, mine.recv.dtype, out);
    case CollectiveKind::kReduceScatterSum:
      for (int q = 0; q < n; ++q) {
        parts[static_cast<size_t>(q)] =
            static_cast<const std::byte*>(state_->posted(q).send.data) + rank_ * recv_bytes;
      }
      return sum_in_rank_order(parts, mine.recv.count, mine.recv.dtype, out);
    case CollectiveKind::kAllGather: {
      const int64_t block = mine.send.count * elem;
      for (int q = 0; q < n; ++q) {
        if (block > 0) std::memcpy(out + q * block, state_->posted(q).send.data, block);
      }
      return Status();
    }
    case CollectiveKind::kAllToAllv: {
      int64_t at = 0;
      for (int q = 0; q < n; ++q) {
        const PostedCall& peer = state_->posted(q);
        const int64_t count = peer.send_counts[static_cast<size_t>(rank_)];
        if (count > 0) {
          const auto* src = static_cast<const std::byte*>(peer.send.data) +
                            offset_of(peer.send_counts, rank_) * elem;
          std::memcpy(out + at * elem, src, static_cast<size_t>(count * elem));
        }
        at += count;
      }
      return Status();
    }
    case CollectiveKind::kBroadcast:
      if (recv_bytes > 0) std::memcpy(out, state_->posted(mine.root).send.data, recv_bytes);
      return Status();
    case CollectiveKind::kBarrier:
      break;
  }
  return Status();
}

Status InProcessCommunicator::all_reduce_sum(ConstBuffer send, MutableBuffer recv) {
  if (Status s = check_all_reduce_args(size(), send, recv); !s.ok())
    return reject(s, "all_reduce_sum");
  PostedCall call;
  call.kind = CollectiveKind::kAllReduceSum;
  call.send = send;
  call.recv = recv;
  return run(call);
}

Status InProcessCommunicator::all_gather(ConstBuffer send, MutableBuffer recv) {
  if (Status s = check_all_gather_args(size(), send, recv); !s.ok()) return reject(s, "all_gather");
  PostedCall call;
  call.kind = CollectiveKind::kAllGather;
  call.send = send;
  call.recv = recv;
  return run(call);
}

Status InProcessCommunicator::reduce_scatter_sum(ConstBuffer send, MutableBuffer recv) {
  if (Status s = check_reduce_scatter_args(size(), send, recv); !s.ok()) {
    return reject(s, "reduce_scatter_sum");
  }
  PostedCall call;
  call.kind = CollectiveKind::kReduceScatterSum;
  call.send = send;
  call.recv = recv;
  return run(call);
}

Status InProcessCommunicator::all_to_allv(ConstBuffer send, std::span<const int64_t> send_counts,
                                          MutableBuffer recv,
                                          std::span<const int64_t> recv_counts) {
  if (Status s = check_all_to_allv_args(size(), send, send_counts, recv, recv_counts); !s.ok()) {
    return reject(s, "all_to_allv");
  }
  PostedCall call;
  call.kind = CollectiveKind::kAllToAllv;
  call.send = send;
  call.recv = recv;
  call.send_counts.assign(send_counts.begin(), send_counts.end());
  call.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  return run(call);
}

Status InProcessCommunicator::broadcast(MutableBuffer buffer, int root) {
  if (Status s = check_broadcast_args(size(), buffer, root); !s.ok()) return reject(s, "broadcast");
  PostedCall call;
  call.kind = CollectiveKind::kBroadcast;
  call.send = {buffer.data, buffer.count, buffer.dtype};  // what the peers read (on the root)
  call.recv = buffer;
  call.root = root;
  return run(call);
}

Status InProcessCommunicator::barrier() {
  PostedCall call;
  call.kind = CollectiveKind::kBarrier;
  return run(call);
}

// ---- run_ranks ---------------------------------------------------------------------------------

std::vector<Status> run_ranks(int size, const std::function<Status(Communicator&)>& body,
                              InProcessOptions options) {
  auto group = InProcessGroup::create(size, options);
  std::vector<Status> results(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&group, &results, &body, r] {
      Status status;
      {
        std::unique_ptr<InProcessCommunicator> comm = group->communicator(r);
        try {
          status = body(*comm);
        } catch (const std::exception& e) {
          status = internal_error("rank " + std::to_string(r) + " threw: " + e.what());
        } catch (...) {
          status = internal_error("rank " + std::to_string(r) + " threw a non-std exception");
        }
        if (!status.ok()) group->abort(status.with_context("rank " + std::to_string(r)));
      }  // the communicator is destroyed here: the rank leaves the group
      results[static_cast<size_t>(r)] = std::move(status);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace deepinfer::parallel
