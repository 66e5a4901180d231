// Communicator: the collectives that ranks (one per GPU, or one per thread in CPU tests) use to
// exchange activations: attention data parallelism, MoE expert parallelism, tensor and context
// parallelism all reduce to these few operations (docs/parallel.md).
//
// Every rank of a group calls the same collectives in the same order with matching arguments;
// a collective that one rank skips or calls with other sizes is a bug of the caller, and the
// implementations turn what they can detect into a Status rather than a hang.
//
// Buffers are a pointer, an element count and a dtype. Where the memory lives depends on the
// implementation: host memory for InProcessCommunicator, device memory for NcclCommunicator.
// Data-movement collectives (all_gather, all_to_allv, broadcast) copy bytes and accept every
// dtype; the sums accept kF32 and kI32 (int32 sums wrap modulo 2^32, as NCCL's do).
//
// Determinism. The sums of this interface are defined as the left fold in rank order:
//     out[i] = (((in_0[i] + in_1[i]) + in_2[i]) + ... ) + in_{n-1}[i]
// computed in FP32 for FP32 data, the same bits on every rank and on every run, whatever the
// timing. Batch-invariant mode relies on this: a value must not change because another rank
// arrived first. InProcessCommunicator implements exactly this; NcclCommunicator only in its
// rank-order mode (NCCL's own ring/tree reductions use another, topology-dependent order, see
// nccl_communicator.h). sum_in_rank_order() below is the host reference of the rule.
//
// Completion. InProcessCommunicator's calls are complete when they return. NcclCommunicator's
// are enqueued on its CUDA stream (stream order, like a kernel launch), barrier() excepted.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <utility>

#include "base/status.h"
#include "tensor/dtype.h"

namespace deepinfer::parallel {

// A buffer a collective reads.
struct ConstBuffer {
  const void* data = nullptr;
  int64_t count = 0;  // elements, not bytes
  DType dtype = DType::kF32;
};

// A buffer a collective writes (or, for broadcast, reads on the root and writes elsewhere).
struct MutableBuffer {
  void* data = nullptr;
  int64_t count = 0;  // elements, not bytes
  DType dtype = DType::kF32;
};

// The dtype of the C++ element types with one obvious meaning (BF16 is stored as uint16_t, which
// could also be FP16: name it with the struct directly).
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kU8;
}

template <typename T>
ConstBuffer const_buffer(std::span<const T> values) {
  return {values.data(), static_cast<int64_t>(values.size()), dtype_of<T>()};
}
template <typename T>
MutableBuffer mutable_buffer(std::span<T> values) {
  return {values.data(), static_cast<int64_t>(values.size()), dtype_of<T>()};
}

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "in_process" or "nccl": names the implementation in messages.
  virtual const char* kind() const = 0;

  // recv = the rank-order sum of every rank's send (see the header comment). send and recv have
  // the same count on every rank; recv may be send (in place).
  virtual Status all_reduce_sum(ConstBuffer send, MutableBuffer recv) = 0;

  // recv = rank 0's send, then rank 1's, ...: recv.count == size() * send.count, the same
  // send.count on every rank.
  virtual Status all_gather(ConstBuffer send, MutableBuffer recv) = 0;

  // Each rank's send is size() equal blocks; rank r receives the rank-order sum of block r of
  // every rank: send.count == size() * recv.count. recv must not overlap send.
  virtual Status reduce_scatter_sum(ConstBuffer send, MutableBuffer recv) = 0;

  // Personalised exchange with per-peer counts. send holds size() consecutive blocks, the one for
  // peer p of send_counts[p] elements (block p starts at the sum of the counts before it); rank r
  // receives peer p's block for r into recv at the sum of recv_counts[0..p). Counts may be zero
  // and must agree: send_counts[q] on rank p == recv_counts[p] on rank q. The buffers may be
  // larger than the counts need (capacity); recv must not overlap send.
  virtual Status all_to_allv(ConstBuffer send, std::span<const int64_t> send_counts,
                             MutableBuffer recv, std::span<const int64_t> recv_counts) = 0;

  // buffer on every rank = buffer on `root`; the same count on every rank.
  virtual Status broadcast(MutableBuffer buffer, int root) = 0;

  // Returns once every rank has entered barrier().
  virtual Status barrier() = 0;

  // all_to_allv with equal blocks: send.count == recv.count == size() * block.
  Status all_to_all(ConstBuffer send, MutableBuffer recv);
};

// The host reference of the rank-order sum: out[i] = ((parts[0][i] + parts[1][i]) + ...) for
// count elements of kF32 or kI32. out may alias parts[0] (only); parts must not be empty.
Status sum_in_rank_order(std::span<const void* const> parts, int64_t count, DType dtype, void* out);

// The per-rank argument checks every implementation runs before it communicates (they need no
// other rank); each message names the collective and the offending argument.
bool is_summable(DType dtype);
Status check_all_reduce_args(int size, ConstBuffer send, MutableBuffer recv);
Status check_all_gather_args(int size, ConstBuffer send, MutableBuffer recv);
Status check_reduce_scatter_args(int size, ConstBuffer send, MutableBuffer recv);
Status check_all_to_allv_args(int size, ConstBuffer send, std::span<const int64_t> send_counts,
                              MutableBuffer recv, std::span<const int64_t> recv_counts);
Status check_broadcast_args(int size, MutableBuffer buffer, int root);

// Byte size of a buffer's elements.
inline int64_t byte_size(int64_t count, DType dtype) { return count * dtype_size(dtype); }

// A collective of the model's ranks failed (a peer failed, stalled or disagreed), thrown from deep
// inside a forward (expert, tensor or context parallelism: the status names which) and turned
// into the step's error at the model's API boundary, like backend::OutOfMemory.
class CollectiveFailure : public std::runtime_error {
 public:
  explicit CollectiveFailure(Status status)
      : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

}  // namespace deepinfer::parallel
