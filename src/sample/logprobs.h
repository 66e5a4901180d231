// Log-probabilities returned to the user.
//
// Which logits: the RAW row, before penalties, temperature and the top-k/top-p/min-p filters
// (vLLM v1's default logprobs_mode "raw_logprobs"), but after the structured-output bitmask,
// which vLLM applies to the logits before they reach its sampler: a token the grammar forbids
// has logprob -inf and is never listed. So a logprob describes the model's distribution, not
// the (possibly truncated) one the token was drawn from.
//
// Arithmetic: log_softmax_i = x_i - (max + log(sum_j exp(x_j - max))), the exp in float (the
// sampler's exp_nonpositive), the sum (blocked order, processors.h) and the subtraction in double,
// the result rounded to float once: within ~1e-6 of an exact log-softmax. Top-n is ordered by
// logprob descending, ties by the lower id; only tokens with a finite logprob are listed (so fewer
// than n when the bitmask leaves fewer). rank = 1 + number of tokens with a strictly larger logprob
// (vLLM's rank).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::sample {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// max + log(sum exp(x - max)) over the row; -inf when every entry is -inf. `scratch` holds
// the weights (reused by the Sampler); the one-argument form allocates its own.
double log_sum_exp(std::span<const float> logits, std::vector<float>& scratch);
double log_sum_exp(std::span<const float> logits);

// The top `n` tokens of the row (n >= 0) with their logprobs, given the row's log_sum_exp.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t n, double lse);

// 1 + the number of entries strictly larger than logits[token].
int32_t logprob_rank(std::span<const float> logits, int32_t token);

inline float logprob_of(std::span<const float> logits, int32_t token, double lse) {
  return static_cast<float>(static_cast<double>(logits[token]) - lse);
}

}  // namespace deepinfer::sample
