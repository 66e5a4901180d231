// OptOps, attention side: sparse MQA with sink, compressor pooling, lightning indexer, top-k.
// sparse_attention: scores by contiguous dots, softmax in FP32, then P·V as AXPYs over the
// gathered rows (value = key); all inner loops are unit-stride (details at the function).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/cpu/opt/gemm_avx2.h"
#include "backend/cpu/opt/kernels.h"
#include "backend/cpu/opt/opt_ops.h"
#include "backend/quant.h"
#include "base/check.h"

namespace deepinfer::backend::cpu {

void OptOps::sparse_attention(CMat q, int64_t n_heads, CMat kv, const int32_t* idx, int64_t L,
                              const float* sink, float scale, bool bf16_probs, Mat o) {
  sparse_attention_over(q, n_heads, kv.cols, L, sink, scale, bf16_probs, o,
                        [&](int64_t t, int64_t j) -> const float* {
                          const int32_t r = idx[t * L + j];
                          if (r < 0) return nullptr;
                          DI_CHECK(r < kv.rows);
                          return kv.row(r);
                        });
}

void OptOps::sparse_attention_rows(CMat q, int64_t n_heads, const float* const* key_rows,
                                   int64_t L, int64_t d, const float* sink, float scale,
                                   bool bf16_probs, Mat o) {
  sparse_attention_over(q, n_heads, d, L, sink, scale, bf16_probs, o,
                        [&](int64_t t, int64_t j) { return key_rows[t * L + j]; });
}

// The attention of both forms; key(t, j) is query t's j-th key row, nullptr = absent.
template <typename KeyRow>
void OptOps::sparse_attention_over(CMat q, int64_t n_heads, int64_t d, int64_t L,
                                   const float* sink, float scale, bool bf16_probs, Mat o,
                                   const KeyRow& key) {
  DI_CHECK(q.cols == n_heads * d && o.rows == q.rows && o.cols == q.cols);
  // Task = (token, kHeads heads). Keys are visited in chunks of kKeys gathered rows, and each
  // chunk serves all the task's heads before the next is touched, so a gathered row is read
  // from memory twice per task (scores, then P·V) instead of once per head. Inside, four heads
  // x two keys per kernel call. A head's arithmetic depends only on n_heads and its index list,
  // never on the batch or the thread split.
  constexpr int64_t kHeads = 16, kKeys = 32;
  const int64_t groups = (n_heads + kHeads - 1) / kHeads;
  pool_.parallel_for(
      q.rows * groups,
      [&](int64_t i0, int64_t i1) {
        std::vector<float> z(static_cast<size_t>(kHeads * L));
        std::vector<const float*> rows(static_cast<size_t>(L));
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t t = i / groups, h0 = (i % groups) * kHeads;
          const int64_t nh = std::min(kHeads, n_heads - h0);
          int64_t nr = 0;
          for (int64_t j = 0; j < L; ++j) {
            const float* r = key(t, j);
            if (r != nullptr) rows[static_cast<size_t>(nr++)] = r;
          }
          float* o0 = o.row(t) + h0 * d;
          std::fill(o0, o0 + nh * d, 0.0f);
          if (nr == 0) continue;
          const float* q0 = q.row(t) + h0 * d;
          const auto row = [&](int64_t j) { return rows[static_cast<size_t>(j)]; };
          const auto zat = [&](int64_t h, int64_t j) -> float& {
            return z[static_cast<size_t>(h * L + j)];
          };
          for (int64_t c0 = 0; c0 < nr; c0 += kKeys) {  // scores
            const int64_t c1 = std::min(nr, c0 + kKeys);
            int64_t h = 0;
            for (; h + 4 <= nh; h += 4) {
              for (int64_t j = c0; j < c1; j += 2) {
                const bool pair = j + 1 < c1;
                float s0[4], s1[4];
                opt::dot4x2(row(j), pair ? row(j + 1) : row(j), q0 + h * d, d, d, s0, s1);
                for (int64_t u = 0; u < 4; ++u) {
                  zat(h + u, j) = s0[u];
                  if (pair) zat(h + u, j + 1) = s1[u];
                }
              }
            }
            for (; h < nh; ++h) {
              for (int64_t j = c0; j < c1; ++j) zat(h, j) = opt::dot(q0 + h * d, row(j), d);
            }
          }
          float inv_den[kHeads];
          for (int64_t h = 0; h < nh; ++h) {  // softmax with the sink in the denominator
            float* zh = &zat(h, 0);
            float mx = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < nr; ++j) mx = std::max(mx, zh[j] *= scale);
            float den = sink ? std::exp(sink[h0 + h] - mx) : 0.0f;
            for (int64_t j = 0; j < nr; ++j) zh[j] -= mx;
            opt::exp_to(zh, zh, nr);
            for (int64_t j = 0; j < nr; ++j) {
              den += zh[j];
              if (bf16_probs) zh[j] = bf16_round(zh[j]);  // P·V uses the rounded weights
            }
            inv_den[h] = 1.0f / den;
          }
          for (int64_t c0 = 0; c0 < nr; c0 += kKeys) {  // P·V, two keys per pass over o_h
            const int64_t c1 = std::min(nr, c0 + kKeys);
            for (int64_t h = 0; h < nh; ++h) {
              const float* ph = &zat(h, 0);
              float* oh = o0 + h * d;
              int64_t j = c0;
              for (; j + 2 <= c1; j += 2) opt::axpy2(ph[j], row(j), ph[j + 1], row(j + 1), oh, d);
              if (j < c1) opt::axpy(ph[j], row(j), oh, d);
            }
          }
          for (int64_t h = 0; h < nh; ++h) opt::scale_to(o0 + h * d, inv_den[h], o0 + h * d, d);
        }
      },
      opt::grain_for(4 * std::min(kHeads, n_heads) * L * d));
}

void OptOps::softmax_pool(std::span<const PoolSlot> slots, int64_t slots_per_row, Mat out) {
  DI_CHECK(slots_per_row > 0 && static_cast<int64_t>(slots.size()) == out.rows * slots_per_row);
  const int64_t W = out.cols;
  pool_.parallel_for(
      out.rows,
      [&](int64_t r0, int64_t r1) {
        std::vector<float> mx(static_cast<size_t>(W)), den(static_cast<size_t>(W)),
            e(static_cast<size_t>(W));
        for (int64_t r = r0; r < r1; ++r) {
          const PoolSlot* s = slots.data() + r * slots_per_row;
          float* o = out.row(r);
          std::fill(mx.begin(), mx.end(), -std::numeric_limits<float>::infinity());
          std::fill(den.begin(), den.end(), 0.0f);
          std::fill(o, o + W, 0.0f);
          bool any = false;
          for (int64_t j = 0; j < slots_per_row; ++j) {
            if (!s[j].value) continue;
            any = true;
            for (int64_t c = 0; c < W; ++c)
              mx[static_cast<size_t>(c)] = std::max(mx[static_cast<size_t>(c)], s[j].gate[c]);
          }
          if (!any) continue;
          for (int64_t j = 0; j < slots_per_row; ++j) {
            if (!s[j].value) continue;
            const float* g = s[j].gate;
            const float* v = s[j].value;
            for (int64_t c = 0; c < W; ++c)
              e[static_cast<size_t>(c)] = g[c] - mx[static_cast<size_t>(c)];
            opt::exp_to(e.data(), e.data(), W);
            for (int64_t c = 0; c < W; ++c) {
              den[static_cast<size_t>(c)] += e[static_cast<size_t>(c)];
              o[c] += e[static_cast<size_t>(c)] * v[c];
            }
          }
          for (int64_t c = 0; c < W; ++c) o[c] /= den[static_cast<size_t>(c)];
        }
      },
      opt::grain_for(4 * slots_per_row * W));
}

namespace {
// One key's score from its per-head dots: sum_h w_h · ReLU(dot_h), heads in order, with the
// official BF16 points (ops.h indexer_scores) when asked.
float head_sum(const float* dots, const float* w, int64_t n_heads, bool bf16_rounding) {
  float sum = 0.0f;
  for (int64_t h = 0; h < n_heads; ++h) {
    const float d = bf16_rounding ? bf16_round(dots[h]) : dots[h];
    float prod = std::max(d, 0.0f) * w[h];
    if (bf16_rounding) prod = bf16_round(prod);
    sum += prod;
  }
  return bf16_rounding ? bf16_round(sum) : sum;
}
}  // namespace

void OptOps::indexer_scores(CMat q, int64_t n_heads, CMat weights, CMat keys,
                            const int32_t* visible, bool bf16_rounding, Mat scores) {
  const int64_t di = keys.cols, R = keys.rows;
  DI_CHECK(q.cols == n_heads * di && weights.cols == n_heads && scores.cols == R &&
           scores.rows == q.rows);
  if (opt::have_avx2_fma() && !bf16_rounding && q.ld == q.cols) {
    indexer_scores_blocked(q, n_heads, weights, keys, visible, scores);
    return;
  }
  constexpr int64_t kChunk = 64;  // key rows per task
  const int64_t chunks = (R + kChunk - 1) / kChunk;
  const int64_t h4 = n_heads / 4 * 4;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  pool_.parallel_for(
      q.rows * chunks,
      [&](int64_t i0, int64_t i1) {
        std::vector<float> dots(static_cast<size_t>(2 * n_heads));
        std::vector<float> kdots(static_cast<size_t>(kChunk * n_heads));
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t t = i / chunks, w0 = (i % chunks) * kChunk, w1 = std::min(R, w0 + kChunk);
          const int64_t vis = std::min<int64_t>(visible[t], R);
          const float* qt = q.row(t);
          const float* om = weights.row(t);
          // Keys at or past `vis` score -inf without their dots (half of a causal prefill's).
          const int64_t wv = std::clamp(vis, w0, w1);
          for (int64_t w = wv; w < w1; ++w) scores.at(t, w) = neg_inf;
          if (opt::have_avx2_fma() && wv > w0) {
            // All (visible key, head) dots of the chunk as one small GEMM (keys x heads), the
            // blocked kernel's fixed per-pair order: the di = 32..128 dots were reduction-bound.
            const int64_t nk = wv - w0;
            Mat dk(kdots.data(), nk, n_heads);
            opt::gemm_f32_avx2(keys.rows_slice(w0, nk), CMat(qt, n_heads, di), dk);
            for (int64_t u = 0; u < nk; ++u) {
              scores.at(t, w0 + u) = head_sum(dk.row(u), om, n_heads, bf16_rounding);
            }
            continue;
          }
          for (int64_t w = w0; w < wv; w += 2) {
            // Two keys x four heads per kernel call; the per-head dots are the same bits as
            // one key at a time (dot4x2 == dot4, checked by OptBatchInvariance).
            const bool pair = w + 1 < wv;
            const float* k0 = keys.row(w);
            const float* k1 = pair ? keys.row(w + 1) : k0;
            float* d0 = dots.data();
            float* d1 = dots.data() + n_heads;
            for (int64_t h = 0; h < h4; h += 4)
              opt::dot4x2(k0, k1, qt + h * di, di, di, d0 + h, d1 + h);
            for (int64_t h = h4; h < n_heads; ++h) {
              d0[h] = opt::dot(qt + h * di, k0, di);
              d1[h] = opt::dot(qt + h * di, k1, di);
            }
            for (int64_t u = 0; u < (pair ? 2 : 1); ++u) {
              const int64_t ww = w + u;
              if (ww >= vis) {
                scores.at(t, ww) = neg_inf;
                continue;
              }
              scores.at(t, ww) = head_sum(u == 0 ? d0 : d1, om, n_heads, bf16_rounding);
            }
          }
        }
      },
      opt::grain_for(2 * std::min(kChunk, R) * n_heads * di));
}

// HF-semantics indexer on AVX2 machines. Task = (kQueries queries, kKeys key rows): the
// queries' (query, head) rows of q, viewed as [kQueries·Hi, di], go through one GEMM against the
// key rows any of them sees (the per-query GEMMs of ~64 keys x Hi heads were reduction- and
// call-bound: ~4 GMAC/s on the tiny model), then scores[t, w] = Σ_h ω[t,h]·ReLU(dot) eight keys
// at a time. The same bits as the per-query path: a dot is the same FMA chain and tree whichever
// operand is the GEMM's "weight", and the head sum runs in the same order with the same ReLU
// (std::max(d, 0), so -0 stays -0). A row's scores never depend on the other rows of the block.
void OptOps::indexer_scores_blocked(CMat q, int64_t n_heads, CMat weights, CMat keys,
                                    const int32_t* visible, Mat scores) {
  constexpr int64_t kQueries = 16, kKeys = 256;
  const int64_t di = keys.cols, R = keys.rows, M = q.rows;
  const int64_t blocks = (M + kQueries - 1) / kQueries, kchunks = (R + kKeys - 1) / kKeys;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const auto vis_of = [&](int64_t t) { return std::clamp<int64_t>(visible[t], 0, R); };
  pool_.parallel_for(
      blocks * kchunks,
      [&](int64_t i0, int64_t i1) {
        thread_local std::vector<float> dots;
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t t0 = (i / kchunks) * kQueries, nt = std::min(kQueries, M - t0);
          const int64_t w0 = (i % kchunks) * kKeys, w1 = std::min(R, w0 + kKeys);
          int64_t vmax = w0;  // keys [w0, vmax) are visible to some query of the block
          for (int64_t t = t0; t < t0 + nt; ++t) vmax = std::max(vmax, std::min(vis_of(t), w1));
          const int64_t nk = vmax - w0;
          if (nk > 0) {
            if (dots.size() < static_cast<size_t>(nt * n_heads * nk))
              dots.resize(static_cast<size_t>(nt * n_heads * nk));
            opt::gemm_f32_avx2(CMat(q.row(t0), nt * n_heads, di, di), keys.rows_slice(w0, nk),
                               Mat(dots.data(), nt * n_heads, nk));
          }
          for (int64_t t = t0; t < t0 + nt; ++t) {
            const int64_t v = std::clamp(vis_of(t), w0, w1);
            float* st = scores.row(t);
            if (v > w0) {
              opt::relu_weighted_sum(dots.data() + (t - t0) * n_heads * nk, nk, n_heads,
                                     weights.row(t), v - w0, st + w0);
            }
            std::fill(st + v, st + w1, neg_inf);
          }
        }
      },
      opt::grain_for(2 * kQueries * n_heads * std::min(kKeys, R) * di));
}

void OptOps::topk(CMat scores, const int32_t* visible, int64_t k, int32_t* out) {
  pool_.parallel_for(
      scores.rows,
      [&](int64_t t0, int64_t t1) {
        std::vector<int32_t> order;
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t vis = std::clamp<int64_t>(visible[t], 0, scores.cols);
          const int64_t kk = std::min(k, vis);
          order.resize(static_cast<size_t>(vis));
          std::iota(order.begin(), order.end(), 0);
          const float* s = scores.row(t);
          std::partial_sort(
              order.begin(), order.begin() + kk, order.end(),
              [&](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
          for (int64_t j = 0; j < k; ++j) {
            const bool pick = j < kk && s[order[static_cast<size_t>(j)]] >
                                            -std::numeric_limits<float>::infinity();
            out[t * k + j] = pick ? order[static_cast<size_t>(j)] : -1;
          }
        }
      },
      opt::grain_for(8 * scores.cols));
}

}  // namespace deepinfer::backend::cpu
