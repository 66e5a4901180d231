// The rank-order sum on the device, for NcclCommunicator's batch-invariant mode
// (src/parallel/nccl_communicator.h): NCCL's own reductions add in a topology-dependent order, so
// that mode gathers every rank's values and folds them here in rank order, the rule of
// src/parallel/communicator.h. Plain C++ so host code compiled with the project's warnings can
// include it; its own library (deepinfer::kernels_cuda_parallel) so the communicator links
// without the model's kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::kernels::cuda {

enum class SumType : int { kF32 = 0, kI32 = 1 };

// out[i] = ((gathered[0][i] + gathered[1][i]) + ...) + gathered[ranks - 1][i], where
// gathered[r] = gathered + r * count (device pointers; out may be gathered[0]'s storage only).
// FP32 adds round to nearest, one at a time, as on the host; int32 wraps modulo 2^32.
// Only enqueues on `stream`; returns the launch error.
cudaError_t launch_rank_order_sum(const void* gathered, int ranks, int64_t count, SumType type,
                                  void* out, cudaStream_t stream);

}  // namespace deepinfer::kernels::cuda
