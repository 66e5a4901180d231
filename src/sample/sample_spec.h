// SampleSpec: one row's draw as a backend runs it (Ops::sample), for requests whose sampling is
// only the distribution filters: no token bitmask, no penalties, no min_tokens masking at this
// position, no logprobs. Then the host Sampler's pipeline (sampler.h) reduces to: greedy
// argmax (lowest id), else temperature -> min_p -> top_k -> top_p -> inverse CDF at u, which a
// device reproduces token for token (kernels/cuda/sample/sample.cu). The random number and
// log(min_p) are computed here, on the host, so every backend draws from the same u.
#pragma once

#include <cmath>
#include <cstdint>

#include "sample/philox.h"
#include "sample/sampling_params.h"

namespace deepinfer::sample {

struct SampleSpec {
  bool greedy = true;
  float temperature = 1.0f;  // the effective temperature (SamplingParams::effective_temperature)
  float min_p = 0.0f;
  double log_min_p = 0.0;  // std::log(double(min_p)) when min_p > 0 (what apply_min_p uses)
  int32_t top_k = 0;       // <= 0: off
  float top_p = 1.0f;
  double u = 0.0;  // the draw's uniform in [0, 1) (sample_uniform of the request's key)
};

// Codes of Ops::sample besides a token id.
inline constexpr int32_t kSampleNoToken = -1;    // every logit is -inf after the filters
inline constexpr int32_t kSampleNonFinite = -2;  // the row holds a NaN or +inf

// Whether a request's next draw (at output position `position`) is only the filters above.
inline bool backend_samplable(const SamplingParams& p, uint64_t position, bool has_bitmask) {
  return !has_bitmask && !p.has_logit_processors() && !p.logprobs &&
         position >= static_cast<uint64_t>(p.min_tokens);
}

inline SampleSpec make_sample_spec(const SamplingParams& p, const SampleKey& key,
                                   RngDomain domain = RngDomain::kTokenSample) {
  SampleSpec s;
  s.greedy = p.is_greedy();
  s.temperature = p.effective_temperature();
  s.min_p = p.min_p;
  s.log_min_p = p.min_p > 0.0f ? std::log(static_cast<double>(p.min_p)) : 0.0;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.u = sample_uniform(key, domain);
  return s;
}

}  // namespace deepinfer::sample
