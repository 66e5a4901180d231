// The MoE FFN under tensor parallelism (see moe_tp.h).
#include "model/layers/moe_tp.h"

#include <numeric>
#include <vector>

#include "backend/quant.h"
#include "base/check.h"
#include "model/layers/moe.h"
#include "model/layers/numerics.h"
#include "parallel/ep_dispatch.h"

namespace deepinfer::model {

namespace {

backend::LinearOpts linear_opts(const backend::MoeOpts& opts) {
  backend::LinearOpts lo;
  lo.act_quant = opts.act_quant;
  lo.act_block = opts.act_block;
  lo.round_bf16 = opts.bf16_rounding;
  return lo;
}

// rows [0, T) of x scaled by their gate weights (gates[i]), then BF16-rounded when `round`:
// moe_experts' `h *= g` (weight before w2) or `y * g` (after), as host loops.
void scale_rows(backend::Mat x, const float* gates, bool round) {
  for (int64_t i = 0; i < x.rows; ++i) {
    float* r = x.row(i);
    const float gi = gates[i];
    for (int64_t c = 0; c < x.cols; ++c) {
      r[c] *= gi;
      if (round) r[c] = backend::bf16_round(r[c]);
    }
  }
}

}  // namespace

void routed_experts_split(backend::Ops& ops, const backend::MoeOpts& opts, const MoeWeights& w,
                          backend::CMat v, const int32_t* ids, backend::CMat g, backend::Mat out,
                          MoeScratch& s, TensorParallelGather& tp) {
  const int64_t M = v.rows, D = v.cols, k = w.top_k;
  const TensorSplit& split = w.tp;
  const int64_t Il = split.routed_inter.count, I = split.routed_inter_rows, Dl = split.hidden.count;
  DI_CHECK(split.routed && g.cols == k && out.rows == M && !opts.round_out);
  // The (token, slot) pairs grouped by expert, ascending id, tokens in order within an expert
  // (every rank builds the same order from the same ids): row r of the grouped matrices below.
  const auto E = static_cast<int64_t>(w.experts.size());
  std::vector<int64_t> offset(static_cast<size_t>(E + 1), 0);
  for (int64_t p = 0; p < M * k; ++p) {
    const int32_t e = ids[p];
    if (e < 0) continue;
    DI_CHECK(e < E);
    ++offset[static_cast<size_t>(e) + 1];
  }
  std::partial_sum(offset.begin(), offset.end(), offset.begin());
  const int64_t P = offset[static_cast<size_t>(E)];
  std::vector<int64_t> pair_row(static_cast<size_t>(M * k), -1);
  std::vector<int64_t> cursor = offset;  // the next row of each expert (its last entry unused)
  std::vector<int32_t> row_token(static_cast<size_t>(P));
  std::vector<float> row_gate(static_cast<size_t>(P));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[m * k + j];
      if (e < 0) continue;
      const int64_t r = cursor[static_cast<size_t>(e)]++;
      pair_row[static_cast<size_t>(m * k + j)] = r;
      row_token[static_cast<size_t>(r)] = static_cast<int32_t>(m);
      row_gate[static_cast<size_t>(r)] = g.at(m, j);
    }
  }
  const backend::LinearOpts lo = linear_opts(opts);
  // Gate-up on this rank's intermediate rows: h_part [P, Il] (its SwiGLU output, weighted before
  // w2 when the numerics say so), then every rank's columns gathered into h [P, I].
  backend::Mat h_part(fit(s.pair_part, P * Il), P, Il);
  for (int64_t e = 0; e < E && Il > 0; ++e) {
    const int64_t r0 = offset[static_cast<size_t>(e)], T = offset[static_cast<size_t>(e) + 1] - r0;
    if (T == 0) continue;
    const backend::ExpertWeights& ew = w.experts[static_cast<size_t>(e)];
    backend::Mat xg(fit(s.rows_in, T * D), T, D);
    ops.copy_rows(v, row_token.data() + r0, xg);
    backend::Mat a = h_part.rows_slice(r0, T), b(fit(s.up_part, T * Il), T, Il);
    ops.linear(xg, ew.w1, a, lo);
    ops.linear(xg, ew.w3, b, lo);
    ops.swiglu(a, b, opts.swiglu_limit, a);
    if (opts.weight_before_w2) {
      scale_rows(a, row_gate.data() + r0, opts.bf16_rounding);
    } else if (opts.bf16_rounding) {
      ops.round_bf16(a);
    }
  }
  backend::Mat h(fit(s.pair_all, P * I), P, I);
  tp.gather_cols(h_part, I, 1, h, "routed experts' intermediate");
  // Down on this rank's hidden channels: y [P, Dl], weighted after w2 when the numerics say so.
  backend::Mat y(fit(s.out_part, P * Dl), P, Dl);
  for (int64_t e = 0; e < E && Dl > 0; ++e) {
    const int64_t r0 = offset[static_cast<size_t>(e)], T = offset[static_cast<size_t>(e) + 1] - r0;
    if (T == 0) continue;
    const backend::Mat ye = y.rows_slice(r0, T);
    ops.linear(backend::CMat(h).rows_slice(r0, T), w.experts[static_cast<size_t>(e)].w2, ye, lo);
    if (!opts.weight_before_w2) scale_rows(ye, row_gate.data() + r0, opts.bf16_rounding);
  }
  // Each token's pairs in ascending expert id (ties in slot order), summed from zero in FP32:
  // moe_experts' order (its rounding of out is the caller's act, after the gather).
  if (Dl > 0) {
    parallel::sum_pairs_in_expert_order(ids, M, static_cast<int>(k), pair_row.data(), y.data, y.ld,
                                        Dl, out.data + split.hidden.begin, out.ld);
  }
}

// The steps of Ops::moe_experts for one expert with gate weight 1 (w1, w3, their BF16 rounding,
// SwiGLU, the rounding of h, w2 and its rounding), as separate ops: w1/w3 of this rank's
// intermediate rows, h gathered, w2 of this rank's hidden channels added to out's, out
// gathered. The same bits as the fused op: a weight of 1 changes nothing, and out (the routed
// sum, formed from +0) is never -0, so out + y equals moe_experts' out + (0 + y).
void shared_expert_split(backend::Ops& ops, const backend::MoeOpts& opts,
                         const backend::ExpertWeights& e, const TensorSplit& split,
                         backend::CMat v, backend::Mat out, MoeScratch& s,
                         TensorParallelGather& tp) {
  const int64_t M = v.rows, Il = split.inter.count, I = e.w2.k, Dl = split.hidden.count;
  const backend::LinearOpts lo = linear_opts(opts);
  backend::Mat a(fit(s.gate_part, M * Il), M, Il), b(fit(s.up_part, M * Il), M, Il);
  if (Il > 0) {
    ops.linear(v, e.w1, a, lo);
    ops.linear(v, e.w3, b, lo);
    ops.swiglu(a, b, opts.swiglu_limit, a);
    if (opts.bf16_rounding) ops.round_bf16(a);
  }
  backend::Mat h(fit(s.act_all, M * I), M, I);
  tp.gather_cols(a, I, 1, h, "shared expert intermediate");
  backend::Mat y(fit(s.out_part, M * Dl), M, Dl);
  const backend::Mat mine = out.cols_slice(split.hidden.begin, Dl);
  if (Dl > 0) {
    ops.linear(h, e.w2, y, lo);
    ops.add(mine, y, mine);
  }
  tp.gather_cols(mine, out.cols, 1, out, "shared expert output");
}

}  // namespace deepinfer::model
