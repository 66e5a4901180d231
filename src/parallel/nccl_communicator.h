// NcclCommunicator: one rank per GPU over NCCL (built only with CUDA and NCCL: the target
// deepinfer::parallel_nccl). Buffers are device memory of this rank's GPU; every call enqueues on
// the communicator's CUDA stream and returns (stream order, like a kernel launch), except
// barrier(), which also waits for the stream.
//
// Sum order. NCCL's ring and tree reductions add in an order set by the topology, the algorithm
// NCCL picks and the message size, not in rank order: the bits can change with the number of
// GPUs, the machine or the NCCL version. The default (NcclSumOrder::kNccl) accepts that for
// speed. Batch-invariant mode must use NcclSumOrder::kRankOrder: all_reduce_sum becomes an
// all_gather into a scratch buffer followed by a local fold in rank order
// (kernels/cuda/parallel/rank_order_sum.h), and reduce_scatter_sum a grouped send/recv of the
// blocks followed by the same fold; the result is then the exact rule of communicator.h, the
// same bits as InProcessCommunicator. It moves size() times the data of a ring all-reduce.
//
// Failures. Argument errors on this rank return a Status before NCCL sees the call, but NCCL
// cannot tell the other ranks: they wait inside NCCL until someone calls abort() on them (a
// watchdog's job; not built yet). Disagreeing calls between ranks are undefined in NCCL (most
// often a hang), unlike in the in-process communicator: test new call sequences there first.
//
// CUDA graphs: calls can be captured once the rank-order scratch is large enough
// (reserve_scratch() before capture; growing it calls cudaMalloc).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <memory>

#include "parallel/communicator.h"

struct ncclComm;  // nccl.h's communicator, kept out of this header

namespace deepinfer::parallel {

// The rendezvous token of one NCCL group (NCCL_UNIQUE_ID_BYTES bytes). One process makes it
// with make_nccl_unique_id() and hands a copy to every rank (threads, or processes over any
// channel the launcher has).
struct NcclUniqueId {
  std::array<char, 128> bytes{};
};
Expected<NcclUniqueId> make_nccl_unique_id();

enum class NcclSumOrder {
  kNccl,       // NCCL's own reductions: fastest, order not fixed (see the header comment)
  kRankOrder,  // gather + fold in rank order: the interface's exact rule (batch-invariant mode)
};

struct NcclOptions {
  NcclSumOrder sum_order = NcclSumOrder::kNccl;
};

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group as `rank` of `size` on CUDA device `device`; collective (ncclCommInitRank
  // returns once every rank has joined). Work is enqueued on `stream` (a stream of `device`).
  static Expected<std::unique_ptr<NcclCommunicator>> create(const NcclUniqueId& id, int rank,
                                                            int size, int device,
                                                            cudaStream_t stream,
                                                            NcclOptions options = {});
  ~NcclCommunicator() override;  // ncclCommDestroy and the scratch
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "nccl"; }

  Status all_reduce_sum(ConstBuffer send, MutableBuffer recv) override;
  Status all_gather(ConstBuffer send, MutableBuffer recv) override;
  Status reduce_scatter_sum(ConstBuffer send, MutableBuffer recv) override;
  Status all_to_allv(ConstBuffer send, std::span<const int64_t> send_counts, MutableBuffer recv,
                     std::span<const int64_t> recv_counts) override;
  Status broadcast(MutableBuffer buffer, int root) override;
  Status barrier() override;

  cudaStream_t stream() const { return stream_; }
  void set_stream(cudaStream_t stream) { stream_ = stream; }
  NcclSumOrder sum_order() const { return options_.sum_order; }
  // Makes the rank-order scratch at least `bytes` long now (the mode needs size() * count *
  // element size bytes per sum), so that no later call allocates (CUDA graph capture).
  Status reserve_scratch(size_t bytes);
  // ncclCommAbort: pending and later work on this communicator fails; for a watchdog.
  void abort();

 private:
  NcclCommunicator(ncclComm* comm, int rank, int size, int device, cudaStream_t stream,
                   NcclOptions options);
  Status use_device() const;
  // The rank-order fold of `ranks` gathered blocks of `count` elements in scratch_ into out.
  Status fold_scratch(int64_t count, DType dtype, void* out);

  ncclComm* comm_;
  int rank_, size_, device_;
  cudaStream_t stream_;
  NcclOptions options_;
  void* scratch_ = nullptr;  // device memory of the rank-order mode and barrier()
  size_t scratch_bytes_ = 0;
};

}  // namespace deepinfer::parallel
