// Sampler::sample: the processors of processors.h composed in vLLM v1's order (sampler.h).
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace deepinfer::sample {
namespace {

constexpr float kPosInf = std::numeric_limits<float>::infinity();

Status no_token_left(const char* after) {
  return failed_precondition(std::string("no token can be sampled: every logit is -inf ") + after +
                             " (check the structured-output bitmask and the EOS/stop masking "
                             "of min_tokens)");
}

}  // namespace

void apply_filters(std::span<float> row, const SampleSpec& s, DrawScratch& scratch) {
  apply_temperature(row, s.temperature);
  apply_min_p(row, s.min_p);
  apply_top_k(row, s.top_k, scratch.top_k);
  apply_top_p(row, s.top_p, scratch.top_p);
}

int32_t draw_filtered(std::span<float> row, const SampleSpec& s, DrawScratch& scratch) {
  if (s.greedy) return argmax_lowest_id(row);
  apply_filters(row, s, scratch);
  return sample_inverse_cdf(row, s.u, scratch.cdf);
}

bool filtered_probabilities(std::span<float> row, const SampleSpec& s, DrawScratch& scratch,
                            std::vector<float>& probs) {
  probs.assign(row.size(), 0.0f);
  if (s.greedy) {
    const int32_t t = argmax_lowest_id(row);
    if (t < 0) return false;
    probs[static_cast<size_t>(t)] = 1.0f;
    return true;
  }
  apply_filters(row, s, scratch);
  const float top = row_max(row);
  if (top == -kPosInf) return false;
  for (size_t i = 0; i < row.size(); ++i) probs[i] = exp_nonpositive(row[i] - top);
  const double total = blocked_mass(probs);
  const auto scale = static_cast<float>(1.0 / total);
  for (float& x : probs) x *= scale;
  return true;
}

int32_t draw_residual(std::span<const float> p, std::span<const float> q, double u,
                      std::vector<float>& scratch) {
  scratch.resize(p.size());
  double total = 0.0;  // summed in the same order as the walk below, so the walk reaches it
  for (size_t i = 0; i < p.size(); ++i) {
    scratch[i] = std::max(0.0f, p[i] - q[i]);
    total += static_cast<double>(scratch[i]);
  }
  if (!(total > 0.0)) return -1;
  // Inverse CDF in ascending id order (the sums in double, the association fixed by the order).
  const double target = u * total;
  double acc = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < scratch.size(); ++i) {
    if (scratch[i] <= 0.0f) continue;
    last = static_cast<int32_t>(i);
    acc += static_cast<double>(scratch[i]);
    if (acc > target) return last;
  }
  return last;  // rounding left the target at the very end of the mass
}

Status Sampler::prepare(std::span<const float> logits, const SampleContext& ctx) {
  if (ctx.params == nullptr) return invalid_argument("SampleContext.params is null");
  if (logits.empty()) return invalid_argument("the logits row is empty (vocabulary size 0)");

  // Copy into the working row, refusing values that would poison every later step.
  // The scan is branch-free so it vectorises; the slow search runs only on a bad row.
  work_.assign(logits.begin(), logits.end());
  uint32_t bad = 0;
  for (float x : work_) bad |= static_cast<uint32_t>(!(x < kPosInf));  // NaN or +inf
  if (bad != 0) {
    for (size_t i = 0; i < work_.size(); ++i) {
      if (!(work_[i] < kPosInf)) {
        return invalid_argument("logit of token " + std::to_string(i) + " is " +
                                (std::isnan(work_[i]) ? "NaN" : "+inf") +
                                "; the model produced a non-finite row");
      }
    }
  }
  if (!ctx.allowed_bitmask.empty()) DI_TRY(apply_token_bitmask(work_, ctx.allowed_bitmask));
  return {};
}

Status Sampler::mask_and_penalise(const SampleContext& ctx) {
  const SamplingParams& p = *ctx.params;
  const std::span<float> row(work_);
  // min_tokens masks EOS even with ignore_eos, as vLLM does (its stop-id set for min_tokens
  // always contains EOS).
  if (ctx.key.position < static_cast<uint64_t>(p.min_tokens)) {
    mask_tokens(row, ctx.eos_token_ids);
    mask_tokens(row, p.stop_token_ids);
  }
  // allowed_token_ids, then logit_bias, before the penalties (vLLM's order).
  if (!p.allowed_token_ids.empty()) DI_TRY(apply_allowed_tokens(row, p.allowed_token_ids, allowed_));
  DI_TRY(apply_logit_bias(row, p.logit_bias));
  if (p.has_penalties() && ctx.history != nullptr) {
    return apply_penalties(row, *ctx.history, p.repetition_penalty, p.presence_penalty,
                           p.frequency_penalty);
  }
  return {};
}

Expected<SampleResult> Sampler::sample(std::span<const float> logits, const SampleContext& ctx) {
  DI_TRY(prepare(logits, ctx));
  const SamplingParams& p = *ctx.params;
  const std::span<float> row(work_);

  SampleResult result;
  double lse = 0.0;
  if (p.logprobs) {
    lse = log_sum_exp(row, draw_.cdf.weights);
    if (std::isinf(lse)) return no_token_left("after the token bitmask");
    result.has_logprobs = true;
    result.top = top_logprobs(row, *p.logprobs, lse);
  }
  // The raw row is needed again for the sampled token's logprob and rank; keep a copy only
  // when asked (most requests do not want logprobs).
  if (p.logprobs) raw_.assign(work_.begin(), work_.end());

  DI_TRY(mask_and_penalise(ctx));

  result.token = draw_filtered(row, make_sample_spec(p, ctx.key), draw_);
  if (result.token < 0) return no_token_left("after masking and penalties");

  if (p.logprobs) {
    result.logprob = logprob_of(raw_, result.token, lse);
    result.rank = logprob_rank(raw_, result.token);
  }
  return result;
}

Status Sampler::probabilities(std::span<const float> logits, const SampleContext& ctx,
                              std::vector<float>& probs) {
  DI_TRY(prepare(logits, ctx));
  DI_TRY(mask_and_penalise(ctx));
  if (!filtered_probabilities(work_, make_sample_spec(*ctx.params, ctx.key), draw_, probs)) {
    return no_token_left("after masking and penalties");
  }
  return {};
}

Expected<SampleResult> sample_token(std::span<const float> logits, const SampleContext& ctx) {
  Sampler sampler;
  return sampler.sample(logits, ctx);
}

}  // namespace deepinfer::sample
