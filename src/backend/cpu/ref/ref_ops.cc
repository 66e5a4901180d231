// RefOps: dense/quantized linear algebra, norms, RoPE, mHC, quantization and MoE (the oracle).
// Attention-side ops (sparse attention, compressor pooling, indexer, top-k) are in
// ref_ops_attn.cc.
#include "backend/cpu/ref/ref_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/quant.h"
#include "base/check.h"

namespace deepinfer::backend::cpu {
namespace {

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// y[n] = Σ_k x[k]·W[n,k] for one activation row, double accumulation.
void matvec(const float* x, const WeightRef& w, float* y) {
  for (int64_t n = 0; n < w.n; ++n) {
    double acc = 0.0;
    for (int64_t k = 0; k < w.k; ++k) acc += static_cast<double>(x[k]) * weight_at(w, n, k);
    y[n] = static_cast<float>(acc);
  }
}

// The activation row the GEMM sees: x, or its FP8 round trip when act_quant applies.
std::vector<float> gemm_input(const float* x, int64_t k, const WeightRef& w, bool act_quant,
                              int act_block) {
  std::vector<float> v(x, x + k);
  if (act_quant && w.quantized()) {
    for (int64_t b = 0; b < k; b += act_block) {
      fake_quant_block_fp8(v.data() + b, std::min<int64_t>(act_block, k - b));
    }
  }
  return v;
}

float softplus_sqrt(float z) {
  const float sp = z > 20.0f ? z : std::log1p(std::exp(z));  // torch softplus threshold 20
  return std::sqrt(sp);
}

// Gate scores p_e = sqrt(softplus(W_g·x / temperature)) for one token.
std::vector<float> router_scores(const float* x, const WeightRef& gate, float temperature = 1.0f) {
  std::vector<float> z(static_cast<size_t>(gate.n));
  matvec(x, gate, z.data());
  for (float& v : z) v = softplus_sqrt(temperature == 1.0f ? v : v / temperature);
  return z;
}

void write_route_weights(const std::vector<float>& p, const int32_t* ids, int k, float route_scale,
                         const RouteOpts& opts, float* w) {
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += p[static_cast<size_t>(ids[j])];
  for (int j = 0; j < k; ++j) {
    const float pj = p[static_cast<size_t>(ids[j])];
    w[j] = (opts.normalize ? pj / (sum + opts.norm_floor) : pj) * route_scale;
  }
}

}  // namespace

void RefOps::embed(const int32_t* ids, int64_t n, const WeightRef& table, Mat out) {
  DI_CHECK(!table.quantized() && out.rows == n && out.cols == table.k);
  for (int64_t i = 0; i < n; ++i) {
    DI_CHECK(ids[i] >= 0 && ids[i] < table.n);
    for (int64_t j = 0; j < table.k; ++j) out.at(i, j) = weight_at(table, ids[i], j);
  }
}

void RefOps::linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& opts) {
  DI_CHECK(x.cols == w.k && y.rows == x.rows && y.cols == w.n);
  for (int64_t m = 0; m < x.rows; ++m) {
    const std::vector<float> v = gemm_input(x.row(m), w.k, w, opts.act_quant, opts.act_block);
    matvec(v.data(), w, y.row(m));
  }
  if (opts.round_bf16) round_bf16(y);
}

void RefOps::rms_norm(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) {
  const int64_t g = group > 0 ? group : x.cols;
  DI_CHECK(x.cols % g == 0 && y.rows == x.rows && y.cols == x.cols);
  DI_CHECK(w == nullptr || (!w->quantized() && w->n * w->k == g));
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t c0 = 0; c0 < x.cols; c0 += g) {
      double ss = 0.0;
      for (int64_t c = 0; c < g; ++c) ss += static_cast<double>(x.at(m, c0 + c)) * x.at(m, c0 + c);
      const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(g) + eps));
      for (int64_t c = 0; c < g; ++c) {
        const float v = x.at(m, c0 + c) * r;
        y.at(m, c0 + c) = w ? v * weight_at(*w, 0, c) : v;
      }
    }
  }
}

void RefOps::round_bf16(Mat x) {
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t c = 0; c < x.cols; ++c) x.at(m, c) = bf16_round(x.at(m, c));
  }
}

void RefOps::add(CMat a, CMat b, Mat out) {
  DI_CHECK(b.cols == a.cols && (b.rows == a.rows || b.rows == 1) && out.rows == a.rows &&
           out.cols == a.cols);
  for (int64_t m = 0; m < a.rows; ++m) {
    for (int64_t c = 0; c < a.cols; ++c) out.at(m, c) = a.at(m, c) + b.at(b.rows == 1 ? 0 : m, c);
  }
}

void RefOps::scale(Mat x, float s) {
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t c = 0; c < x.cols; ++c) x.at(m, c) *= s;
  }
}

void RefOps::copy_rows(CMat src, const int32_t* rows, Mat dst) {
  DI_CHECK(src.cols == dst.cols);
  for (int64_t i = 0; i < dst.rows; ++i) {
    const int64_t r = rows ? rows[i] : i;
    DI_CHECK(r >= 0 && r < src.rows);
    for (int64_t c = 0; c < dst.cols; ++c) dst.at(i, c) = src.at(r, c);
  }
}

void RefOps::rope(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                  std::span<const float> freqs, bool inverse) {
  const int64_t rope_dim = 2 * static_cast<int64_t>(freqs.size());
  DI_CHECK(x.cols == n_heads * head_dim && rope_dim <= head_dim);
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* r = x.row(m) + h * head_dim + (head_dim - rope_dim);
      for (size_t j = 0; j < freqs.size(); ++j) {
        const float angle = static_cast<float>(positions[m]) * freqs[j];
        const float c = std::cos(angle);
        const float s = inverse ? -std::sin(angle) : std::sin(angle);
        const float a = r[2 * j], b = r[2 * j + 1];
        r[2 * j] = a * c - b * s;
        r[2 * j + 1] = a * s + b * c;
      }
    }
  }
}

namespace {
// μ = (fn · x) · ρ over the first `rows` rows of fn, ρ = 1/sqrt(mean(x²) + eps).
std::vector<float> hc_logits(const float* x, int64_t len, const HcParams& p, int64_t rows) {
  DI_CHECK(p.fn.cols == len && p.fn.rows >= rows);
  double ss = 0.0;
  for (int64_t c = 0; c < len; ++c) ss += static_cast<double>(x[c]) * x[c];
  const float rho = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(len) + p.norm_eps));
  std::vector<float> mu(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < len; ++c) acc += static_cast<double>(p.fn.at(r, c)) * x[c];
    mu[static_cast<size_t>(r)] = static_cast<float>(acc) * rho;
  }
  return mu;
}
}  // namespace

void RefOps::hc_pre(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre_out,
                    Mat post, Mat comb) {
  const int n = p.n;
  const int64_t D = streams.cols / n;
  DI_CHECK(streams.cols == n * D && y.cols == D && post.cols == n && comb.cols == n * n);
  DI_CHECK(collapse_pre.data == nullptr || collapse_pre.cols == n);
  DI_CHECK(pre_out.data == nullptr || pre_out.cols == n);
  const float eps = p.hc_eps;
  for (int64_t m = 0; m < streams.rows; ++m) {
    const float* x = streams.row(m);
    const std::vector<float> mu = hc_logits(x, n * D, p, (2 + n) * n);
    std::vector<float> pre(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      pre[static_cast<size_t>(i)] =
          sigmoid(mu[static_cast<size_t>(i)] * p.scale[0] + p.base[i]) + eps;
      post.at(m, i) = 2.0f * sigmoid(mu[static_cast<size_t>(n + i)] * p.scale[1] + p.base[n + i]);
    }
    std::vector<float> C(static_cast<size_t>(n * n));
    for (int i = 0; i < n * n; ++i) {
      C[static_cast<size_t>(i)] =
          mu[static_cast<size_t>(2 * n + i)] * p.scale[2] + p.base[2 * n + i];
    }
    auto at = [&](int i, int j) -> float& { return C[static_cast<size_t>(i * n + j)]; };
    auto col_norm = [&] {
      for (int j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int i = 0; i < n; ++i) s += at(i, j);
        for (int i = 0; i < n; ++i) at(i, j) /= s + eps;
      }
    };
    for (int i = 0; i < n; ++i) {  // softmax over j, then + eps
      float mx = at(i, 0);
      for (int j = 1; j < n; ++j) mx = std::max(mx, at(i, j));
      float s = 0.0f;
      for (int j = 0; j < n; ++j) s += (at(i, j) = std::exp(at(i, j) - mx));
      for (int j = 0; j < n; ++j) at(i, j) = at(i, j) / s + eps;
    }
    col_norm();
    for (int it = 1; it < p.sinkhorn_iters; ++it) {
      for (int i = 0; i < n; ++i) {
        float s = 0.0f;
        for (int j = 0; j < n; ++j) s += at(i, j);
        for (int j = 0; j < n; ++j) at(i, j) /= s + eps;
      }
      col_norm();
    }
    for (int i = 0; i < n * n; ++i) comb.at(m, i) = C[static_cast<size_t>(i)];
    if (pre_out.data != nullptr) {
      for (int i = 0; i < n; ++i) pre_out.at(m, i) = pre[static_cast<size_t>(i)];
    }
    const float* c_row = collapse_pre.data != nullptr ? collapse_pre.row(m) : pre.data();
    for (int64_t c = 0; c < D; ++c) {
      double acc = 0.0;
      for (int i = 0; i < n; ++i) acc += static_cast<double>(c_row[i]) * x[i * D + c];
      y.at(m, c) = static_cast<float>(acc);
    }
  }
}

void RefOps::hc_post(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) {
  const int64_t D = o.cols;
  DI_CHECK(streams.cols == n * D && out.cols == n * D && post.cols == n && comb.cols == n * n);
  std::vector<float> tmp(static_cast<size_t>(n * D));
  for (int64_t m = 0; m < streams.rows; ++m) {
    for (int k = 0; k < n; ++k) {
      for (int64_t c = 0; c < D; ++c) {
        double acc = static_cast<double>(post.at(m, k)) * o.at(m, c);
        for (int j = 0; j < n; ++j) {
          acc += static_cast<double>(comb.at(m, j * n + k)) * streams.at(m, j * D + c);
        }
        tmp[static_cast<size_t>(k * D + c)] = static_cast<float>(acc);
      }
    }
    std::copy(tmp.begin(), tmp.end(), out.row(m));
  }
}

void RefOps::hc_head(CMat streams, const HcParams& p, Mat y) {
  const int n = p.n;
  const int64_t D = streams.cols / n;
  DI_CHECK(y.cols == D);
  for (int64_t m = 0; m < streams.rows; ++m) {
    const float* x = streams.row(m);
    const std::vector<float> mu = hc_logits(x, n * D, p, n);
    for (int64_t c = 0; c < D; ++c) {
      double acc = 0.0;
      for (int i = 0; i < n; ++i) {
        const float pre = sigmoid(mu[static_cast<size_t>(i)] * p.scale[0] + p.base[i]) + p.hc_eps;
        acc += static_cast<double>(pre) * x[i * D + c];
      }
      y.at(m, c) = static_cast<float>(acc);
    }
  }
}

void RefOps::hadamard128(Mat x) {
  DI_CHECK(x.cols % 128 == 0);
  const double s = 1.0 / std::sqrt(128.0);
  std::vector<float> tmp(128);
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t c0 = 0; c0 < x.cols; c0 += 128) {
      float* v = x.row(m) + c0;
      for (int i = 0; i < 128; ++i) {  // H_ij = (-1)^popcount(i & j) (Sylvester)
        double acc = 0.0;
        for (int j = 0; j < 128; ++j)
          acc += (std::popcount(static_cast<unsigned>(i & j)) & 1) ? -v[j] : v[j];
        tmp[static_cast<size_t>(i)] = static_cast<float>(acc * s);
      }
      std::copy(tmp.begin(), tmp.end(), v);
    }
  }
}

void RefOps::fake_quant_fp8(Mat x, int64_t n, int64_t block) {
  DI_CHECK(n <= x.cols && block > 0);
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t b = 0; b < n; b += block)
      fake_quant_block_fp8(x.row(m) + b, std::min(block, n - b));
  }
}

void RefOps::act_quant_fp8(Mat x, int64_t block) { fake_quant_fp8(x, x.cols, block); }

void RefOps::fake_quant_fp4(Mat x, int64_t block) {
  DI_CHECK(block > 0);
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t b = 0; b < x.cols; b += block) {
      fake_quant_block_fp4(x.row(m) + b, std::min(block, x.cols - b));
    }
  }
}

void RefOps::moe_route_score(CMat x, const WeightRef& gate, const float* bias, int top_k,
                             float route_scale, const RouteOpts& opts, int32_t* ids, Mat weights) {
  DI_CHECK(x.cols == gate.k && weights.cols == top_k && top_k <= gate.n);
  for (int64_t m = 0; m < x.rows; ++m) {
    const std::vector<float> p = router_scores(x.row(m), gate, opts.temperature);
    std::vector<int32_t> order(p.size());
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](int32_t e) { return p[static_cast<size_t>(e)] + (bias ? bias[e] : 0.0f); };
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return key(a) > key(b); });
    int32_t* row_ids = ids + m * top_k;
    std::copy(order.begin(), order.begin() + top_k, row_ids);
    write_route_weights(p, row_ids, top_k, route_scale, opts, weights.row(m));
  }
}

void RefOps::moe_route_hash(CMat x, const int32_t* token_ids, const TensorView& tid2eid,
                            const WeightRef& gate, float route_scale, int32_t* ids, Mat weights) {
  DI_CHECK(tid2eid.rank() == 2 && (tid2eid.dtype == DType::kI32 || tid2eid.dtype == DType::kI64));
  const int k = static_cast<int>(tid2eid.shape[1]);
  DI_CHECK(weights.cols == k && x.cols == gate.k);
  for (int64_t m = 0; m < x.rows; ++m) {
    const int64_t t = token_ids[m];
    DI_CHECK(t >= 0 && t < tid2eid.shape[0]);
    int32_t* row_ids = ids + m * k;
    for (int j = 0; j < k; ++j) {
      const int64_t e = tid2eid.dtype == DType::kI32 ? tid2eid.ptr<int32_t>()[t * k + j]
                                                     : tid2eid.ptr<int64_t>()[t * k + j];
      DI_CHECK(e >= 0 && e < gate.n);
      row_ids[j] = static_cast<int32_t>(e);
    }
    write_route_weights(router_scores(x.row(m), gate), row_ids, k, route_scale, RouteOpts{},
                        weights.row(m));
  }
}

void RefOps::swiglu(CMat a, CMat b, float limit, Mat out) {
  DI_CHECK(a.rows == b.rows && a.cols == b.cols && out.rows == a.rows && out.cols == a.cols);
  for (int64_t m = 0; m < a.rows; ++m) {
    for (int64_t c = 0; c < a.cols; ++c) {
      float u = a.at(m, c), v = b.at(m, c);
      if (limit > 0.0f) {
        u = std::min(u, limit);
        v = std::clamp(v, -limit, limit);
      }
      out.at(m, c) = u * sigmoid(u) * v;
    }
  }
}

void RefOps::moe_experts(CMat x, const int32_t* ids, CMat weights, int top_k,
                         std::span<const ExpertWeights> experts, const MoeOpts& opts, Mat out) {
  DI_CHECK(out.rows == x.rows && weights.cols == top_k);
  auto maybe_round = [&](std::vector<float>& v) {
    if (opts.bf16_rounding)
      for (float& f : v) f = bf16_round(f);
  };
  for (int64_t m = 0; m < x.rows; ++m) {
    // Experts in ascending id order, like the reference's loop over experts.
    std::vector<int> order(static_cast<size_t>(top_k));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return ids[m * top_k + a] < ids[m * top_k + b]; });
    std::vector<float> y_sum(static_cast<size_t>(out.cols), 0.0f);
    for (int j : order) {
      const int32_t e = ids[m * top_k + j];
      if (e < 0) continue;
      DI_CHECK(static_cast<size_t>(e) < experts.size());
      const ExpertWeights& ew = experts[static_cast<size_t>(e)];
      DI_CHECK(ew.w1.k == x.cols && ew.w2.n == out.cols && ew.w2.k == ew.w1.n);
      const float g = weights.at(m, j);
      const std::vector<float> v =
          gemm_input(x.row(m), x.cols, ew.w1, opts.act_quant, opts.act_block);
      std::vector<float> a(static_cast<size_t>(ew.w1.n)), b(static_cast<size_t>(ew.w3.n));
      matvec(v.data(), ew.w1, a.data());
      const std::vector<float> v3 =
          gemm_input(x.row(m), x.cols, ew.w3, opts.act_quant, opts.act_block);
      matvec(v3.data(), ew.w3, b.data());
      maybe_round(a);
      maybe_round(b);
      std::vector<float> h(a.size());
      swiglu(CMat(a.data(), 1, static_cast<int64_t>(a.size())),
             CMat(b.data(), 1, static_cast<int64_t>(b.size())), opts.swiglu_limit,
             Mat(h.data(), 1, static_cast<int64_t>(h.size())));
      if (opts.weight_before_w2)
        for (float& f : h) f *= g;
      maybe_round(h);
      const std::vector<float> hq =
          gemm_input(h.data(), ew.w2.k, ew.w2, opts.act_quant, opts.act_block);
      std::vector<float> y(static_cast<size_t>(out.cols));
      matvec(hq.data(), ew.w2, y.data());
      maybe_round(y);
      if (!opts.weight_before_w2) {
        for (float& f : y) f *= g;
        maybe_round(y);
      }
      for (size_t c = 0; c < y.size(); ++c) y_sum[c] += y[c];  // FP32 accumulation
    }
    for (int64_t c = 0; c < out.cols; ++c) {
      const float v = (opts.accumulate ? out.at(m, c) : 0.0f) + y_sum[static_cast<size_t>(c)];
      out.at(m, c) = opts.round_out ? bf16_round(v) : v;
    }
  }
}

std::unique_ptr<Ops> make_ref_ops() { return std::make_unique<RefOps>(); }

}  // namespace deepinfer::backend::cpu
