// MoeExchange (see moe_ep.h): dispatch, the local experts on the received rows, combine.
#include "model/layers/moe_ep.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace deepinfer::model {

namespace {

void throw_if_failed(const Status& s, size_t layer) {
  if (!s.ok()) {
    throw parallel::CollectiveFailure(
        s.with_context("expert parallelism, MoE layer " + std::to_string(layer)));
  }
}

}  // namespace

MoeExchange::MoeExchange(const ExpertParallel& ep, size_t layers, int64_t hidden)
    : ep_(ep), layers_(layers), hidden_(hidden) {
  make_dispatchers();
}

void MoeExchange::make_dispatchers() {
  dispatchers_.clear();
  dispatchers_.reserve(layers_);
  for (size_t l = 0; l < layers_; ++l) {
    dispatchers_.push_back(
        std::make_unique<parallel::EpDispatcher>(*ep_.comm, ep_.placement(l), hidden_));
  }
}

void MoeExchange::set_placements(std::vector<parallel::ExpertPlacement> placements) {
  // A dispatcher keeps only the plan of its last dispatch, which the next dispatch replaces:
  // new ones lose nothing but their reusable buffers.
  ep_.placements = std::move(placements);
  make_dispatchers();
}

void MoeExchange::routed(backend::Ops& ops, size_t layer, backend::CMat v, const int32_t* ids,
                         backend::CMat g, int top_k, std::span<const backend::ExpertWeights> local,
                         const backend::MoeOpts& opts, backend::Mat out) {
  DI_CHECK(layer < dispatchers_.size() && !opts.accumulate && out.rows == v.rows);
  parallel::EpDispatcher& d = *dispatchers_[layer];
  const int64_t M = v.rows, D = v.cols, pairs = M * top_k;
  // The step's matrices are dense rows (stride == cols): spans over them, empty for M == 0.
  DI_CHECK(M == 0 || (v.ld == D && g.ld == top_k && out.ld == out.cols));
  const std::span<const float> rows_in(M > 0 ? v.data : nullptr, static_cast<size_t>(M * D));
  const std::span<const int32_t> id_span(M > 0 ? ids : nullptr, static_cast<size_t>(pairs));
  const std::span<const float> g_span(M > 0 ? g.data : nullptr, static_cast<size_t>(pairs));
  throw_if_failed(d.dispatch_weighted(rows_in, M, top_k, id_span, g_span, &rows_), layer);

  // The received rows, one pair each, through this rank's experts (indexed locally).
  const int64_t R = rows_.num_rows();
  DI_CHECK(rows_.local_experts.size() == local.size());
  outputs_.resize(static_cast<size_t>(R * D));
  if (R > 0) {
    local_ids_.resize(static_cast<size_t>(R));
    for (size_t i = 0; i < rows_.local_experts.size(); ++i) {
      std::fill(local_ids_.begin() + rows_.expert_offsets[i],
                local_ids_.begin() + rows_.expert_offsets[i + 1], static_cast<int32_t>(i));
    }
    ops.moe_experts(backend::CMat(rows_.rows.data(), R, D), local_ids_.data(),
                    backend::CMat(rows_.weights.data(), R, 1), 1, local, opts,
                    backend::Mat(outputs_.data(), R, D));
  }
  const std::span<float> out_span(M > 0 ? out.data : nullptr, static_cast<size_t>(M * D));
  throw_if_failed(d.combine_in_expert_order(outputs_, out_span), layer);
}

void MoeExchange::count(size_t layer, const int32_t* ids, int64_t n) {
  if (ep_.load_counter == nullptr || n == 0) return;
  // The ids come from the router: in range by construction, so add() cannot refuse them.
  const Status s = ep_.load_counter->add(static_cast<int>(layer),
                                         std::span<const int32_t>(ids, static_cast<size_t>(n)));
  DI_CHECK(s.ok());
}

}  // namespace deepinfer::model
