// OptOps::moe_experts: the routed (or shared) experts of one MoE layer over a batch of tokens.
//
// Each expert runs w1/w3 -> SwiGLU -> w2 on the tokens routed to it (gathered, in token order).
// With at least as many active experts as threads, experts are the parallel tasks (one task =
// one expert's three GEMMs, whose inner loops then run inline): a prefill step's ~100-row expert
// GEMMs no longer fan out three times each with an uneven tile split, and a decode step's seven
// experts stream their weights on both cores with one hand-off per layer instead of ~20. Each
// expert writes its weighted output rows to a per-(token, slot) buffer; the tokens then sum their
// slots in ascending expert id, the order of the sequential loop, so the result is the same bits
// for any thread count or task split (the GEMMs themselves are batch- and split-invariant).
#include <algorithm>
#include <numeric>
#include <vector>

#include "backend/cpu/opt/kernels.h"
#include "backend/cpu/opt/opt_ops.h"
#include "backend/quant.h"
#include "base/check.h"

namespace deepinfer::backend::cpu {

void OptOps::moe_experts(CMat x, const int32_t* ids, CMat weights, int top_k,
                         std::span<const ExpertWeights> experts, const MoeOpts& opts, Mat out) {
  DI_CHECK(out.rows == x.rows && weights.cols == top_k);
  const int64_t M = x.rows, D = x.cols, O = out.cols;
  // Token lists per expert, in token order.
  std::vector<std::vector<std::pair<int64_t, int>>> by_expert(experts.size());
  for (int64_t m = 0; m < M; ++m) {
    for (int j = 0; j < top_k; ++j) {
      const int32_t e = ids[m * top_k + j];
      if (e < 0) continue;
      DI_CHECK(static_cast<size_t>(e) < experts.size());
      by_expert[static_cast<size_t>(e)].push_back({m, j});
    }
  }
  std::vector<int64_t> active;
  for (size_t e = 0; e < experts.size(); ++e)
    if (!by_expert[e].empty()) active.push_back(static_cast<int64_t>(e));
  // Output rows per (token, slot): row m * top_k + j. Every row that is read is written first,
  // so the buffer is reused across calls without clearing (a fresh 9 MiB zeroed vector per 0.3B
  // prefill layer cost a memset and a page fault per 4 KiB).
  thread_local std::vector<float> slot_buf;
  if (slot_buf.size() < static_cast<size_t>(M * top_k * O))
    slot_buf.resize(static_cast<size_t>(M * top_k * O));
  float* const slot_out = slot_buf.data();

  const auto run_expert = [&](size_t e) {
    thread_local std::vector<float> xg, xq, a, b, y;
    const auto round_all = [&](std::vector<float>& v, size_t n) {
      if (opts.bf16_rounding)
        for (size_t i = 0; i < n; ++i) v[i] = bf16_round(v[i]);
    };
    const auto& list = by_expert[e];
    const ExpertWeights& ew = experts[e];
    const int64_t T = static_cast<int64_t>(list.size()), I = ew.w1.n;
    DI_CHECK(ew.w1.k == D && ew.w3.k == D && ew.w3.n == I && ew.w2.k == I && ew.w2.n == O);
    xg.resize(static_cast<size_t>(T * D));
    for (int64_t i = 0; i < T; ++i)
      std::copy(x.row(list[static_cast<size_t>(i)].first),
                x.row(list[static_cast<size_t>(i)].first) + D, xg.data() + i * D);
    xq.resize(xg.size());
    quantized_input(CMat(xg.data(), T, D), ew.w1, opts.act_quant, opts.act_block, xq.data());
    a.resize(static_cast<size_t>(T * I));
    b.resize(static_cast<size_t>(T * I));
    gemm(CMat(xq.data(), T, D), ew.w1, Mat(a.data(), T, I));
    if (ew.w3.quantized() != ew.w1.quantized()) {
      quantized_input(CMat(xg.data(), T, D), ew.w3, opts.act_quant, opts.act_block, xq.data());
    }
    gemm(CMat(xq.data(), T, D), ew.w3, Mat(b.data(), T, I));
    round_all(a, static_cast<size_t>(T * I));
    round_all(b, static_cast<size_t>(T * I));
    swiglu(CMat(a.data(), T, I), CMat(b.data(), T, I), opts.swiglu_limit, Mat(a.data(), T, I));
    if (opts.weight_before_w2) {
      for (int64_t i = 0; i < T; ++i) {
        const auto [m, j] = list[static_cast<size_t>(i)];
        opt::scale_to(a.data() + i * I, weights.at(m, j), a.data() + i * I, I);
      }
    }
    round_all(a, static_cast<size_t>(T * I));
    xq.resize(static_cast<size_t>(T * I));
    quantized_input(CMat(a.data(), T, I), ew.w2, opts.act_quant, opts.act_block, xq.data());
    y.resize(static_cast<size_t>(T * O));
    gemm(CMat(xq.data(), T, I), ew.w2, Mat(y.data(), T, O));
    round_all(y, static_cast<size_t>(T * O));
    for (int64_t i = 0; i < T; ++i) {
      const auto [m, j] = list[static_cast<size_t>(i)];
      const float* yr = y.data() + i * O;
      float* dst = slot_out + (m * top_k + j) * O;
      if (opts.weight_before_w2) {
        std::copy(yr, yr + O, dst);
      } else {
        const float g = weights.at(m, j);
        for (int64_t c = 0; c < O; ++c) {
          dst[c] = yr[c] * g;
          if (opts.bf16_rounding) dst[c] = bf16_round(dst[c]);
        }
      }
    }
  };
  const auto n_active = static_cast<int64_t>(active.size());
  if (n_active >= pool_.size()) {
    pool_.parallel_for(
        n_active,
        [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) run_expert(static_cast<size_t>(active[i]));
        },
        1);
  } else {
    for (const int64_t e : active) run_expert(static_cast<size_t>(e));  // GEMMs fan out inside
  }

  // Per token: its slots in ascending expert id (ties in slot order), summed from zero.
  pool_.parallel_for(
      M,
      [&](int64_t m0, int64_t m1) {
        std::vector<int> order(static_cast<size_t>(top_k));
        std::vector<float> acc(static_cast<size_t>(O));
        for (int64_t m = m0; m < m1; ++m) {
          std::iota(order.begin(), order.end(), 0);
          const int32_t* im = ids + m * top_k;
          std::stable_sort(order.begin(), order.end(), [&](int p, int q) { return im[p] < im[q]; });
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (const int j : order) {
            if (im[j] < 0) continue;
            const float* src = slot_out + (m * top_k + j) * O;
            for (int64_t c = 0; c < O; ++c) acc[static_cast<size_t>(c)] += src[c];
          }
          float* o = out.row(m);
          for (int64_t c = 0; c < O; ++c) {
            const float v = (opts.accumulate ? o[c] : 0.0f) + acc[static_cast<size_t>(c)];
            o[c] = opts.round_out ? bf16_round(v) : v;
          }
        }
      },
      opt::grain_for(top_k * O));
}

}  // namespace deepinfer::backend::cpu
