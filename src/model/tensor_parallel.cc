// TensorParallel (see tensor_parallel.h): the checks at load, the shards, the column gathers.
#include "model/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"
#include "model/expert_parallel.h"

namespace deepinfer::model {

Status TensorParallel::validate(const io::ModelConfig& c, const backend::Ops& ops,
                                const ExpertParallel& ep) const {
  if (!enabled()) return {};
  const std::string what = "tensor parallelism (model::TensorParallel): ";
  if (ops.device_kind() != DeviceKind::kCpu) {
    return unimplemented(what + "backend '" + ops.name() +
                         "' keeps activations in device memory, and the gathers run on host "
                         "memory only (in-process ranks on the CPU backends); load without "
                         "TensorParallel on this backend, or use the CPU backend");
  }
  // With expert parallelism beside it: over the same ranks, or over several tensor-parallel
  // groups (data-parallel ranks of tensor-parallel cores), each group's cores exchanging their
  // shares of the group's rows with every expert rank.
  DI_TRY(ep.check_whole_groups(what, comm->size(), "tensor-parallel"));
  if (c.o_groups <= 0 || c.num_heads % c.o_groups != 0) {
    return invalid_argument(what + "config " + c.source +
                            ": num_attention_heads must be a multiple of o_groups");
  }
  return {};
}

Shard shard_of(int64_t units, int rank, int size) {
  DI_CHECK(size > 0 && rank >= 0 && rank < size && units >= 0);
  const int64_t b = units * rank / size, e = units * (rank + 1) / size;
  return {b, e - b};
}

void TensorParallelGather::all_gather_blocks(int64_t block, const char* what) {
  const int64_t n = size();
  recv_.resize(static_cast<size_t>(std::max<int64_t>(block * n, 1)));
  const Status s =
      comm_.all_gather({send_.data(), block, DType::kF32}, {recv_.data(), block * n, DType::kF32});
  if (!s.ok()) {
    throw parallel::CollectiveFailure(s.with_context(std::string("tensor parallelism, ") + what));
  }
}

void TensorParallelGather::gather_cols(backend::CMat local, int64_t units, int64_t unit,
                                       backend::Mat full, const char* what) {
  const int n = size();
  const int64_t M = full.rows;
  DI_CHECK(local.rows == M && full.cols == units * unit && local.cols == shard(units).count * unit);
  // Equal blocks for all_gather: every rank sends its shard padded to the widest (shard_of's
  // largest is units / n rounded up).
  const int64_t widest = (units + n - 1) / n;
  const int64_t block = M * widest * unit;
  send_.assign(static_cast<size_t>(std::max<int64_t>(block, 1)), 0.0f);
  for (int64_t m = 0; m < M; ++m) {
    if (local.cols > 0) {
      std::memcpy(send_.data() + m * widest * unit, local.row(m),
                  static_cast<size_t>(local.cols) * sizeof(float));
    }
  }
  all_gather_blocks(block, what);
  for (int q = 0; q < n; ++q) {
    const Shard sh = shard_of(units, q, n);
    if (sh.count == 0) continue;
    const float* src = recv_.data() + q * block;
    for (int64_t m = 0; m < M; ++m) {
      std::memcpy(full.row(m) + sh.begin * unit, src + m * widest * unit,
                  static_cast<size_t>(sh.count * unit) * sizeof(float));
    }
  }
}

void TensorParallelGather::gather_rows(backend::Mat full, const char* what) {
  const int n = size();
  const int64_t M = full.rows, C = full.cols;
  // Equal blocks for all_gather: every rank sends its rows padded to the largest share (M / n
  // rounded up).
  const int64_t widest = (M + n - 1) / n;
  const int64_t block = widest * C;
  const Shard mine = shard(M);
  send_.assign(static_cast<size_t>(std::max<int64_t>(block, 1)), 0.0f);
  for (int64_t i = 0; i < mine.count; ++i) {
    std::memcpy(send_.data() + i * C, full.row(mine.begin + i),
                static_cast<size_t>(C) * sizeof(float));
  }
  all_gather_blocks(block, what);
  for (int q = 0; q < n; ++q) {
    const Shard sh = shard_of(M, q, n);
    if (q == rank()) continue;
    for (int64_t i = 0; i < sh.count; ++i) {
      std::memcpy(full.row(sh.begin + i), recv_.data() + q * block + i * C,
                  static_cast<size_t>(C) * sizeof(float));
    }
  }
}

void TensorParallelGather::linear_gathered(backend::Ops& ops, backend::CMat x,
                                           const backend::WeightRef& w_shard,
                                           const backend::LinearOpts& opts, backend::Mat y,
                                           const char* what) {
  const int64_t M = x.rows, N = y.cols;
  DI_CHECK(w_shard.n == shard(N).count);
  local_.resize(static_cast<size_t>(std::max<int64_t>(M * w_shard.n, 1)));
  backend::Mat part(local_.data(), M, w_shard.n);
  if (M > 0 && w_shard.n > 0) ops.linear(x, w_shard, part, opts);
  gather_cols(part, N, 1, y, what);
}

}  // namespace deepinfer::model
