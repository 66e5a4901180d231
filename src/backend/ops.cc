// Free parts of the op contract: feature names, require(), the RoPE frequency table.
#include "backend/ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

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
