// StopChecker: decides, token by token, whether one request (one of its n samples) is done,
// and which of its detokenized text may be streamed now.
//
// Rules (vLLM v1: vllm/v1/core/sched/utils.py check_stop and the output processor's stop-
// string check), in priority order for the token just appended:
//   1. stop token: EOS (unless ignore_eos) or an id in stop_token_ids -> kStop. The token's
//      own text is not emitted unless include_stop_str_in_output (vLLM skips detokenizing it).
//   2. stop string: the text now contains a stop string -> kStop; the output ends right
//      before it (or after it with include_stop_str_in_output); text after it is dropped.
//      The earliest match wins; at equal starts, the first string in params.stop.
//   3. length: max_tokens tokens generated -> kLength.
// Stops (1 and 2) only count at output positions >= min_tokens, matching the sampler, which
// masks EOS/stop ids before that.
//
// Streaming: the text arrives as deltas and a stop string may span several of them. The
// checker holds back the longest suffix of the unreleased text that is still a prefix of some
// stop string, and releases it as soon as it stops matching (or at the end). Because deltas
// and stop strings are whole UTF-8 characters, a held suffix always starts on a character
// boundary. vLLM instead holds a fixed max(len) - 1 characters; holding only what can still
// match streams sooner and emits the same total text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/finish_reason.h"
#include "sample/sampling_params.h"

namespace deepinfer::sample {

// The checker decides kStop and kLength (base/finish_reason.h).
using deepinfer::FinishReason;
using deepinfer::finish_reason_name;

struct StopUpdate {
  FinishReason finish = FinishReason::kNone;
  std::string text;                   // to stream now (may be empty)
  std::optional<int32_t> stop_token;  // set when a stop token (or EOS) ended it
  std::optional<size_t> stop_string;  // index into params.stop when a string ended it
  bool finished() const { return finish != FinishReason::kNone; }
};

class StopChecker {
 public:
  // Copies what it needs from `params`; eos_token_ids are the model's EOS ids.
  StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids);

  // One generated token and the text delta the incremental detokenizer produced for it.
  // Calling it after the request finished is a caller bug; it returns an empty kNone update.
  StopUpdate append(int32_t token, std::string_view delta);

  // Releases the held-back text when the request ends for a reason the checker does not
  // see (abort, context length). Empty afterwards.
  std::string flush();

  bool finished() const { return finished_; }
  int64_t num_tokens() const { return num_tokens_; }
  size_t held_bytes() const { return held_.size(); }

 private:
  bool is_stop_token(int32_t token) const;
  // Longest suffix of `text` that is a proper prefix of some stop string.
  size_t hold_length(std::string_view text) const;

  std::vector<std::string> stops_;
  std::vector<int32_t> stop_ids_;  // stop_token_ids plus EOS unless ignore_eos
  std::optional<int32_t> max_tokens_;
  int32_t min_tokens_ = 0;
  bool include_stop_ = false;

  std::string held_;
  int64_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace deepinfer::sample
