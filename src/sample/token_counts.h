// TokenCounts: the per-request token history that the penalties read.
//
// vLLM's definitions (vllm/model_executor/layers/utils.py apply_penalties): the repetition
// penalty looks at tokens seen in the prompt OR the output; presence and frequency penalties
// look at the OUTPUT only (presence: occurs at least once; frequency: number of occurrences).
// Kept sparse (one entry per distinct token) and updated incrementally, so applying the
// penalties costs O(distinct tokens), not O(vocab) or O(sequence length), per step.
// The entries' order does not matter: each penalty edits only its own token's logit.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace deepinfer::sample {

class TokenCounts {
 public:
  struct Entry {
    int32_t token = 0;
    bool in_prompt = false;
    uint32_t output_count = 0;
  };

  TokenCounts() = default;
  explicit TokenCounts(std::span<const int32_t> prompt) { add_prompt(prompt); }

  void add_prompt(std::span<const int32_t> ids);
  void add_output(int32_t id);
  // Undoes add_output (speculative tokens that were rejected). False if `id` has no output
  // occurrence to remove.
  bool remove_output(int32_t id);

  const std::vector<Entry>& entries() const { return entries_; }
  int64_t num_output_tokens() const { return num_output_; }

 private:
  Entry& entry(int32_t id);

  std::vector<Entry> entries_;
  std::unordered_map<int32_t, uint32_t> index_;  // token id -> position in entries_
  int64_t num_output_ = 0;
};

}  // namespace deepinfer::sample
