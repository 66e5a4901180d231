// SamplingParams::validate: the ranges are vLLM's (vllm/sampling_params.py, _verify_args),
// except logprobs (0..20, no -1). Comparisons are written so that NaN fails them.
#include "sample/sampling_params.h"

#include <cmath>
#include <sstream>

namespace deepinfer {
namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

Status bad(const std::string& name, const std::string& value, const std::string& range) {
  return invalid_argument("sampling parameter " + name + " = " + value + " is invalid: " + range);
}

// "{token: bias}" (an ostringstream: GCC 12's -Wrestrict misfires on the concatenation).
std::string bias_entry(int32_t token, float bias) {
  std::ostringstream os;
  os << '{' << token << ": " << bias << '}';
  return os.str();
}

}  // namespace

Status SamplingParams::validate() const {
  if (n < 1) return bad("n", std::to_string(n), "it must be at least 1");
  if (!(temperature >= 0.0f && temperature <= kMaxTemperature)) {
    return bad("temperature", fmt(temperature),
               "it must be in [0, 2] (0 = greedy; 0 < t < 0.01 is raised to 0.01)");
  }
  if (temperature == 0.0f && n > 1) {
    return bad("n", std::to_string(n),
               "it must be 1 with greedy sampling (temperature = 0): all samples would be equal");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return bad("top_p", fmt(top_p), "it must be in (0, 1] (1 = consider all tokens)");
  }
  if (top_k < -1) {
    return bad("top_k", std::to_string(top_k),
               "it must be 0 or -1 (consider all tokens) or at least 1");
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return bad("min_p", fmt(min_p), "it must be in [0, 1] (0 = off)");
  }
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty))) {
    return bad("repetition_penalty", fmt(repetition_penalty),
               "it must be a finite number greater than 0 (1 = off, > 1 discourages repeats)");
  }
  if (!(presence_penalty >= -kMaxAbsPenalty && presence_penalty <= kMaxAbsPenalty)) {
    return bad("presence_penalty", fmt(presence_penalty), "it must be in [-2, 2] (0 = off)");
  }
  if (!(frequency_penalty >= -kMaxAbsPenalty && frequency_penalty <= kMaxAbsPenalty)) {
    return bad("frequency_penalty", fmt(frequency_penalty), "it must be in [-2, 2] (0 = off)");
  }
  if (max_tokens && *max_tokens < 1) {
    return bad("max_tokens", std::to_string(*max_tokens),
               "it must be at least 1 (or unset for no limit)");
  }
  if (min_tokens < 0) {
    return bad("min_tokens", std::to_string(min_tokens), "it must be at least 0");
  }
  if (max_tokens && min_tokens > *max_tokens) {
    return bad("min_tokens", std::to_string(min_tokens),
               "it must not exceed max_tokens = " + std::to_string(*max_tokens));
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return bad("logprobs", std::to_string(*logprobs),
               "it must be in [0, 20] (the number of top tokens returned besides the sampled "
               "one), or unset for none");
  }
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs)) {
    return bad("prompt_logprobs", std::to_string(*prompt_logprobs),
               "it must be in [0, 20] (the number of top tokens returned besides each prompt "
               "token), or unset for none");
  }
  if (truncate_prompt_tokens && *truncate_prompt_tokens < 1) {
    return bad("truncate_prompt_tokens", std::to_string(*truncate_prompt_tokens),
               "it must be at least 1 (the number of prompt tokens kept, from the end), or "
               "unset to keep the whole prompt");
  }
  if (!detokenize && !stop.empty()) {
    return bad("detokenize", "false",
               "stop strings need detokenized text: use stop_token_ids, or detokenize = true");
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    if (stop_token_ids[i] < 0) {
      return bad("stop_token_ids[" + std::to_string(i) + "]", std::to_string(stop_token_ids[i]),
                 "token ids must be non-negative");
    }
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) {
      return bad("stop[" + std::to_string(i) + "]", "\"\"", "stop strings must not be empty");
    }
  }
  if (allowed_token_ids.size() > kMaxAllowedTokenIds) {
    return bad("allowed_token_ids", std::to_string(allowed_token_ids.size()) + " ids",
               "it may list at most " + std::to_string(kMaxAllowedTokenIds) + " token ids");
  }
  for (size_t i = 0; i < allowed_token_ids.size(); ++i) {
    if (allowed_token_ids[i] < 0) {
      return bad("allowed_token_ids[" + std::to_string(i) + "]",
                 std::to_string(allowed_token_ids[i]), "token ids must be non-negative");
    }
  }
  if (logit_bias.size() > kMaxLogitBias) {
    return bad("logit_bias", std::to_string(logit_bias.size()) + " entries",
               "it may bias at most " + std::to_string(kMaxLogitBias) + " tokens");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) {
      return bad("logit_bias", bias_entry(token, bias), "token ids must be non-negative");
    }
    if (!(bias >= -kMaxAbsLogitBias && bias <= kMaxAbsLogitBias)) {
      return bad("logit_bias", bias_entry(token, bias), "each bias must be in [-100, 100]");
    }
  }
  return Status::ok_status();
}

Status SamplingParams::validate(int64_t vocab_size) const {
  DI_TRY(validate());
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    if (stop_token_ids[i] >= vocab_size) {
      return bad(
          "stop_token_ids[" + std::to_string(i) + "]", std::to_string(stop_token_ids[i]),
          "token ids must be in [0, " + std::to_string(vocab_size) + ") (the model's vocabulary)");
    }
  }
  for (size_t i = 0; i < allowed_token_ids.size(); ++i) {
    if (allowed_token_ids[i] >= vocab_size) {
      return bad("allowed_token_ids[" + std::to_string(i) + "]",
                 std::to_string(allowed_token_ids[i]),
                 "token ids must be in [0, " + std::to_string(vocab_size) +
                     ") (the model's vocabulary)");
    }
  }
  if (!logit_bias.empty() && logit_bias.rbegin()->first >= vocab_size) {  // the largest id
    return bad("logit_bias", bias_entry(logit_bias.rbegin()->first, logit_bias.rbegin()->second),
               "token ids must be in [0, " + std::to_string(vocab_size) +
                   ") (the model's vocabulary)");
  }
  return Status::ok_status();
}

}  // namespace deepinfer
