// NcclCommunicator (nccl_communicator.h): each collective maps onto one NCCL call (or a group of
// send/recv), data movement as bytes (ncclUint8, so every dtype works), sums as FP32 or int32.
#include "parallel/nccl_communicator.h"

#include <nccl.h>

#include <cstring>
#include <string>

#include "kernels/cuda/parallel/rank_order_sum.h"

namespace deepinfer::parallel {
namespace {

static_assert(sizeof(NcclUniqueId::bytes) == NCCL_UNIQUE_ID_BYTES,
              "NcclUniqueId must hold exactly an ncclUniqueId");

Status nccl_status(ncclResult_t result, const char* what, ncclComm_t comm) {
  if (result == ncclSuccess) return Status();
  std::string message = std::string("NCCL ") + what + " failed: " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') message += " (" + std::string(detail) + ")";
  return internal_error(message);
}

Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status();
  return internal_error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(error));
}

// Calls inside ncclGroupStart/End may report an error at once or only at ncclGroupEnd; the
// group must be closed either way, so the first early error is kept until then.
class NcclGroup {
 public:
  explicit NcclGroup(ncclComm_t comm) : comm_(comm) { first_ = ncclGroupStart(); }
  void add(ncclResult_t result) {
    if (first_ == ncclSuccess) first_ = result;
  }
  Status end(const char* what) {
    const ncclResult_t ended = ncclGroupEnd();
    return nccl_status(first_ != ncclSuccess ? first_ : ended, what, comm_);
  }

 private:
  ncclComm_t comm_;
  ncclResult_t first_;
};

ncclDataType_t sum_type(DType dtype) { return dtype == DType::kF32 ? ncclFloat32 : ncclInt32; }

kernels::cuda::SumType kernel_sum_type(DType dtype) {
  return dtype == DType::kF32 ? kernels::cuda::SumType::kF32 : kernels::cuda::SumType::kI32;
}

size_t bytes_of(int64_t count, DType dtype) {
  return static_cast<size_t>(count) * static_cast<size_t>(dtype_size(dtype));
}

}  // namespace

Expected<NcclUniqueId> make_nccl_unique_id() {
  ncclUniqueId raw;
  DI_TRY(nccl_status(ncclGetUniqueId(&raw), "ncclGetUniqueId", nullptr));
  NcclUniqueId id;
  std::memcpy(id.bytes.data(), raw.internal, sizeof(raw.internal));
  return id;
}

Expected<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(const NcclUniqueId& id,
                                                                     int rank, int size, int device,
                                                                     cudaStream_t stream,
                                                                     NcclOptions options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument("NCCL communicator: rank " + std::to_string(rank) + " of " +
                            std::to_string(size) + " ranks is not a valid rank");
  }
  DI_TRY(cuda_status(cudaSetDevice(device), "cudaSetDevice"));
  ncclUniqueId raw;
  std::memcpy(raw.internal, id.bytes.data(), sizeof(raw.internal));
  ncclComm_t comm = nullptr;
  DI_TRY(nccl_status(ncclCommInitRank(&comm, size, raw, rank), "ncclCommInitRank", nullptr));
  std::unique_ptr<NcclCommunicator> self(
      new NcclCommunicator(comm, rank, size, device, stream, options));
  DI_TRY(self->reserve_scratch(sizeof(int32_t)));  // barrier()'s flag
  return self;
}

NcclCommunicator::NcclCommunicator(ncclComm* comm, int rank, int size, int device,
                                   cudaStream_t stream, NcclOptions options)
    : comm_(comm), rank_(rank), size_(size), device_(device), stream_(stream), options_(options) {}

NcclCommunicator::~NcclCommunicator() {
  (void)cudaSetDevice(device_);
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  (void)ncclCommDestroy(comm_);
}

void NcclCommunicator::abort() { (void)ncclCommAbort(comm_); }

Status NcclCommunicator::use_device() const {
  return cuda_status(cudaSetDevice(device_), "cudaSetDevice");
}

Status NcclCommunicator::reserve_scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return Status();
  DI_TRY(use_device());
  // Work already enqueued may still read the old scratch: cudaFree waits for the device.
  if (scratch_ != nullptr) DI_TRY(cuda_status(cudaFree(scratch_), "cudaFree"));
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  DI_TRY(cuda_status(cudaMalloc(&scratch_, bytes), "cudaMalloc (rank-order scratch)"));
  scratch_bytes_ = bytes;
  return Status();
}

Status NcclCommunicator::fold_scratch(int64_t count, DType dtype, void* out) {
  return cuda_status(kernels::cuda::launch_rank_order_sum(scratch_, size_, count,
                                                          kernel_sum_type(dtype), out, stream_),
                     "rank-order sum launch");
}

Status NcclCommunicator::all_reduce_sum(ConstBuffer send, MutableBuffer recv) {
  DI_TRY(check_all_reduce_args(size_, send, recv));
  DI_TRY(use_device());
  const size_t count = static_cast<size_t>(send.count);
  if (options_.sum_order == NcclSumOrder::kNccl) {
    return nccl_status(
        ncclAllReduce(send.data, recv.data, count, sum_type(send.dtype), ncclSum, comm_, stream_),
        "ncclAllReduce", comm_);
  }
  DI_TRY(reserve_scratch(bytes_of(send.count * size_, send.dtype)));
  DI_TRY(nccl_status(ncclAllGather(send.data, scratch_, bytes_of(send.count, send.dtype), ncclUint8,
                                   comm_, stream_),
                     "ncclAllGather (rank-order all_reduce_sum)", comm_));
  return fold_scratch(send.count, send.dtype, recv.data);
}

Status NcclCommunicator::all_gather(ConstBuffer send, MutableBuffer recv) {
  DI_TRY(check_all_gather_args(size_, send, recv));
  DI_TRY(use_device());
  return nccl_status(ncclAllGather(send.data, recv.data, bytes_of(send.count, send.dtype),
                                   ncclUint8, comm_, stream_),
                     "ncclAllGather", comm_);
}

Status NcclCommunicator::reduce_scatter_sum(ConstBuffer send, MutableBuffer recv) {
  DI_TRY(check_reduce_scatter_args(size_, send, recv));
  DI_TRY(use_device());
  if (options_.sum_order == NcclSumOrder::kNccl) {
    return nccl_status(ncclReduceScatter(send.data, recv.data, static_cast<size_t>(recv.count),
                                         sum_type(send.dtype), ncclSum, comm_, stream_),
                       "ncclReduceScatter", comm_);
  }
  // Every rank's block for this rank lands in scratch_ in rank order, then the fold.
  const size_t block = bytes_of(recv.count, recv.dtype);
  DI_TRY(reserve_scratch(block * static_cast<size_t>(size_)));
  NcclGroup group(comm_);
  for (int peer = 0; peer < size_ && block > 0; ++peer) {
    const auto* from = static_cast<const char*>(send.data) + block * static_cast<size_t>(peer);
    auto* into = static_cast<char*>(scratch_) + block * static_cast<size_t>(peer);
    group.add(ncclSend(from, block, ncclUint8, peer, comm_, stream_));
    group.add(ncclRecv(into, block, ncclUint8, peer, comm_, stream_));
  }
  DI_TRY(group.end("send/recv group (rank-order reduce_scatter_sum)"));
  return fold_scratch(recv.count, recv.dtype, recv.data);
}

Status NcclCommunicator::all_to_allv(ConstBuffer send, std::span<const int64_t> send_counts,
                                     MutableBuffer recv, std::span<const int64_t> recv_counts) {
  DI_TRY(check_all_to_allv_args(size_, send, send_counts, recv, recv_counts));
  DI_TRY(use_device());
  const size_t elem = static_cast<size_t>(dtype_size(send.dtype));
  size_t send_at = 0, recv_at = 0;
  NcclGroup group(comm_);
  for (int peer = 0; peer < size_; ++peer) {
    const size_t out_bytes = static_cast<size_t>(send_counts[static_cast<size_t>(peer)]) * elem;
    const size_t in_bytes = static_cast<size_t>(recv_counts[static_cast<size_t>(peer)]) * elem;
    // Zero counts post nothing: the peer posts nothing for them either (the counts pair up).
    if (out_bytes > 0) {
      group.add(ncclSend(static_cast<const char*>(send.data) + send_at, out_bytes, ncclUint8, peer,
                         comm_, stream_));
    }
    if (in_bytes > 0) {
      group.add(ncclRecv(static_cast<char*>(recv.data) + recv_at, in_bytes, ncclUint8, peer, comm_,
                         stream_));
    }
    send_at += out_bytes;
    recv_at += in_bytes;
  }
  return group.end("send/recv group (all_to_allv)");
}

Status NcclCommunicator::broadcast(MutableBuffer buffer, int root) {
  DI_TRY(check_broadcast_args(size_, buffer, root));
  DI_TRY(use_device());
  return nccl_status(ncclBroadcast(buffer.data, buffer.data, bytes_of(buffer.count, buffer.dtype),
                                   ncclUint8, root, comm_, stream_),
                     "ncclBroadcast", comm_);
}

Status NcclCommunicator::barrier() {
  DI_TRY(use_device());
  // A one-element all-reduce that every rank must join, then wait for it on the host.
  DI_TRY(nccl_status(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_),
                     "ncclAllReduce (barrier)", comm_));
  return cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (barrier)");
}

}  // namespace deepinfer::parallel
