// The interface's shared pieces: the rank-order sum (the numerics every implementation must
// reproduce) and the per-rank argument checks, so that both implementations reject the same
// calls with the same messages.
#include "parallel/communicator.h"

#include <cstring>
#include <string>
#include <vector>

namespace deepinfer::parallel {
namespace {

bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  if (a_bytes <= 0 || b_bytes <= 0) return false;
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

Status check_buffer(const char* op, const char* name, const void* data, int64_t count) {
  if (count < 0) {
    return invalid_argument(std::string(op) + ": " + name + " has a negative count (" +
                            std::to_string(count) + ")");
  }
  if (count > 0 && data == nullptr) {
    return invalid_argument(std::string(op) + ": " + name + " is null but holds " +
                            std::to_string(count) + " elements");
  }
  return Status();
}

Status check_same_dtype(const char* op, DType send, DType recv) {
  if (send == recv) return Status();
  return invalid_argument(std::string(op) + ": send is " + std::string(dtype_name(send)) +
                          " but recv is " + std::string(dtype_name(recv)) +
                          " (collectives do not convert)");
}

Status check_summable(const char* op, DType dtype) {
  if (is_summable(dtype)) return Status();
  return unimplemented(std::string(op) + ": sums are defined for F32 and I32, not " +
                       std::string(dtype_name(dtype)) +
                       " (gather the values and sum them in FP32 instead)");
}

Status check_counts(const char* op, const char* name, std::span<const int64_t> counts, int size,
                    int64_t capacity) {
  if (static_cast<int64_t>(counts.size()) != size) {
    return invalid_argument(std::string(op) + ": " + name + " has " +
                            std::to_string(counts.size()) + " entries for " + std::to_string(size) +
                            " ranks");
  }
  int64_t total = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] < 0) {
      return invalid_argument(std::string(op) + ": " + name + "[" + std::to_string(p) +
                              "] is negative (" + std::to_string(counts[p]) + ")");
    }
    total += counts[p];
  }
  if (total > capacity) {
    return invalid_argument(std::string(op) + ": " + name + " add up to " + std::to_string(total) +
                            " elements but the buffer holds " + std::to_string(capacity));
  }
  return Status();
}

template <typename T>
void fold_in_rank_order(std::span<const void* const> parts, int64_t count, T* out) {
  // Element i's sequence of additions is parts[0][i] + parts[1][i] + ... whichever loop runs
  // outside; rank-outer keeps each pass a streaming loop. parts[0] is copied first so out may
  // alias it (and only it: a later part would be read after out was written).
  const T* first = static_cast<const T*>(parts[0]);
  if (out != first) std::memmove(out, first, static_cast<size_t>(count) * sizeof(T));
  for (size_t r = 1; r < parts.size(); ++r) {
    const T* part = static_cast<const T*>(parts[r]);
    for (int64_t i = 0; i < count; ++i) out[i] += part[i];
  }
}

// What every two-buffer collective checks first: both buffers, and one dtype for both.
Status check_send_recv(const char* op, ConstBuffer send, MutableBuffer recv) {
  DI_TRY(check_buffer(op, "send", send.data, send.count));
  DI_TRY(check_buffer(op, "recv", recv.data, recv.count));
  return check_same_dtype(op, send.dtype, recv.dtype);
}

}  // namespace

Status Communicator::all_to_all(ConstBuffer send, MutableBuffer recv) {
  const int n = size();
  if (send.count != recv.count || send.count % n != 0) {
    return invalid_argument("all_to_all: send and recv must both hold size() equal blocks (send " +
                            std::to_string(send.count) + ", recv " + std::to_string(recv.count) +
                            " elements, " + std::to_string(n) + " ranks)");
  }
  const std::vector<int64_t> counts(static_cast<size_t>(n), send.count / n);
  return all_to_allv(send, counts, recv, counts);
}

bool is_summable(DType dtype) { return dtype == DType::kF32 || dtype == DType::kI32; }

Status sum_in_rank_order(std::span<const void* const> parts, int64_t count, DType dtype,
                         void* out) {
  if (parts.empty()) return invalid_argument("sum_in_rank_order: no parts to sum");
  DI_TRY(check_summable("sum_in_rank_order", dtype));
  if (count <= 0) return Status();
  if (dtype == DType::kF32) {
    fold_in_rank_order(parts, count, static_cast<float*>(out));
  } else {
    // int32 sums wrap modulo 2^32 (NCCL's behaviour); unsigned arithmetic keeps that defined.
    fold_in_rank_order(parts, count, static_cast<uint32_t*>(out));
  }
  return Status();
}

Status check_all_reduce_args(int size, ConstBuffer send, MutableBuffer recv) {
  constexpr const char* kOp = "all_reduce_sum";
  (void)size;
  DI_TRY(check_send_recv(kOp, send, recv));
  DI_TRY(check_summable(kOp, send.dtype));
  if (send.count != recv.count) {
    return invalid_argument(std::string(kOp) + ": send holds " + std::to_string(send.count) +
                            " elements but recv " + std::to_string(recv.count) +
                            " (they must be equal)");
  }
  return Status();
}

Status check_all_gather_args(int size, ConstBuffer send, MutableBuffer recv) {
  constexpr const char* kOp = "all_gather";
  DI_TRY(check_send_recv(kOp, send, recv));
  if (recv.count != send.count * size) {
    return invalid_argument(std::string(kOp) + ": recv must hold size() * send.count = " +
                            std::to_string(send.count * size) + " elements, not " +
                            std::to_string(recv.count));
  }
  return Status();
}

Status check_reduce_scatter_args(int size, ConstBuffer send, MutableBuffer recv) {
  constexpr const char* kOp = "reduce_scatter_sum";
  DI_TRY(check_send_recv(kOp, send, recv));
  DI_TRY(check_summable(kOp, send.dtype));
  if (send.count != recv.count * size) {
    return invalid_argument(std::string(kOp) + ": send must hold size() * recv.count = " +
                            std::to_string(recv.count * size) + " elements, not " +
                            std::to_string(send.count));
  }
  const int bytes = dtype_size(send.dtype);
  if (overlaps(send.data, send.count * bytes, recv.data, recv.count * bytes)) {
    return invalid_argument(std::string(kOp) + ": recv overlaps send");
  }
  return Status();
}

Status check_all_to_allv_args(int size, ConstBuffer send, std::span<const int64_t> send_counts,
                              MutableBuffer recv, std::span<const int64_t> recv_counts) {
  constexpr const char* kOp = "all_to_allv";
  DI_TRY(check_send_recv(kOp, send, recv));
  DI_TRY(check_counts(kOp, "send_counts", send_counts, size, send.count));
  DI_TRY(check_counts(kOp, "recv_counts", recv_counts, size, recv.count));
  const int bytes = dtype_size(send.dtype);
  if (overlaps(send.data, send.count * bytes, recv.data, recv.count * bytes)) {
    return invalid_argument(std::string(kOp) + ": recv overlaps send");
  }
  return Status();
}

Status check_broadcast_args(int size, MutableBuffer buffer, int root) {
  constexpr const char* kOp = "broadcast";
  DI_TRY(check_buffer(kOp, "buffer", buffer.data, buffer.count));
  if (root < 0 || root >= size) {
    return invalid_argument(std::string(kOp) + ": root " + std::to_string(root) +
                            " is not a rank of this group (0.." + std::to_string(size - 1) + ")");
  }
  return Status();
}

}  // namespace deepinfer::parallel
