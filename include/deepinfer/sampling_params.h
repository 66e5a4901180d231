// SamplingParams: what one request asks of the sampler and of its stop checker.
//
// Names, meanings and defaults mirror vLLM's SamplingParams (vllm/sampling_params.py) so users
// can switch without relearning. Where we differ, the field's comment says so:
//   - logprobs: 0..20 only; vLLM's -1 ("the whole vocabulary") is not offered.
//   - temperature: exactly 0 is greedy. Like vLLM, 0 < T < 0.01 is raised to 0.01 (the sampler
//     does it, see effective_temperature()) because smaller values overflow the softmax.
//   - seq_seed replaces vLLM's `seed` (the name DeepInfer's original uses); a request without
//     one is given a seed by the engine at submission, so sampling is always counter-based.
//   - logit_bias is a map of token id to bias in [-100, 100] (OpenAI's range; vLLM takes any
//     float), at most kMaxLogitBias entries.
//   - allowed_token_ids: at most kMaxAllowedTokenIds ids.
//   - no bad_words yet; structured output arrives as a token bitmask instead (SampleContext).
//     The
//     constraint itself (`structured`) is carried here so that it travels with the request
//     through the public Engine API; the engine compiles and checks it at submit (the
//     compiler's error is the validation), validate() does not look at it.
// validate() checks every field without the vocabulary; validate(vocab_size) also checks that
// stop token ids are real ids. Messages name the parameter, the bad value and the range.
//
// Public: the one struct the front ends fill and the sampler reads (no copy to keep in step);
// src/sample/sampling_params.cc implements validate(), src/sample/sampling_params.h names it
// sample::SamplingParams.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

struct SamplingParams {
  // Limits shared by validation and the samplers' buffers.
  static constexpr int32_t kMaxLogprobs = 20;      // vLLM's default max_logprobs
  static constexpr float kMinTemperature = 0.01f;  // vLLM's _MAX_TEMP clamp
  static constexpr float kMaxTemperature = 2.0f;   // vLLM (and OpenAI): temperature in [0, 2]
  static constexpr float kMaxAbsPenalty = 2.0f;    // presence/frequency in [-2, 2]
  static constexpr float kMaxAbsLogitBias = 100.0f;  // OpenAI's logit_bias range
  static constexpr size_t kMaxLogitBias = 4096;      // entries (docs/limits.md)
  static constexpr size_t kMaxAllowedTokenIds = 262144;  // ids (docs/limits.md)

  // Number of independent samples per prompt; sample i draws from the RNG stream i.
  int32_t n = 1;
  // Divides the logits. 0 means greedy (argmax, ties to the lowest id); requires n == 1.
  float temperature = 1.0f;
  // Nucleus: keep the smallest highest-probability set whose mass reaches top_p. (0, 1].
  float top_p = 1.0f;
  // Keep the top_k highest logits (ties at the k-th value are all kept, as in vLLM).
  // 0 or -1 disables it (vLLM's default is 0 and it "quietly accepts" -1).
  int32_t top_k = 0;
  // Drop tokens whose probability is below min_p x the top probability. [0, 1], 0 = off.
  float min_p = 0.0f;
  // Seen tokens (prompt or output): positive logits are divided by it, negative multiplied.
  // > 0; 1 = off; > 1 discourages repetition.
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token that already occurs in the OUTPUT. [-2, 2].
  float presence_penalty = 0.0f;
  // Subtracted (x the number of occurrences in the OUTPUT) from each token's logit. [-2, 2].
  float frequency_penalty = 0.0f;
  // If not empty, only these token ids can be drawn (vLLM's allowed_token_ids): every other
  // logit is set to -inf first, before logit_bias and the penalties. Repeats are allowed.
  std::vector<int32_t> allowed_token_ids;
  // Added to the logit of each listed token id before the penalties, temperature and filters
  // (vLLM's order), greedy requests included; [-100, 100] each. -100 all but bans a token and
  // +100 all but forces it; a token the grammar or min_tokens masked stays masked. Logprobs
  // stay those of the raw logits, as for every other processor.
  std::map<int32_t, float> logit_bias;
  // Maximum number of generated tokens; nullopt = until the context limit (engine's check).
  std::optional<int32_t> max_tokens = 16;
  // EOS and stop token ids are masked out until this many tokens were generated.
  int32_t min_tokens = 0;
  // Token ids that end generation (the stop token's text is not emitted).
  std::vector<int32_t> stop_token_ids;
  // Strings that end generation, matched on the detokenized text across token boundaries.
  std::vector<std::string> stop;
  // Emit the matched stop string (vLLM's include_stop_str_in_output).
  bool include_stop_str_in_output = false;
  // Keep generating after EOS.
  bool ignore_eos = false;
  // Return the log-probability of the sampled token and of the top `logprobs` tokens, from
  // the RAW logits (vLLM's default logprobs_mode "raw_logprobs"). nullopt = none. 0..20.
  std::optional<int32_t> logprobs;
  // Seed of the request's counter-based RNG (Philox4x32-10 keyed by seed, output position
  // and sample index). nullopt: the engine draws one at submission.
  std::optional<uint64_t> seq_seed;
  // Structured output: constrain the generated text to a grammar. schema_type is "regex",
  // "json" / "json_schema" (a JSON Schema as JSON text) or "ebnf" (docs/structured_outputs.md).
  struct StructuredOutput {
    std::string schema_type;
    std::string schema;
  };
  std::optional<StructuredOutput> structured;
  // Front-end options with vLLM's names (they change what the engine returns, not what it
  // samples):
  //   prompt_logprobs: the logprob, rank and top `prompt_logprobs` alternatives of every prompt
  //     token after the first (0..20; nullopt = none). A request asking for them recomputes
  //     a cached prefix instead of restoring it (the logits are needed), as in vLLM.
  //   skip_special_tokens: leave special added tokens (BOS, EOS, pad) out of the text.
  //   detokenize: false returns token ids only (no text; stop strings then cannot match).
  //   truncate_prompt_tokens: keep only the last k prompt tokens (k >= 1; nullopt = all).
  std::optional<int32_t> prompt_logprobs;
  bool skip_special_tokens = true;
  bool detokenize = true;
  std::optional<int32_t> truncate_prompt_tokens;

  // OK, or InvalidArgument naming the first bad field, its value and the accepted range.
  Status validate() const;
  // Same, plus every stop token id must lie in [0, vocab_size).
  Status validate(int64_t vocab_size) const;

  bool is_greedy() const { return temperature == 0.0f; }
  // The temperature the sampler divides by (0 < T < 0.01 is raised to 0.01, as in vLLM).
  float effective_temperature() const {
    return temperature > 0.0f && temperature < kMinTemperature ? kMinTemperature : temperature;
  }
  // Whether the draw needs the host sampler's processors beyond the filters of a SampleSpec.
  bool has_logit_processors() const {
    return has_penalties() || !logit_bias.empty() || !allowed_token_ids.empty();
  }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

}  // namespace deepinfer
