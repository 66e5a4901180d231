// Free parts of the op contract: feature names, require(), the RoPE frequency table.
#include "backend/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "backend/quant.h"
#include "base/check.h"
#include "sample/processors.h"
#include "sample/sampler.h"

namespace deepinfer::backend {

const char* feature_name(Feature f) {
  switch (f) {
    case Feature::kDenseBf16:
      return "dense BF16 weights";
    case Feature::kDenseF16:
      return "dense F16 weights";
    case Feature::kDenseF32:
      return "dense F32 weights";
    case Feature::kFp8Weights:
      return "FP8 E4M3 block-scaled weights";
    case Feature::kFp4Weights:
      return "FP4 E2M1 block-scaled weights";
    case Feature::kActQuantFp8:
      return "FP8 activation quantization";
    case Feature::kSparseAttention:
      return "sparse attention";
    case Feature::kAttentionSink:
      return "attention sink";
    case Feature::kBf16Probs:
      return "BF16 attention probabilities";
    case Feature::kHyperConnections:
      return "hyper-connections (mHC)";
    case Feature::kCompressorPool:
      return "compressor softmax pooling";
    case Feature::kIndexer:
      return "lightning indexer";
    case Feature::kIndexerBf16:
      return "lightning indexer BF16 rounding";
    case Feature::kHadamard128:
      return "Hadamard-128";
    case Feature::kFakeQuantFp8:
      return "FP8 fake-quant";
    case Feature::kFakeQuantFp4:
      return "FP4 fake-quant";
    case Feature::kMoeRouting:
      return "MoE routing";
    case Feature::kMoeExperts:
      return "grouped MoE experts";
    case Feature::kHcSinglePass:
      return "single-pass mHC (V4.1)";
    case Feature::kFakeQuantNvfp4:
      return "NVFP4 fake-quant (V4.1 compressed KV)";
    case Feature::kCandidateBlocks:
      return "CSA2 candidate blocks (V4.1)";
    case Feature::kEngramGate:
      return "Engram gate (V4.1)";
    case Feature::kRouterOptions:
      return "router temperature / normalisation options (V4.1)";
    case Feature::kCount:
      break;
  }
  return "unknown feature";
}

Status require(const Ops& ops, std::initializer_list<Feature> features) {
  std::string missing;
  for (Feature f : features) {
    if (!ops.supports(f)) {
      if (!missing.empty()) missing += ", ";
      missing += feature_name(f);
    }
  }
  if (missing.empty()) return {};
  return unimplemented(std::string("backend '") + ops.name() + "' does not support: " + missing);
}

YarnRange yarn_range(float theta, int rope_dim, const YarnParams& yarn) {
  // Dimension index whose wavelength makes `rotations` turns over original_len (reference
  // find_correction_dim), floored/ceiled and clamped like the reference.
  auto correction_dim = [&](double rotations) {
    return rope_dim *
           std::log(static_cast<double>(yarn.original_len) / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(static_cast<double>(theta)));
  };
  int low = static_cast<int>(std::floor(correction_dim(yarn.beta_fast)));
  int high = static_cast<int>(std::ceil(correction_dim(yarn.beta_slow)));
  return {std::max(low, 0), std::min(high, rope_dim - 1)};
}

std::vector<float> make_rope_freqs(float theta, int rope_dim, const YarnParams* yarn) {
  const int half = rope_dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    f[static_cast<size_t>(i)] =
        1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
  }
  if (yarn != nullptr && yarn->factor != 1.0f) {
    const YarnRange r = yarn_range(theta, rope_dim, *yarn);
    const float lo = static_cast<float>(r.low);
    const float hi = static_cast<float>(r.high == r.low ? r.high + 0.001f : r.high);
    for (int i = 0; i < half; ++i) {
      const float ramp = std::clamp((static_cast<float>(i) - lo) / (hi - lo), 0.0f, 1.0f);
      float& fi = f[static_cast<size_t>(i)];
      fi = fi / yarn->factor * ramp + fi * (1.0f - ramp);
    }
  }
  return f;
}

}  // namespace deepinfer::backend

// ---- Host defaults of the memory section and of the two small model ops (see ops.h). -------
namespace deepinfer::backend {

void Ops::rms_norm_bf16(Mat x, int64_t group, float eps) {
  DI_CHECK(group > 0 && x.cols % group == 0);
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t c0 = 0; c0 < x.cols; c0 += group) {
      float* v = x.row(m) + c0;
      float ss = 0.0f;
      for (int64_t c = 0; c < group; ++c) ss += bf16_round(v[c] * v[c]);
      const float ms = bf16_round(ss / static_cast<float>(group));
      const float r = bf16_round(1.0f / std::sqrt(bf16_round(ms + eps)));
      for (int64_t c = 0; c < group; ++c) v[c] = bf16_round(v[c] * r);
    }
  }
}

void Ops::hadamard(Mat x, int64_t n) {
  DI_CHECK(n > 0 && (n & (n - 1)) == 0 && x.cols % n == 0);
  if (n == 128) {
    hadamard128(x);
    return;
  }
  const float s = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t m = 0; m < x.rows; ++m) {
    for (int64_t c0 = 0; c0 < x.cols; c0 += n) {
      float* v = x.row(m) + c0;
      for (int64_t h = 1; h < n; h *= 2) {  // butterflies give Sylvester order
        for (int64_t i = 0; i < n; i += 2 * h) {
          for (int64_t j = i; j < i + h; ++j) {
            const float a = v[j], b = v[j + h];
            v[j] = a + b;
            v[j + h] = a - b;
          }
        }
      }
      for (int64_t i = 0; i < n; ++i) v[i] *= s;
    }
  }
}

void Ops::scatter_rows(std::span<const float* const> src, std::span<float* const> dst,
                       int64_t cols) {
  DI_CHECK(src.size() == dst.size() && cols >= 0);
  for (size_t i = 0; i < src.size(); ++i) {
    std::memcpy(dst[i], src[i], static_cast<size_t>(cols) * sizeof(float));
  }
}

namespace {

// Row r of `logits` in host memory (download is a copy on a host backend); whether every
// value is finite or -inf (a NaN or +inf makes sampling report kSampleNonFinite).
bool host_row(Ops& ops, CMat logits, int64_t r, std::vector<float>& row) {
  row.resize(static_cast<size_t>(logits.cols));
  ops.download(row.data(), logits.data + r * logits.ld, row.size() * sizeof(float));
  bool finite = true;
  for (float x : row) finite &= x < std::numeric_limits<float>::infinity();  // NaN fails too
  return finite;
}

}  // namespace

void Ops::sample(CMat logits, std::span<const SampleSpec> specs, int32_t* tokens) {
  DI_CHECK(static_cast<int64_t>(specs.size()) == logits.rows);
  std::vector<float> row;
  sample::DrawScratch scratch;
  for (int64_t r = 0; r < logits.rows; ++r) {
    tokens[r] = host_row(*this, logits, r, row)
                    ? sample::draw_filtered(row, specs[static_cast<size_t>(r)], scratch)
                    : kSampleNonFinite;
  }
}

void Ops::argmax_rows(CMat logits, int32_t* tokens, int32_t* ids, float* probs) {
  const auto R = static_cast<size_t>(logits.rows);
  std::vector<float> row, prob(R);
  std::vector<int32_t> tok(R), id(R);
  for (size_t r = 0; r < R; ++r) {
    const bool finite = host_row(*this, logits, static_cast<int64_t>(r), row);
    const int32_t t = finite ? sample::argmax_lowest_id(row) : kSampleNonFinite;
    if (t >= 0) {  // summed in double: a float running sum of 129k terms drifts by ~1e-4
      const float top = row[static_cast<size_t>(t)];
      double z = 0.0;
      for (const float x : row) z += std::exp(x - top);
      prob[r] = static_cast<float>(1.0 / z);
    }
    tok[r] = t;
    id[r] = std::max(t, 0);
  }
  // Into backend memory (upload is a copy on a host backend).
  upload(tokens, tok.data(), R * sizeof(int32_t));
  if (ids != nullptr) upload(ids, id.data(), R * sizeof(int32_t));
  if (probs != nullptr) upload(probs, prob.data(), R * sizeof(float));
}

void Ops::indexer_scores_multi(CMat q, int64_t n_heads, CMat weights,
                               std::span<const PagedCMat> keys, const int32_t* visible,
                               bool bf16_rounding, Mat scores) {
  DI_CHECK(static_cast<int64_t>(keys.size()) == q.rows && weights.rows == q.rows &&
           scores.rows == q.rows);
  std::vector<int32_t> page_visible;
  int64_t t0 = 0;
  while (t0 < q.rows) {
    const PagedCMat k = keys[static_cast<size_t>(t0)];
    int64_t t1 = t0 + 1;
    while (t1 < q.rows && keys[static_cast<size_t>(t1)].pages == k.pages &&
           keys[static_cast<size_t>(t1)].rows == k.rows) {
      ++t1;
    }
    DI_CHECK(k.rows <= scores.cols);
    const int64_t n = t1 - t0;
    page_visible.resize(static_cast<size_t>(n));
    for (int64_t p0 = 0; p0 < k.num_pages();) {
      // Pages [p0, p1) lie back to back in memory (a pool hands a sequence's pages out in
      // address order when it can): one call over keys [r0, r0 + rows) of them.
      int64_t p1 = p0 + 1;
      while (p1 < k.num_pages() && k.pages[p1] == k.pages[p1 - 1] + k.page_rows * k.cols) ++p1;
      const int64_t r0 = p0 * k.page_rows;
      const CMat kp(k.pages[p0], std::min(k.rows, p1 * k.page_rows) - r0, k.cols);
      // A row sees the part of them below its visible count.
      for (int64_t i = 0; i < n; ++i) {
        page_visible[static_cast<size_t>(i)] =
            static_cast<int32_t>(std::clamp<int64_t>(visible[t0 + i] - r0, 0, kp.rows));
      }
      indexer_scores(q.rows_slice(t0, n), n_heads, weights.rows_slice(t0, n), kp,
                     page_visible.data(), bf16_rounding,
                     scores.rows_slice(t0, n).cols_slice(r0, kp.rows));
      p0 = p1;
    }
    t0 = t1;
  }
}

void Ops::sparse_attention_rows(CMat q, int64_t n_heads, const float* const* key_rows, int64_t L,
                                int64_t d, const float* sink, float scale, bool bf16_probs,
                                Mat o) {
  DI_CHECK(q.cols == n_heads * d && o.rows == q.rows && o.cols == q.cols);
  std::vector<float> keys;
  std::vector<int32_t> idx;
  for (int64_t t = 0; t < q.rows; ++t) {
    keys.clear();
    idx.clear();
    for (int64_t j = 0; j < L; ++j) {
      const float* row = key_rows[t * L + j];
      if (row == nullptr) continue;
      idx.push_back(static_cast<int32_t>(keys.size() / static_cast<size_t>(d)));
      keys.insert(keys.end(), row, row + d);
    }
    const int64_t n = static_cast<int64_t>(idx.size());
    sparse_attention(q.rows_slice(t, 1), n_heads, CMat(keys.data(), n, d), idx.data(), n, sink,
                     scale, bf16_probs, o.rows_slice(t, 1));
  }
}

void Ops::paged_row_addresses(const int32_t* sel, int64_t K, std::span<const PagedCMat> rows,
                              const float** out, int64_t ld) {
  for (size_t t = 0; t < rows.size(); ++t) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t r = sel[static_cast<int64_t>(t) * K + k];
      DI_CHECK(r < rows[t].rows);
      out[static_cast<int64_t>(t) * ld + k] = r >= 0 ? rows[t].row(r) : nullptr;
    }
  }
}

void* Ops::allocate(size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) {
    throw OutOfMemory("host memory exhausted: allocating " + std::to_string(rounded) +
                      " bytes failed");
  }
  std::memset(p, 0, rounded);
  return p;
}

void Ops::deallocate(void* p) { std::free(p); }

void* Ops::allocate_staging(size_t bytes) { return Ops::allocate(bytes); }

void Ops::deallocate_staging(void* p) { Ops::deallocate(p); }

void Ops::upload(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void Ops::download(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void Ops::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void Ops::fill_random(void* dst, int64_t n, const RandomFill& f) { fill_random_host(dst, n, f); }

}  // namespace deepinfer::backend
