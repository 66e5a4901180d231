// ContextParallel (see context_parallel.h): the checks at load, the zig-zag split, the row
// gathers.
#include "model/context_parallel.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"
#include "model/expert_parallel.h"
#include "model/layers/attention.h"
#include "model/layers/numerics.h"
#include "model/step.h"
#include "model/tensor_parallel.h"

namespace deepinfer::model {

Status ContextParallel::validate(const io::ModelConfig& /*config*/, const backend::Ops& ops,
                                 const ExpertParallel& ep) const {
  if (!enabled()) return {};
  const std::string what = "context parallelism (model::ContextParallel): ";
  if (ops.device_kind() != DeviceKind::kCpu) {
    return unimplemented(what + "backend '" + ops.name() +
                         "' keeps activations in device memory, and the gathers run on host "
                         "memory only (in-process ranks on the CPU backends); load without "
                         "ContextParallel on this backend, or use the CPU backend");
  }
  // Tensor parallelism beside it: each context-parallel rank is a tensor-parallel group (a grid
  // of cores; the tensor-parallel gathers run over this rank's rows inside the group).
  // Expert parallelism over the same ranks (the original engine's "balanced CP, MoE EP") or over
  // several context-parallel groups (data-parallel ranks of them, or the cores of a grid): each
  // rank routes its own rows through the exchange (in a grid each core its tensor-parallel share
  // of its context rank's rows, moe.h), or only serves its experts without rows (every core of a
  // context rank without rows alike).
  return ep.check_whole_groups(what, comm->size(), "context-parallel");
}

std::vector<int64_t> zigzag_rows(int64_t begin, int64_t count, int rank, int size) {
  DI_CHECK(size > 0 && rank >= 0 && rank < size && count >= 0);
  const int64_t chunks = 2 * static_cast<int64_t>(size);
  std::vector<int64_t> rows;
  for (const int64_t k : {static_cast<int64_t>(rank), chunks - 1 - rank}) {
    for (int64_t i = k * count / chunks; i < (k + 1) * count / chunks; ++i) {
      rows.push_back(begin + i);
    }
  }
  return rows;
}

int64_t causal_work(const std::vector<int64_t>& positions) {
  int64_t work = 0;
  for (const int64_t p : positions) work += p + 1;
  return work;
}

void ContextSplit::plan(const StepInputs& in) {
  const int n = comm_.size();
  rows_of_.assign(static_cast<size_t>(n), {});
  local_of_.assign(in.token_ids.size(), -1);
  for (int q = 0; q < n; ++q) {
    std::vector<int64_t>& rows = rows_of_[static_cast<size_t>(q)];
    for (const SequenceSpan& sq : in.sequences) {
      const std::vector<int64_t> r = zigzag_rows(sq.begin, sq.count, q, n);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    std::sort(rows.begin(), rows.end());  // sequences may come in any row order
  }
  const std::vector<int64_t>& me = mine();
  ids_.resize(me.size());
  positions_.resize(me.size());
  rows32_.resize(me.size());
  for (size_t i = 0; i < me.size(); ++i) {
    const auto r = static_cast<size_t>(me[i]);
    local_of_[r] = static_cast<int32_t>(i);
    ids_[i] = in.token_ids[r];
    positions_[i] = in.positions[r];
    rows32_[i] = static_cast<int32_t>(r);
  }
}

void ContextSplit::gather_rows(std::vector<backend::CMat> local, std::vector<backend::Mat> full,
                               const char* what) {
  DI_CHECK(local.size() == full.size());
  const int n = comm_.size();
  const int64_t m = static_cast<int64_t>(mine().size());
  // One all_gather for every matrix: a row of each rank's block is its rows of every matrix
  // side by side; blocks are padded to the rank with the most rows.
  int64_t width = 0;
  for (size_t k = 0; k < local.size(); ++k) {
    DI_CHECK(local[k].cols == full[k].cols && full[k].rows == step_rows());
    DI_CHECK(m == 0 || local[k].rows >= m);
    width += local[k].cols;
  }
  int64_t most = 0;
  for (const auto& rows : rows_of_) most = std::max(most, static_cast<int64_t>(rows.size()));
  const int64_t block = most * width;
  send_.assign(static_cast<size_t>(std::max<int64_t>(block, 1)), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    float* dst = send_.data() + i * width;
    for (const backend::CMat& l : local) {
      std::memcpy(dst, l.row(i), static_cast<size_t>(l.cols) * sizeof(float));
      dst += l.cols;
    }
  }
  recv_.resize(static_cast<size_t>(std::max<int64_t>(block * n, 1)));
  const Status s =
      comm_.all_gather({send_.data(), block, DType::kF32}, {recv_.data(), block * n, DType::kF32});
  if (!s.ok()) {
    throw parallel::CollectiveFailure(s.with_context(std::string("context parallelism, ") + what));
  }
  for (int q = 0; q < n; ++q) {
    const std::vector<int64_t>& rows = rows_of_[static_cast<size_t>(q)];
    for (size_t i = 0; i < rows.size(); ++i) {
      const float* src = recv_.data() + q * block + static_cast<int64_t>(i) * width;
      for (const backend::Mat& f : full) {
        std::memcpy(f.row(rows[i]), src, static_cast<size_t>(f.cols) * sizeof(float));
        src += f.cols;
      }
    }
  }
}

void ContextSplit::gather_cache_rows(AttentionRows& r) {
  const int64_t M = step_rows();
  backend::Mat* const parts[] = {&r.kv, &r.ckv, &r.cg, &r.ikv, &r.ig};
  std::vector<backend::CMat> local;
  std::vector<backend::Mat> full;
  for (size_t i = 0; i < std::size(parts); ++i) {
    backend::Mat& part = *parts[i];
    if (part.cols == 0) continue;  // the layer has no such rows (the same on every rank)
    local.push_back(part);
    part = backend::Mat(fit(cache_rows_[i], M * part.cols), M, part.cols);
    full.push_back(part);
  }
  gather_rows(local, full, "a layer's K=V and compressor rows");
}

}  // namespace deepinfer::model
