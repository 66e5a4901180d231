// Host defaults of the ops DeepSeek-V4.1 adds to the contract (see ops.h): the single-pass mHC
// collapse, NVFP4 fake-quant, the CSA2 candidate blocks and the Engram gate. They are the plain
// loops both CPU backends run (the FP32 oracle and the threaded backend agree by construction);
// a device backend overrides them with kernels, or lacks the feature and refuses V4.1
// checkpoints at load.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/ops.h"
#include "backend/quant.h"
#include "base/check.h"

namespace deepinfer::backend {

void Ops::hc_collapse(CMat streams, CMat pre, int n, Mat y) {
  const int64_t D = y.cols;
  DI_CHECK(streams.cols == n * D && pre.cols == n && pre.rows == streams.rows &&
           y.rows == streams.rows);
  for (int64_t m = 0; m < streams.rows; ++m) {
    const float* x = streams.row(m);
    const float* c = pre.row(m);
    float* out = y.row(m);
    for (int64_t d = 0; d < D; ++d) {
      float acc = c[0] * x[d];
      for (int i = 1; i < n; ++i) acc += c[i] * x[i * D + d];
      out[d] = acc;
    }
  }
}

void Ops::fake_quant_nvfp4(Mat x, int64_t block) {
  DI_CHECK(block > 0);
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t b = 0; b < x.cols; b += block) {
      fake_quant_block_nvfp4(x.row(m) + b, std::min(block, x.cols - b));
    }
  }
}

void Ops::candidate_blocks(CMat scores, const int32_t* visible, int64_t block_size,
                           int64_t n_blocks, int32_t* out) {
  DI_CHECK(block_size > 0 && n_blocks > 0);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> best;
  std::vector<int32_t> order;
  for (int64_t t = 0; t < scores.rows; ++t) {
    const int64_t vis = std::clamp<int64_t>(visible[t], 0, scores.cols);
    const int64_t nb = (vis + block_size - 1) / block_size;
    best.assign(static_cast<size_t>(nb), -kInf);
    const float* row = scores.row(t);
    for (int64_t r = 0; r < vis; ++r) {
      float& b = best[static_cast<size_t>(r / block_size)];
      b = std::max(b, row[r]);
    }
    if (nb > 0) best[static_cast<size_t>(nb - 1)] = kInf;  // the newest visible row's block
    order.clear();
    for (int32_t b = 0; b < static_cast<int32_t>(nb); ++b) {
      if (best[static_cast<size_t>(b)] > -kInf) order.push_back(b);
    }
    const size_t keep = std::min(order.size(), static_cast<size_t>(n_blocks));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](int32_t a, int32_t b) {
                        const float sa = best[static_cast<size_t>(a)];
                        const float sb = best[static_cast<size_t>(b)];
                        return sa > sb || (sa == sb && a < b);
                      });
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
    int32_t* o = out + t * n_blocks;
    for (int64_t j = 0; j < n_blocks; ++j) {
      o[j] = j < static_cast<int64_t>(keep) ? order[static_cast<size_t>(j)] : -1;
    }
  }
}

void Ops::restrict_to_blocks(Mat scores, const int32_t* visible, const int32_t* blocks,
                             int64_t n_blocks, int64_t block_size) {
  DI_CHECK(block_size > 0 && n_blocks > 0);
  std::vector<uint8_t> keep;
  for (int64_t t = 0; t < scores.rows; ++t) {
    const int64_t vis = std::clamp<int64_t>(visible[t], 0, scores.cols);
    keep.assign(static_cast<size_t>((vis + block_size - 1) / block_size), 0);
    for (int64_t j = 0; j < n_blocks; ++j) {
      const int32_t b = blocks[t * n_blocks + j];
      if (b >= 0 && b < static_cast<int32_t>(keep.size())) keep[static_cast<size_t>(b)] = 1;
    }
    float* row = scores.row(t);
    for (int64_t r = 0; r < vis; ++r) {
      if (keep[static_cast<size_t>(r / block_size)] == 0) {
        row[r] = -std::numeric_limits<float>::infinity();
      }
    }
  }
}

void Ops::engram_gate(Mat streams, CMat kv, CMat w, int n, float eps) {
  const int64_t D = w.cols;
  DI_CHECK(w.rows == n && streams.cols == n * D && kv.cols == (n + 1) * D &&
           kv.rows == streams.rows);
  // D^-1/2 as the reference's scalar (a double rounded to FP32).
  const float inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t m = 0; m < streams.rows; ++m) {
    const float* value = kv.row(m) + n * D;
    for (int k = 0; k < n; ++k) {
      float* h = streams.row(m) + k * D;
      const float* key = kv.row(m) + k * D;
      const float* wk = w.row(k);
      float hh = 0.0f, kk = 0.0f, dot = 0.0f;
      for (int64_t d = 0; d < D; ++d) {
        hh += h[d] * h[d];
        kk += key[d] * key[d];
        dot += h[d] * wk[d] * key[d];
      }
      const float rstd = (1.0f / std::sqrt(hh / static_cast<float>(D) + eps)) *
                         (1.0f / std::sqrt(kk / static_cast<float>(D) + eps));
      dot = dot * rstd * inv_sqrt_d;
      const float mag = std::sqrt(std::max(std::fabs(dot), 1e-6f));
      const float g = 1.0f / (1.0f + std::exp(-std::copysign(mag, dot)));
      for (int64_t d = 0; d < D; ++d) h[d] += g * value[d];
    }
  }
}

}  // namespace deepinfer::backend
