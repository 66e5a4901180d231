// OptOps, row-local ops: norms, BF16 rounding, RoPE, mHC, Hadamard, fake-quant, SwiGLU.
// Each is parallel over rows; the per-row loops are contiguous so they vectorise.
#include "backend/cpu/opt/opt_ops.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "backend/cpu/opt/gemm_avx2.h"
#include "backend/cpu/opt/kernels.h"
#include "backend/quant.h"
#include "base/check.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace deepinfer::backend::cpu {
namespace {
float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }
}  // namespace

void OptOps::rms_norm(CMat x, const WeightRef* w, float eps, int64_t group, Mat y) {
  const int64_t g = group > 0 ? group : x.cols;
  DI_CHECK(x.cols % g == 0 && y.rows == x.rows && y.cols == x.cols);
  DI_CHECK(w == nullptr || (!w->quantized() && w->n * w->k == g));
  std::vector<float> wf;
  if (w) {
    wf.resize(static_cast<size_t>(g));
    WeightRef flat = *w;  // a [1, g] view of the norm weight
    flat.n = 1;
    flat.k = g;
    opt::dequant_row(flat, 0, wf.data());
  }
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          for (int64_t c0 = 0; c0 < x.cols; c0 += g) {
            const float* xr = x.row(m) + c0;
            float* yr = y.row(m) + c0;
            const float r = 1.0f / std::sqrt(opt::sumsq(xr, g) / static_cast<float>(g) + eps);
            if (w) {
              for (int64_t c = 0; c < g; ++c) yr[c] = xr[c] * r * wf[static_cast<size_t>(c)];
            } else {
              opt::scale_to(xr, r, yr, g);
            }
          }
        }
      },
      opt::grain_for(3 * x.cols));
}

void OptOps::round_bf16(Mat x) {
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          float* r = x.row(m);
          for (int64_t c = 0; c < x.cols; ++c) r[c] = bf16_round(r[c]);
        }
      },
      opt::grain_for(x.cols));
}

void OptOps::add(CMat a, CMat b, Mat out) {
  DI_CHECK(b.cols == a.cols && (b.rows == a.rows || b.rows == 1) && out.rows == a.rows &&
           out.cols == a.cols);
  pool_.parallel_for(
      a.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          const float* ar = a.row(m);
          const float* br = b.row(b.rows == 1 ? 0 : m);
          float* o = out.row(m);
          for (int64_t c = 0; c < a.cols; ++c) o[c] = ar[c] + br[c];
        }
      },
      opt::grain_for(a.cols));
}

void OptOps::scale(Mat x, float s) {
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) opt::scale_to(x.row(m), s, x.row(m), x.cols);
      },
      opt::grain_for(x.cols));
}

void OptOps::copy_rows(CMat src, const int32_t* rows, Mat dst) {
  DI_CHECK(src.cols == dst.cols);
  pool_.parallel_for(
      dst.rows,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = rows ? rows[i] : i;
          DI_CHECK(r >= 0 && r < src.rows);
          std::copy(src.row(r), src.row(r) + dst.cols, dst.row(i));
        }
      },
      opt::grain_for(dst.cols));
}

void OptOps::rope(Mat x, int64_t n_heads, int64_t head_dim, const int32_t* positions,
                  std::span<const float> freqs, bool inverse) {
  const int64_t half = static_cast<int64_t>(freqs.size());
  DI_CHECK(x.cols == n_heads * head_dim && 2 * half <= head_dim);
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        std::vector<float> cs(static_cast<size_t>(2 * half));
        for (int64_t m = m0; m < m1; ++m) {
          for (int64_t j = 0; j < half; ++j) {  // one table per row, shared by all heads
            const float angle = static_cast<float>(positions[m]) * freqs[static_cast<size_t>(j)];
            cs[static_cast<size_t>(2 * j)] = std::cos(angle);
            cs[static_cast<size_t>(2 * j + 1)] = inverse ? -std::sin(angle) : std::sin(angle);
          }
          for (int64_t h = 0; h < n_heads; ++h) {
            float* r = x.row(m) + h * head_dim + (head_dim - 2 * half);
            for (int64_t j = 0; j < half; ++j) {
              const float c = cs[static_cast<size_t>(2 * j)],
                          s = cs[static_cast<size_t>(2 * j + 1)];
              const float a = r[2 * j], b = r[2 * j + 1];
              r[2 * j] = a * c - b * s;
              r[2 * j + 1] = a * s + b * c;
            }
          }
        }
      },
      opt::grain_for(2 * x.cols));
}

namespace {
// μ[r] = (fn_r · x)·ρ for r < rows.
void hc_mu(const float* x, int64_t len, const HcParams& p, int64_t rows, float* mu) {
  const float rho = 1.0f / std::sqrt(opt::sumsq(x, len) / static_cast<float>(len) + p.norm_eps);
  int64_t r = 0;
  if (p.fn.ld == len) {
    for (; r + 4 <= rows; r += 4) opt::dot4(x, p.fn.row(r), p.fn.ld, len, mu + r);
  }
  for (; r < rows; ++r) mu[r] = opt::dot(x, p.fn.row(r), len);
  for (r = 0; r < rows; ++r) mu[r] *= rho;
}

// Sinkhorn normalisation of the n x n matrix C (row-major): `iters` column passes, each after
// the first preceded by a row pass; every sum runs in index order from 0, then one division per
// element. For n = 4 (every V4 config) the same operations run four lanes at a time in SSE
// (rows as vectors: column sums are vertical adds; row sums after a transpose), so the results
// are the scalar loop's bits with a quarter of the divisions (their latency dominated hc_pre).
void sinkhorn(float* C, int n, int iters, float eps) {
#if defined(__SSE2__)
  if (n == 4) {
    __m128 r0 = _mm_loadu_ps(C), r1 = _mm_loadu_ps(C + 4), r2 = _mm_loadu_ps(C + 8),
           r3 = _mm_loadu_ps(C + 12);
    const __m128 ve = _mm_set1_ps(eps), zero = _mm_setzero_ps();
    // Lane j of r0..r3 divided by the sum of lane j (+ eps): a column pass on rows as vectors.
    const auto divide_by_lane_sums = [&] {
      const __m128 d =
          _mm_add_ps(_mm_add_ps(_mm_add_ps(_mm_add_ps(_mm_add_ps(zero, r0), r1), r2), r3), ve);
      r0 = _mm_div_ps(r0, d);
      r1 = _mm_div_ps(r1, d);
      r2 = _mm_div_ps(r2, d);
      r3 = _mm_div_ps(r3, d);
    };
    for (int it = 0; it < iters; ++it) {
      if (it > 0) {
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // r_j = column j; lane i = row i
        divide_by_lane_sums();               // the row pass
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      }
      divide_by_lane_sums();
    }
    _mm_storeu_ps(C, r0);
    _mm_storeu_ps(C + 4, r1);
    _mm_storeu_ps(C + 8, r2);
    _mm_storeu_ps(C + 12, r3);
    return;
  }
#endif
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
      for (int i = 0; i < n; ++i) {
        float s = 0.0f;
        for (int j = 0; j < n; ++j) s += C[i * n + j];
        for (int j = 0; j < n; ++j) C[i * n + j] /= s + eps;
      }
    }
    for (int j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int i = 0; i < n; ++i) s += C[i * n + j];
      for (int i = 0; i < n; ++i) C[i * n + j] /= s + eps;
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define DI_SINKHORN_AVX 1
// The n = 4 Sinkhorn above for four matrices at once: each YMM holds row i of two matrices (one
// per 128-bit lane) and two such sets run side by side, so the dependent add/divide chains of
// four rows overlap (one row's chain was latency-bound: most of hc_pre's own time on the tiny
// model). Every lane does the SSE path's operations in the same order (the transposes are
// in-lane permutations), so each matrix gets the same bits. Fewer than four: pad with copies.
#define DI_AVX __attribute__((target("avx")))
// In-lane 4x4 transpose of r[0..3] (_MM_TRANSPOSE4_PS's steps in each 128-bit lane).
DI_AVX inline void transpose4_lanes(__m256* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t2 = _mm256_unpacklo_ps(r[2], r[3]);
  const __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  r[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  r[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  r[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  r[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

// Each lane of r[0..3] / (((((0 + r0) + r1) + r2) + r3) + eps): the SSE path's column pass.
DI_AVX inline void normalise_cols(__m256* r, __m256 ve) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 d = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(zero, r[0]), r[1]), r[2]), r[3]), ve);
  for (int i = 0; i < 4; ++i) r[i] = _mm256_div_ps(r[i], d);
}

DI_AVX void sinkhorn4_avx(float* const* C, int count, int iters, float eps) {
  alignas(32) float pad[16];  // where a padding matrix's results go
  const float* src[4];
  for (int i = 0; i < 4; ++i) src[i] = i < count ? C[i] : C[0];
  __m256 a[4], b[4];
  for (int i = 0; i < 4; ++i) {
    a[i] = _mm256_set_m128(_mm_loadu_ps(src[1] + 4 * i), _mm_loadu_ps(src[0] + 4 * i));
    b[i] = _mm256_set_m128(_mm_loadu_ps(src[3] + 4 * i), _mm_loadu_ps(src[2] + 4 * i));
  }
  const __m256 ve = _mm256_set1_ps(eps);
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
      transpose4_lanes(a);
      transpose4_lanes(b);
      normalise_cols(a, ve);
      normalise_cols(b, ve);
      transpose4_lanes(a);
      transpose4_lanes(b);
    }
    normalise_cols(a, ve);
    normalise_cols(b, ve);
  }
  float* dst[4];
  for (int i = 0; i < 4; ++i) dst[i] = i < count ? C[i] : pad;
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_ps(dst[0] + 4 * i, _mm256_castps256_ps128(a[i]));
    _mm_storeu_ps(dst[1] + 4 * i, _mm256_extractf128_ps(a[i], 1));
    _mm_storeu_ps(dst[2] + 4 * i, _mm256_castps256_ps128(b[i]));
    _mm_storeu_ps(dst[3] + 4 * i, _mm256_extractf128_ps(b[i], 1));
  }
}

bool have_avx() {
  static const bool yes = __builtin_cpu_supports("avx");
  return yes;
}
#endif

// y = Σ_i pre_i · X_i.
void collapse(const float* x, const float* pre, int n, int64_t D, float* y) {
  opt::scale_to(x, pre[0], y, D);
  for (int i = 1; i < n; ++i) opt::axpy(pre[i], x + i * D, y, D);
}
}  // namespace

void OptOps::hc_pre(CMat streams, const HcParams& p, CMat collapse_pre, Mat y, Mat pre_out,
                    Mat post, Mat comb) {
  const int n = p.n;
  const int64_t D = streams.cols / n;
  DI_CHECK(streams.cols == n * D && y.cols == D && post.cols == n && comb.cols == n * n);
  DI_CHECK(collapse_pre.data == nullptr || collapse_pre.cols == n);
  DI_CHECK(pre_out.data == nullptr || pre_out.cols == n);
  // The coefficients a row collapses with: this site's pre (V4), or the previous site's (V4.1).
  auto coeffs = [&](int64_t m, const std::vector<float>& own) {
    return collapse_pre.data != nullptr ? collapse_pre.row(m) : own.data();
  };
  DI_CHECK(p.fn.cols == n * D && p.fn.rows >= (2 + n) * n);
  const float eps = p.hc_eps;
  pool_.parallel_for(
      streams.rows,
      [&](int64_t m0, int64_t m1) {
        const int64_t R = (2 + n) * n;
        std::vector<float> mus(static_cast<size_t>((m1 - m0) * R)), pre(static_cast<size_t>(n));
        const bool blocked = opt::have_avx2_fma();
        if (blocked) {  // every row's fn dots as one GEMM (the same per-row bits for any split)
          opt::gemm_f32_avx2(streams.rows_slice(m0, m1 - m0), p.fn.rows_slice(0, R),
                             Mat(mus.data(), m1 - m0, R));
        }
        for (int64_t m = m0; m < m1; ++m) {
          const float* x = streams.row(m);
          float* mu_row = mus.data() + (m - m0) * R;
          if (blocked) {
            const float rho =
                1.0f / std::sqrt(opt::sumsq(x, n * D) / static_cast<float>(n * D) + p.norm_eps);
            for (int64_t r = 0; r < R; ++r) mu_row[r] *= rho;
          } else {
            hc_mu(x, n * D, p, R, mu_row);
          }
          const std::span<const float> mu(mu_row, static_cast<size_t>(R));
          for (int i = 0; i < n; ++i) {
            pre[static_cast<size_t>(i)] =
                sigmoid(mu[static_cast<size_t>(i)] * p.scale[0] + p.base[i]) + eps;
            post.at(m, i) =
                2.0f * sigmoid(mu[static_cast<size_t>(n + i)] * p.scale[1] + p.base[n + i]);
            if (pre_out.data != nullptr) pre_out.at(m, i) = pre[static_cast<size_t>(i)];
          }
          float* C = comb.row(m);
          for (int i = 0; i < n * n; ++i)
            C[i] = mu[static_cast<size_t>(2 * n + i)] * p.scale[2] + p.base[2 * n + i];
          for (int i = 0; i < n; ++i) {
            float* ci = C + i * n;
            const float mx = *std::max_element(ci, ci + n);
            float s = 0.0f;
            for (int j = 0; j < n; ++j) s += (ci[j] = std::exp(ci[j] - mx));
            for (int j = 0; j < n; ++j) ci[j] = ci[j] / s + eps;
          }
#ifdef DI_SINKHORN_AVX
          if (n == 4 && have_avx()) {  // Sinkhorn four rows at a time, below
            collapse(x, coeffs(m, pre), n, D, y.row(m));
            continue;
          }
#endif
          sinkhorn(C, n, p.sinkhorn_iters, eps);
          collapse(x, coeffs(m, pre), n, D, y.row(m));
        }
#ifdef DI_SINKHORN_AVX
        if (n == 4 && have_avx()) {
          for (int64_t m = m0; m < m1; m += 4) {
            float* Cs[4];
            const int count = static_cast<int>(std::min<int64_t>(4, m1 - m));
            for (int i = 0; i < count; ++i) Cs[i] = comb.row(m + i);
            sinkhorn4_avx(Cs, count, p.sinkhorn_iters, eps);
          }
        }
#endif
      },
      opt::grain_for(n * D * (n * n + 3 * n) + 40 * n * n));
}

void OptOps::hc_post(CMat streams, CMat o, CMat post, CMat comb, int n, Mat out) {
  const int64_t D = o.cols;
  DI_CHECK(streams.cols == n * D && out.cols == n * D && post.cols == n && comb.cols == n * n);
  pool_.parallel_for(
      streams.rows,
      [&](int64_t m0, int64_t m1) {
        std::vector<float> tmp(static_cast<size_t>(n * D));
        for (int64_t m = m0; m < m1; ++m) {
          const float* x = streams.row(m);
          for (int k = 0; k < n; ++k) {
            float* t = tmp.data() + k * D;
            opt::scale_to(o.row(m), post.at(m, k), t, D);
            for (int j = 0; j < n; ++j) opt::axpy(comb.at(m, j * n + k), x + j * D, t, D);
          }
          std::copy(tmp.begin(), tmp.end(), out.row(m));
        }
      },
      opt::grain_for(n * D * (n + 1)));
}

void OptOps::hc_head(CMat streams, const HcParams& p, Mat y) {
  const int n = p.n;
  const int64_t D = streams.cols / n;
  DI_CHECK(y.cols == D && p.fn.cols == n * D && p.fn.rows >= n);
  pool_.parallel_for(
      streams.rows,
      [&](int64_t m0, int64_t m1) {
        std::vector<float> mu(static_cast<size_t>(n));
        for (int64_t m = m0; m < m1; ++m) {
          hc_mu(streams.row(m), n * D, p, n, mu.data());
          for (int i = 0; i < n; ++i)
            mu[static_cast<size_t>(i)] =
                sigmoid(mu[static_cast<size_t>(i)] * p.scale[0] + p.base[i]) + p.hc_eps;
          collapse(streams.row(m), mu.data(), n, D, y.row(m));
        }
      },
      opt::grain_for(n * D * (n + 1)));
}

void OptOps::hadamard128(Mat x) {
  DI_CHECK(x.cols % 128 == 0);
  const float s = 1.0f / std::sqrt(128.0f);
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          for (int64_t c0 = 0; c0 < x.cols; c0 += 128) {
            float* v = x.row(m) + c0;
            for (int h = 1; h < 128; h *= 2) {  // in-place butterflies, Sylvester order
              for (int i = 0; i < 128; i += 2 * h) {
                for (int j = i; j < i + h; ++j) {
                  const float a = v[j], b = v[j + h];
                  v[j] = a + b;
                  v[j + h] = a - b;
                }
              }
            }
            for (int i = 0; i < 128; ++i) v[i] *= s;
          }
        }
      },
      opt::grain_for(7 * x.cols));
}

void OptOps::fake_quant_fp8(Mat x, int64_t n, int64_t block) {
  DI_CHECK(n <= x.cols && block > 0);
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          for (int64_t b = 0; b < n; b += block)
            opt::fake_quant_fp8_block(x.row(m) + b, std::min(block, n - b));
        }
      },
      opt::grain_for(4 * n));
}

void OptOps::act_quant_fp8(Mat x, int64_t block) { fake_quant_fp8(x, x.cols, block); }

void OptOps::fake_quant_fp4(Mat x, int64_t block) {
  DI_CHECK(block > 0);
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          for (int64_t b = 0; b < x.cols; b += block)
            fake_quant_block_fp4(x.row(m) + b, std::min(block, x.cols - b));
        }
      },
      opt::grain_for(4 * x.cols));
}

void OptOps::swiglu(CMat a, CMat b, float limit, Mat out) {
  DI_CHECK(a.rows == b.rows && a.cols == b.cols && out.rows == a.rows && out.cols == a.cols);
  pool_.parallel_for(
      a.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          const float* ar = a.row(m);
          const float* br = b.row(m);
          float* o = out.row(m);
          opt::swiglu_row(ar, br, limit, o, a.cols);
        }
      },
      opt::grain_for(10 * a.cols));
}

}  // namespace deepinfer::backend::cpu
