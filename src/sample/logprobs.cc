// Log-softmax pieces (see logprobs.h for which logits and which tie rules).
#include "sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sample/processors.h"

namespace deepinfer::sample {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// a ranks before b: larger logit, then lower id.
inline bool before(float xa, int32_t a, float xb, int32_t b) { return xa != xb ? xa > xb : a < b; }
}  // namespace

double log_sum_exp(std::span<const float> logits, std::vector<float>& scratch) {
  const float m = row_max(logits);
  if (m == kNegInf) return -std::numeric_limits<double>::infinity();
  // Float weights from the sampler's exp (processors.h; relative error ~1e-7), computed in a
  // pass that vectorises, then summed in double in the blocked order of processors.h: the
  // lse is good to ~1e-6 absolute, finer than the float the logprobs are returned in.
  scratch.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) scratch[i] = exp_nonpositive(logits[i] - m);
  return static_cast<double>(m) + std::log(blocked_mass(scratch));
}

double log_sum_exp(std::span<const float> logits) {
  std::vector<float> scratch;
  return log_sum_exp(logits, scratch);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t n, double lse) {
  std::vector<TokenLogprob> out;
  if (n <= 0) return out;
  // A small sorted buffer (n <= 20): most entries fail the first comparison with its tail.
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(n) + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (x == kNegInf) continue;
    const int32_t id = static_cast<int32_t>(i);
    if (best.size() == static_cast<size_t>(n) && !before(x, id, logits[best.back()], best.back())) {
      continue;
    }
    auto pos = std::upper_bound(best.begin(), best.end(), id, [&](int32_t a, int32_t b) {
      return before(logits[a], a, logits[b], b);
    });
    best.insert(pos, id);
    if (best.size() > static_cast<size_t>(n)) best.pop_back();
  }
  out.reserve(best.size());
  for (int32_t id : best) out.push_back(TokenLogprob{id, logprob_of(logits, id, lse)});
  return out;
}

int32_t logprob_rank(std::span<const float> logits, int32_t token) {
  const float x = logits[token];
  int32_t greater = 0;
  for (float y : logits) greater += y > x ? 1 : 0;
  return greater + 1;
}

}  // namespace deepinfer::sample
