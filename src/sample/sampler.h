// Sampler: one request's logits row -> the next token (+ logprobs), on the host.
//
// Determinism contract: the result is a pure function of (logits row, params, token history,
// bitmask, seed, output position, sample index). There is no generator state: the uniform
// that picks the token is Philox4x32-10 at counter (position, sample index, domain) under key
// seed (philox.h), so the same request gets the same token alone or in any batch, after
// preemption and with any prefill chunking. A Sampler object only owns scratch buffers
// (reused to avoid allocating per token), which every call overwrites before reading.
//
// Method: inverse CDF over the filtered distribution, walking the surviving tokens in
// ascending id order with double sums in a fixed blocked association (processors.h,
// sample_inverse_cdf). Chosen
// over Gumbel-max because it needs one random number per token instead of one per vocabulary
// entry (and no logarithms), and because a fixed walking order makes it exactly
// reproducible; a GPU kernel reproduces it with an ordered block scan.
//
// Pipeline (vLLM v1 order, processors.h): bitmask -> raw logprobs -> min_tokens ->
// allowed_token_ids -> logit_bias -> penalties
// -> greedy argmax (temperature == 0) | temperature -> min_p -> top_k -> top_p -> draw.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "sample/logprobs.h"
#include "sample/philox.h"
#include "sample/processors.h"
#include "sample/sample_spec.h"
#include "sample/sampling_params.h"
#include "sample/token_counts.h"

namespace deepinfer::sample {

// The filters and the draw, the tail of the pipeline that a backend reproduces (Ops::sample,
// sample_spec.h): greedy -> the lowest-id argmax, else temperature -> min_p -> top_k -> top_p
// -> inverse CDF at s.u. Returns -1 when no token is left. Sampler::sample runs it after the
// masks and penalties; Ops::sample's default runs it alone (the oracle of a device kernel).
struct DrawScratch {
  std::vector<float> top_k;
  TopPScratch top_p;
  InverseCdfScratch cdf;
};
int32_t draw_filtered(std::span<float> row, const SampleSpec& s, DrawScratch& scratch);
// The distribution draw_filtered draws from: temperature -> min_p -> top_k -> top_p, then the
// softmax of what survives (exp_nonpositive weights, normalised in double), into `probs`
// (row-sized; zero where filtered). Greedy: one-hot at the lowest-id argmax. False when no
// token is left. Speculative decoding's residual acceptance reads it for both the target and
// the draft distribution.
bool filtered_probabilities(std::span<float> row, const SampleSpec& s, DrawScratch& scratch,
                            std::vector<float>& probs);
// Rejection sampling's correction after a rejected draft: a token from the residual
// max(0, p - q) (normalised), by inverse CDF in ascending id order at u in [0, 1). -1 when the
// residual has no mass (p <= q everywhere: then the draft cannot have been rejected, up to
// rounding; the caller draws from p).
int32_t draw_residual(std::span<const float> p, std::span<const float> q, double u,
                      std::vector<float>& scratch);

// Everything besides the logits that one draw depends on.
struct SampleContext {
  const SamplingParams* params = nullptr;  // required; validate() it first
  // The resolved seq_seed, the output position of the token being sampled (= number of
  // tokens generated so far) and the sample index (0..n-1).
  SampleKey key;
  // Prompt + output history for the penalties; may be null when no penalty is set.
  const TokenCounts* history = nullptr;
  // Structured-output bitmask (processors.h layout); empty = every token allowed.
  std::span<const int32_t> allowed_bitmask;
  // The model's EOS ids: masked with the stop ids while position < min_tokens (also with
  // ignore_eos, as in vLLM).
  std::span<const int32_t> eos_token_ids;
};

struct SampleResult {
  int32_t token = -1;
  // Filled when params->logprobs is set (see logprobs.h): the sampled token's logprob and
  // rank under the raw distribution, and the top-n tokens.
  bool has_logprobs = false;
  float logprob = 0.0f;
  int32_t rank = 0;
  std::vector<TokenLogprob> top;
};

class Sampler {
 public:
  // Errors (InvalidArgument / FailedPrecondition / OutOfRange) name the problem: a NaN or
  // +inf logit and its id, a bitmask too short, no token left to sample, a history id
  // outside the vocabulary, missing params.
  Expected<SampleResult> sample(std::span<const float> logits, const SampleContext& ctx);
  // The distribution sample() draws from for this context (bitmask, min_tokens, penalties, then
  // filtered_probabilities), into `probs`; no logprobs. Same errors as sample().
  Status probabilities(std::span<const float> logits, const SampleContext& ctx,
                       std::vector<float>& probs);

 private:
  // The working row: the logits checked for NaN / +inf, then the bitmask.
  Status prepare(std::span<const float> logits, const SampleContext& ctx);
  // min_tokens' EOS / stop masking and the penalties, on the working row.
  Status mask_and_penalise(const SampleContext& ctx);

  std::vector<float> work_;
  std::vector<float> raw_;  // the masked raw row, kept only when logprobs are asked for
  std::vector<int32_t> allowed_;  // allowed_token_ids as a token bitmask
  DrawScratch draw_;
};

// One-off convenience (allocates its scratch each call).
Expected<SampleResult> sample_token(std::span<const float> logits, const SampleContext& ctx);

}  // namespace deepinfer::sample
