// Sampling cases shared by the CPU test of Ops::sample (ops_sample_test.cc: the default ==
// sample::Sampler) and the op case `sample` (cases/dense.cc: each backend == the default):
// peaked random logit rows (some with -inf entries, one all -inf, one NaN) and every filter
// alone and combined, each row at its own seeded key.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "sample/sample_spec.h"

namespace deepinfer::backend::testing {

struct SampleCase {
  sample::SamplingParams params;
  sample::SampleKey key;
};

// Rows [rows, vocab] of logits with a scale that makes distributions of every shape (flat to
// peaked); row 1 has a third of its entries -inf, the next-to-last row is all -inf and the last
// holds a NaN.
inline std::vector<float> sample_rows(std::mt19937& rng, int64_t rows, int64_t vocab) {
  std::vector<float> v(static_cast<size_t>(rows * vocab));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = 0.5f + 6.0f * static_cast<float>(r % 5) / 4.0f;
    for (int64_t i = 0; i < vocab; ++i) {
      float x = nd(rng) * scale;
      if (r == 1 && i % 3 == 0) x = -std::numeric_limits<float>::infinity();
      if (r == rows - 2) x = -std::numeric_limits<float>::infinity();
      v[static_cast<size_t>(r * vocab + i)] = x;
    }
  }
  v[static_cast<size_t>((rows - 1) * vocab + vocab / 2)] = std::numeric_limits<float>::quiet_NaN();
  return v;
}

// One case per row, cycling through the filters.
inline std::vector<SampleCase> sample_cases(int64_t rows) {
  std::vector<SampleCase> cases;
  for (int64_t r = 0; r < rows; ++r) {
    SampleCase c;
    sample::SamplingParams& p = c.params;
    switch (r % 9) {
      case 0: p.temperature = 0.0f; break;                       // greedy
      case 1: p.temperature = 1.0f; break;                       // plain
      case 2: p.temperature = 0.7f; p.top_k = 50; break;
      case 3: p.temperature = 1.3f; p.top_p = 0.9f; break;
      case 4: p.temperature = 0.8f; p.min_p = 0.05f; break;
      case 5: p.top_k = 1; break;
      case 6: p.temperature = 0.6f; p.top_k = 200; p.top_p = 0.5f; p.min_p = 0.01f; break;
      case 7: p.temperature = 1.0f; p.top_p = 0.999f; break;     // many candidates
      case 8: p.temperature = 2.0f; p.top_k = 5000; p.top_p = 0.95f; break;
    }
    c.key = {static_cast<uint64_t>(1000 + r * 7919), static_cast<uint64_t>(r % 13),
             static_cast<uint32_t>(r % 3)};
    cases.push_back(c);
  }
  return cases;
}

inline std::vector<sample::SampleSpec> sample_specs(const std::vector<SampleCase>& cases) {
  std::vector<sample::SampleSpec> specs;
  for (const SampleCase& c : cases) specs.push_back(sample::make_sample_spec(c.params, c.key));
  return specs;
}

}  // namespace deepinfer::backend::testing
