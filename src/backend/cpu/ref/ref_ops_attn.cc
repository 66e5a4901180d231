// RefOps, attention side: sparse MQA with sink, compressor pooling, lightning indexer, top-k.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/cpu/ref/ref_ops.h"
#include "backend/quant.h"
#include "base/check.h"

namespace deepinfer::backend::cpu {

void RefOps::sparse_attention(CMat q, int64_t n_heads, CMat kv, const int32_t* idx, int64_t L,
                              const float* sink, float scale, bool bf16_probs, Mat o) {
  const int64_t d = kv.cols;
  DI_CHECK(q.cols == n_heads * d && o.rows == q.rows && o.cols == q.cols);
  for (int64_t t = 0; t < q.rows; ++t) {
    std::vector<int64_t> rows;
    for (int64_t j = 0; j < L; ++j) {
      const int32_t r = idx[t * L + j];
      if (r < 0) continue;
      DI_CHECK(r < kv.rows);
      rows.push_back(r);
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q.row(t) + h * d;
      float* oh = o.row(t) + h * d;
      if (rows.empty()) {
        std::fill(oh, oh + d, 0.0f);
        continue;
      }
      std::vector<float> z(rows.size());
      for (size_t j = 0; j < rows.size(); ++j) {
        double acc = 0.0;
        for (int64_t c = 0; c < d; ++c) acc += static_cast<double>(qh[c]) * kv.at(rows[j], c);
        z[j] = static_cast<float>(acc) * scale;
      }
      const float mx = *std::max_element(z.begin(), z.end());
      double den = sink ? std::exp(static_cast<double>(sink[h]) - mx) : 0.0;
      std::vector<float> e(z.size());
      for (size_t j = 0; j < z.size(); ++j) {
        e[j] = std::exp(z[j] - mx);
        den += e[j];
      }
      std::vector<double> acc(static_cast<size_t>(d), 0.0);
      for (size_t j = 0; j < rows.size(); ++j) {
        const double pj = bf16_probs ? bf16_round(e[j]) : e[j];
        for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += pj * kv.at(rows[j], c);
      }
      for (int64_t c = 0; c < d; ++c) oh[c] = static_cast<float>(acc[static_cast<size_t>(c)] / den);
    }
  }
}

void RefOps::softmax_pool(std::span<const PoolSlot> slots, int64_t slots_per_row, Mat out) {
  DI_CHECK(slots_per_row > 0 && static_cast<int64_t>(slots.size()) == out.rows * slots_per_row);
  for (int64_t r = 0; r < out.rows; ++r) {
    const PoolSlot* s = slots.data() + r * slots_per_row;
    for (int64_t c = 0; c < out.cols; ++c) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < slots_per_row; ++j) {
        if (s[j].value) mx = std::max(mx, static_cast<double>(s[j].gate[c]));
      }
      double den = 0.0, num = 0.0;
      for (int64_t j = 0; j < slots_per_row; ++j) {
        if (!s[j].value) continue;
        const double e = std::exp(s[j].gate[c] - mx);
        den += e;
        num += e * s[j].value[c];
      }
      out.at(r, c) = den > 0.0 ? static_cast<float>(num / den) : 0.0f;
    }
  }
}

void RefOps::indexer_scores(CMat q, int64_t n_heads, CMat weights, CMat keys,
                            const int32_t* visible, bool bf16_rounding, Mat scores) {
  const int64_t di = keys.cols;
  DI_CHECK(q.cols == n_heads * di && weights.cols == n_heads && scores.cols == keys.rows &&
           scores.rows == q.rows);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < q.rows; ++t) {
    const int64_t vis = std::min<int64_t>(visible[t], keys.rows);
    for (int64_t w = 0; w < keys.rows; ++w) {
      if (w >= vis) {
        scores.at(t, w) = neg_inf;
        continue;
      }
      double sum = 0.0;
      for (int64_t h = 0; h < n_heads; ++h) {
        double dot = 0.0;
        for (int64_t c = 0; c < di; ++c)
          dot += static_cast<double>(q.at(t, h * di + c)) * keys.at(w, c);
        float dv = static_cast<float>(dot);
        if (bf16_rounding) dv = bf16_round(dv);
        float prod = std::max(dv, 0.0f) * weights.at(t, h);
        if (bf16_rounding) prod = bf16_round(prod);
        sum += prod;
      }
      const float s = static_cast<float>(sum);
      scores.at(t, w) = bf16_rounding ? bf16_round(s) : s;
    }
  }
}

void RefOps::topk(CMat scores, const int32_t* visible, int64_t k, int32_t* out) {
  for (int64_t t = 0; t < scores.rows; ++t) {
    const int64_t vis = std::clamp<int64_t>(visible[t], 0, scores.cols);
    std::vector<int32_t> order(static_cast<size_t>(vis));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return scores.at(t, a) > scores.at(t, b); });
    for (int64_t j = 0; j < k; ++j) {
      const bool pick = j < vis && scores.at(t, order[static_cast<size_t>(j)]) >
                                       -std::numeric_limits<float>::infinity();
      out[t * k + j] = pick ? order[static_cast<size_t>(j)] : -1;
    }
  }
}

}  // namespace deepinfer::backend::cpu
