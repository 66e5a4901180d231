// OptOps, weight-bound ops: embedding, linear (any weight format), routing (the grouped MoE
// experts are in opt_moe.cc).
//
// GEMM scheme: split the N weight rows into tasks of kTileN; within a task, four weight rows at
// a time are decoded chunk by chunk (kChunkK columns) into an L1-sized FP32 scratch, and every
// activation row is dotted against the chunk (two activation rows x four weight rows per pass).
// Each stored weight byte is read once per call; decode (M = 1) streams the weights, prefill
// re-reads x chunks from L2. FP32 weights are read in place (no decode copy); on the AVX-512
// path so are dense BF16/FP16 weights at M <= kFusedMaxRows (widened in the kernel's loads: the
// scratch round trip made a BF16 decode no faster than FP32 although it reads half the bytes).
//
// On x86-64 CPUs with AVX-512F (checked once at run time) the chunk dots run in an explicit
// AVX-512 kernel instead (bench/model_cpu: the 2x4 `omp simd` AVX2 kernel was load-bound and took
// ~70% of a 0.3B prefill): four activation rows x four weight rows per pass (16 accumulators,
// 8 loads per 16 FMAs). Batch invariance is kept by construction: every (row, weight row) dot,
// whichever block shape computes it, is one 16-lane accumulator over k in order (masked tail),
// then one fixed lane reduction, so prefill, decode and chunked steps give bit-identical rows.
// The summation order differs from the AVX2 path's, so an AVX-512 machine's last bits differ from
// an AVX2 machine's (as AVX2's already differ from the SSE2 baseline's); the goldens' bounds hold.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/opt/gemm_avx2.h"
#include "backend/cpu/opt/kernels.h"
#include "backend/cpu/opt/opt_ops.h"
#include "backend/quant.h"
#include "base/check.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DI_GEMM_AVX512 1
#define DI_AVX512 __attribute__((target("avx512f")))
#endif

namespace deepinfer::backend::cpu {
namespace {

constexpr int64_t kTileN = 16;                     // weight rows per task
constexpr int64_t kChunkK = 512;                   // columns decoded at a time
constexpr int64_t kInlineMacs = int64_t{1} << 16;  // below this, no fan-out (see gemm)
// Up to this many activation rows, dense BF16/FP16 weights are widened inside the AVX-512 dot
// instead of decoded into scratch (see gemm).
constexpr int64_t kFusedMaxRows = 4;

std::vector<float>& scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

#ifdef DI_GEMM_AVX512
bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// Fixed pairwise order over the 16 lanes (not _mm512_reduce_add_ps: GCC 12 warns inside it).
DI_AVX512 inline float lane_sum(__m512 v) {
  alignas(64) float l[16];
  _mm512_store_ps(l, v);
  for (int h = 8; h > 0; h /= 2)
    for (int i = 0; i < h; ++i) l[i] += l[i + h];
  return l[0];
}

// Full-mask forms of the shuffles (the plain intrinsics trip GCC 12's -Wuninitialized).
#define DI_SHUF128(a, b, imm) _mm512_maskz_shuffle_f32x4(0xFFFF, a, b, imm)
#define DI_SHUF32(a, b, imm) _mm512_maskz_shuffle_ps(0xFFFF, a, b, imm)

// lane_sum of four vectors at once (out[j] = lane_sum(v_j)), by the same tree: each step adds the
// same lane pairs as the scalar loop, only several vectors share a register.
DI_AVX512 inline void lane_sum4(__m512 a, __m512 b, __m512 c, __m512 d, float* out) {
  // h = 8: [a_lo + a_hi | b_lo + b_hi], [c.. | d..]
  const __m512 ab = _mm512_add_ps(DI_SHUF128(a, b, 0x44), DI_SHUF128(a, b, 0xEE));
  const __m512 cd = _mm512_add_ps(DI_SHUF128(c, d, 0x44), DI_SHUF128(c, d, 0xEE));
  // h = 4: 128-bit blocks (a0 a1 | b0 b1) and (c0 c1 | d0 d1) -> [a0+a1, b0+b1, c0+c1, d0+d1]
  const __m512 v = _mm512_add_ps(DI_SHUF128(ab, cd, 0x88), DI_SHUF128(ab, cd, 0xDD));
  // h = 2, then h = 1, inside each 128-bit block.
  const __m512 v2 = _mm512_add_ps(v, DI_SHUF32(v, v, 0xEE));
  const __m512 v1 = _mm512_add_ps(v2, DI_SHUF32(v2, v2, 0x55));
  alignas(64) float l[16];
  _mm512_store_ps(l, v1);
  out[0] = l[0];
  out[1] = l[4];
  out[2] = l[8];
  out[3] = l[12];
}
#undef DI_SHUF128
#undef DI_SHUF32

// Sixteen weight columns as FP32: read in place (float), or widened from BF16 (the high half of
// an FP32: zero-extend, shift left 16) or FP16 (vcvtph2ps, exact), giving the very values the
// scratch decode would have stored, so the FMAs and their order are unchanged. Full-mask forms of
// the intrinsics again (GCC 12's -Wuninitialized, as for DI_SHUF128).
enum class WLoad { kF32, kBf16, kF16 };

template <WLoad L>
DI_AVX512 inline __m512 load_w16(const void* p) {
  if constexpr (L == WLoad::kF32) {
    return _mm512_loadu_ps(p);
  } else {
    const __m256i h = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    if constexpr (L == WLoad::kBf16) {
      return _mm512_castsi512_ps(
          _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
    } else {
      return _mm512_maskz_cvtph_ps(0xFFFF, h);
    }
  }
}

// The masked tail: FP32 by a masked load; 16-bit formats through a zeroed copy (a masked 16-bit
// load needs AVX-512BW, which have_avx512() does not check). Zero widens to +0 in all formats.
template <WLoad L>
DI_AVX512 inline __m512 load_w16_tail(const void* p, int64_t n, __mmask16 mask) {
  if constexpr (L == WLoad::kF32) {
    return _mm512_maskz_loadu_ps(mask, p);
  } else {
    alignas(32) uint16_t t[16] = {};
    std::copy_n(static_cast<const uint16_t*>(p), n, t);
    return load_w16<L>(t);
  }
}

// Element size of a weight row for each load kind.
template <WLoad L>
constexpr int64_t kWBytes = L == WLoad::kF32 ? 4 : 2;

// out[r * 4 + g] = x_r · w_g over [0, len) for R x rows and G weight rows (see the banner for why
// every shape gives the same bits for the same pair). w[g] points at elements of kind L.
template <int R, int G, WLoad L = WLoad::kF32>
DI_AVX512 inline void dot_block(const float* const* x, const void* const* w, int64_t len,
                                float* out) {
  const char* wb[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) wb[g] = static_cast<const char*>(w[g]);
  __m512 acc[R][G];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= len; k += 16) {
    __m512 wv[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) wv[g] = load_w16<L>(wb[g] + k * kWBytes<L>);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_loadu_ps(x[r] + k);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(xv, wv[g], acc[r][g]);
    }
  }
  if (k < len) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (len - k)) - 1u);
    __m512 wv[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) wv[g] = load_w16_tail<L>(wb[g] + k * kWBytes<L>, len - k, mask);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x[r] + k);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(xv, wv[g], acc[r][g]);
    }
  }
  if constexpr (G == 4) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) lane_sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], out + r * 4);
  } else {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) out[r * 4 + g] = lane_sum(acc[r][g]);
  }
}

// One K chunk [k0, k0 + len) of g <= 4 weight rows (w[j] points at column k0 of row n + j, stored
// as kind L) against every row of x; y[m, n + j] = (first ? 0 : y[m, n + j]) + dot.
template <WLoad L>
DI_AVX512 void chunk_avx512(CMat x, int64_t k0, const void* const* w, int g, int64_t len, Mat y,
                            int64_t n, bool first) {
  const int64_t M = x.rows;
  float p[16];
  auto put = [&](int64_t m, int rows, int g0, int gn) {
    for (int r = 0; r < rows; ++r) {
      float* yr = y.row(m + r) + n + g0;
      for (int j = 0; j < gn; ++j) yr[j] = first ? p[r * 4 + j] : yr[j] + p[r * 4 + j];
    }
  };
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    const float* xr[4] = {x.row(m) + k0, x.row(m + 1) + k0, x.row(m + 2) + k0, x.row(m + 3) + k0};
    if (g == 4) {
      dot_block<4, 4, L>(xr, w, len, p);
      put(m, 4, 0, 4);
    } else {
      for (int j = 0; j < g; ++j) {
        dot_block<4, 1, L>(xr, w + j, len, p);
        put(m, 4, j, 1);
      }
    }
  }
  for (; m < M; ++m) {
    const float* xr[1] = {x.row(m) + k0};
    if (g == 4) {
      dot_block<1, 4, L>(xr, w, len, p);
      put(m, 1, 0, 4);
    } else {
      for (int j = 0; j < g; ++j) {
        dot_block<1, 1, L>(xr, w + j, len, p);
        put(m, 1, j, 1);
      }
    }
  }
}
#endif

// Tasks of a GEMM = row parts x weight-row tiles. With few tiles (small N: a tiny model's
// projections, its experts, the router) the tiles alone leave threads idle (N <= 48 was one
// task), so the rows are split too, into parts of a multiple of 4 rows (the kernels' row block)
// and at least kMinPartRows each. Any row split gives the same bits: every (row, weight row) pair
// is computed the same way in every block shape (batch invariance, see the banner).
struct RowSplit {
  int64_t parts, rows;
};
constexpr int64_t kMinPartRows = 32;
RowSplit row_split(int64_t M, int64_t tiles, int threads) {
  const int64_t want = 4 * static_cast<int64_t>(threads);  // tasks, for load balance
  int64_t parts = 1;
  if (threads > 1 && tiles < want)
    parts =
        std::clamp<int64_t>((want + tiles - 1) / tiles, 1, std::max<int64_t>(1, M / kMinPartRows));
  const int64_t rows = ((M + parts - 1) / parts + 3) / 4 * 4;
  return {(M + rows - 1) / rows, rows};
}

float softplus_sqrt(float z) {
  const float sp = z > 20.0f ? z : std::log1p(std::exp(z));
  return std::sqrt(sp);
}

}  // namespace

void OptOps::gemm(CMat x, const WeightRef& w, Mat y) {
  DI_CHECK(x.cols == w.k && y.rows == x.rows && y.cols == w.n);
  const int64_t K = w.k, M = x.rows;
  // Small calls (the tiny models' decode steps) run on the caller: a pool wake-up costs 10-100 us
  // on an idle VM, more than the work; the split never changes the results.
  const bool inline_call = M * w.n * K < kInlineMacs;
#ifdef DI_GEMM_AVX512
  const bool avx512 = have_avx512();
#else
  const bool avx512 = false;
#endif
  if (!avx512 && opt::have_avx2_fma()) {
    // AVX2 + FMA machines (opt_gemm_avx2.cc): register- and cache-blocked, any weight format.
    const int64_t tiles2 = (w.n + opt::kAvx2TileN - 1) / opt::kAvx2TileN;
    const RowSplit rs = row_split(M, tiles2, inline_call ? 1 : pool_.size());
    const auto body2 = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t m0 = (i / tiles2) * rs.rows, t = i % tiles2;
        const int64_t mc = std::min(rs.rows, M - m0);
        opt::gemm_avx2(x.rows_slice(m0, mc), w, y.rows_slice(m0, mc), t * opt::kAvx2TileN,
                       std::min(w.n, (t + 1) * opt::kAvx2TileN));
      }
    };
    if (inline_call) {
      body2(0, tiles2);
    } else {
      pool_.parallel_for(rs.parts * tiles2, body2, 1);
    }
    return;
  }
  // K chunk: ~512 columns, a whole number of scale blocks, so four decoded weight rows (8 KiB)
  // stay in L1 while every activation row passes over them.
  const int64_t bk = w.quantized() ? w.block_k : 1;
  const int64_t kc = bk * std::max<int64_t>(1, kChunkK / bk);
  const int64_t tiles = (w.n + kTileN - 1) / kTileN;
  const auto body = [&](int64_t t0, int64_t t1) {
    std::vector<float>& buf = scratch(static_cast<size_t>(4 * kc));
    const bool in_place = w.format == WeightFormat::kDense && w.weight.dtype == DType::kF32;
#ifdef DI_GEMM_AVX512
    // Decode (few rows): the scratch decode's store + reload cost as much as the dot, so
    // BF16/FP16 rows are widened in the kernel's loads; the values (hence the bits) are those
    // the scratch would hold. Many rows amortise one decode per chunk, so they keep scratch.
    const bool dense16 = w.format == WeightFormat::kDense &&
                         (w.weight.dtype == DType::kBF16 || w.weight.dtype == DType::kF16);
    const bool fused = dense16 && M <= kFusedMaxRows && have_avx512();
#endif
    float p0[4], p1[4];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * kTileN, nn = std::min(kTileN, w.n - n0);
      for (int64_t r0 = 0; r0 < nn; r0 += 4) {
        const int64_t g = std::min<int64_t>(4, nn - r0);
        for (int64_t k0 = 0; k0 < K; k0 += kc) {
          const int64_t len = std::min(kc, K - k0);
          // Four weight rows of the chunk: in place for FP32, else decoded into `buf`.
#ifdef DI_GEMM_AVX512
          if (fused) {
            const uint16_t* w16 = w.weight.ptr<uint16_t>() + (n0 + r0) * K + k0;
            const void* wr[4] = {w16, w16 + K, w16 + 2 * K, w16 + 3 * K};
            if (w.weight.dtype == DType::kBF16) {
              chunk_avx512<WLoad::kBf16>(x, k0, wr, static_cast<int>(g), len, y, n0 + r0, k0 == 0);
            } else {
              chunk_avx512<WLoad::kF16>(x, k0, wr, static_cast<int>(g), len, y, n0 + r0, k0 == 0);
            }
            continue;
          }
#endif
          const float* wt = buf.data();
          int64_t ldw = kc;
          if (in_place) {
            wt = w.weight.ptr<float>() + (n0 + r0) * K + k0;
            ldw = K;
          } else {
            for (int64_t r = 0; r < g; ++r)
              opt::dequant_range(w, n0 + r0 + r, k0, len, buf.data() + r * kc);
          }
#ifdef DI_GEMM_AVX512
          if (have_avx512()) {
            const void* wr[4] = {wt, wt + ldw, wt + 2 * ldw, wt + 3 * ldw};
            chunk_avx512<WLoad::kF32>(x, k0, wr, static_cast<int>(g), len, y, n0 + r0, k0 == 0);
            continue;
          }
#endif
          // y[m, n] = Σ over chunks of the chunk dots, in chunk order, the same for every M
          // (batch invariance): the first chunk assigns, the others add.
          auto put = [&](float* yr, const float* p) {
            for (int64_t r = 0; r < g; ++r) yr[r] = k0 == 0 ? p[r] : yr[r] + p[r];
          };
          int64_t m = 0;
          for (; m + 2 <= M; m += 2) {
            const float* x0 = x.row(m) + k0;
            const float* x1 = x.row(m + 1) + k0;
            if (g == 4) {
              opt::dot4x2(x0, x1, wt, ldw, len, p0, p1);
            } else {
              for (int64_t r = 0; r < g; ++r) {
                p0[r] = opt::dot(x0, wt + r * ldw, len);
                p1[r] = opt::dot(x1, wt + r * ldw, len);
              }
            }
            put(y.row(m) + n0 + r0, p0);
            put(y.row(m + 1) + n0 + r0, p1);
          }
          for (; m < M; ++m) {
            const float* xr = x.row(m) + k0;
            if (g == 4) {
              opt::dot4(xr, wt, ldw, len, p0);
            } else {
              for (int64_t r = 0; r < g; ++r) p0[r] = opt::dot(xr, wt + r * ldw, len);
            }
            put(y.row(m) + n0 + r0, p0);
          }
        }
      }
    }
  };
  if (inline_call) {
    body(0, tiles);
  } else {
    pool_.parallel_for(tiles, body, 1);
  }
}

void OptOps::quantized_input(CMat x, const WeightRef& w, bool act_quant, int act_block,
                             float* buf) {
  const int64_t K = x.cols;
  const int64_t grain = opt::grain_for(act_quant && w.quantized() ? 4 * K : K);
  pool_.parallel_for(
      x.rows,
      [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          float* dst = buf + m * K;
          std::copy(x.row(m), x.row(m) + K, dst);
          if (act_quant && w.quantized()) {
            for (int64_t b = 0; b < K; b += act_block) {
              opt::fake_quant_fp8_block(dst + b, std::min<int64_t>(act_block, K - b));
            }
          }
        }
      },
      grain);
  ;
}

void OptOps::linear(CMat x, const WeightRef& w, Mat y, const LinearOpts& opts) {
  if (opts.act_quant && w.quantized()) {
    // The quantized copy of x lives in a per-thread buffer that grows once, not per call (this
    // runs for every FP8/FP4 linear of every step). Distinct from scratch(), which gemm's
    // workers (the calling thread among them) use for weight decode while xq is being read.
    thread_local std::vector<float> xq;
    const auto n = static_cast<size_t>(x.rows * x.cols);
    if (xq.size() < n) xq.resize(n);
    quantized_input(x, w, true, opts.act_block, xq.data());
    gemm(CMat(xq.data(), x.rows, x.cols), w, y);
  } else {
    gemm(x, w, y);
  }
  if (opts.round_bf16) round_bf16(y);
}

void OptOps::embed(const int32_t* ids, int64_t n, const WeightRef& table, Mat out) {
  DI_CHECK(!table.quantized() && out.rows == n && out.cols == table.k);
  pool_.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          DI_CHECK(ids[i] >= 0 && ids[i] < table.n);
          opt::dequant_row(table, ids[i], out.row(i));
        }
      },
      opt::grain_for(2 * table.k));
}

void OptOps::route_weights(CMat x, const WeightRef& gate, Mat p, float temperature) {
  gemm(x, gate, p);
  for (int64_t m = 0; m < p.rows; ++m) {
    for (int64_t e = 0; e < p.cols; ++e) {
      const float z = p.at(m, e);
      p.at(m, e) = softplus_sqrt(temperature == 1.0f ? z : z / temperature);
    }
  }
}

void OptOps::moe_route_score(CMat x, const WeightRef& gate, const float* bias, int top_k,
                             float route_scale, const RouteOpts& opts, int32_t* ids, Mat weights) {
  DI_CHECK(x.cols == gate.k && weights.cols == top_k && top_k <= gate.n);
  std::vector<float> pbuf(static_cast<size_t>(x.rows * gate.n));
  Mat p(pbuf.data(), x.rows, gate.n);
  route_weights(x, gate, p, opts.temperature);
  std::vector<int32_t> order(static_cast<size_t>(gate.n));
  for (int64_t m = 0; m < x.rows; ++m) {
    const float* pr = p.row(m);
    auto key = [&](int32_t e) { return pr[e] + (bias ? bias[e] : 0.0f); };
    std::iota(order.begin(), order.end(), 0);
    // A total order (key desc, id asc), so partial_sort picks what the ref's stable sort picks.
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      const float ka = key(a), kb = key(b);
      return ka > kb || (ka == kb && a < b);
    });
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) sum += pr[order[static_cast<size_t>(j)]];
    for (int j = 0; j < top_k; ++j) {
      const float pj = pr[order[static_cast<size_t>(j)]];
      ids[m * top_k + j] = order[static_cast<size_t>(j)];
      weights.at(m, j) = (opts.normalize ? pj / (sum + opts.norm_floor) : pj) * route_scale;
    }
  }
}

void OptOps::moe_route_hash(CMat x, const int32_t* token_ids, const TensorView& tid2eid,
                            const WeightRef& gate, float route_scale, int32_t* ids, Mat weights) {
  DI_CHECK(tid2eid.rank() == 2 && (tid2eid.dtype == DType::kI32 || tid2eid.dtype == DType::kI64));
  const int k = static_cast<int>(tid2eid.shape[1]);
  DI_CHECK(weights.cols == k && x.cols == gate.k);
  std::vector<float> pbuf(static_cast<size_t>(x.rows * gate.n));
  Mat p(pbuf.data(), x.rows, gate.n);
  route_weights(x, gate, p);
  for (int64_t m = 0; m < x.rows; ++m) {
    const int64_t t = token_ids[m];
    DI_CHECK(t >= 0 && t < tid2eid.shape[0]);
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int64_t e = tid2eid.dtype == DType::kI32 ? tid2eid.ptr<int32_t>()[t * k + j]
                                                     : tid2eid.ptr<int64_t>()[t * k + j];
      DI_CHECK(e >= 0 && e < gate.n);
      ids[m * k + j] = static_cast<int32_t>(e);
      sum += p.at(m, e);
    }
    for (int j = 0; j < k; ++j) weights.at(m, j) = p.at(m, ids[m * k + j]) / sum * route_scale;
  }
}

std::unique_ptr<Ops> make_opt_ops(int num_threads) { return std::make_unique<OptOps>(num_threads); }

}  // namespace deepinfer::backend::cpu
