// GrammarMatcher: the per-request state of one constrained generation.
//
//   auto m = GrammarMatcher(compiled);
//   m.fill_next_token_bitmask(words);   // before sampling: bit (id % 32) of word id / 32
//   m.accept_token(id);                 // after sampling
//   m.rollback(k);                      // speculative decoding rejected k tokens
//
// Masks: the union, over the scanning states of the current Earley set, of their precomputed
// accepted tokens, plus the uncertain tokens that survive a real scan from the current chart
// (walked in sorted order so that shared prefixes are scanned once). EOS ids are allowed iff
// the input so far is a complete match; special tokens never. Not thread-safe; cheap to make.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/earley.h"

namespace deepinfer::structured {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Feeds one token. Returns false, and changes nothing, if the token is not allowed here.
  bool accept_token(int32_t id);
  // Feeds raw bytes (not a token: rollback does not count them). Same contract.
  bool accept_bytes(std::string_view bytes);
  // The input so far is a complete match (EOS would be accepted).
  bool can_terminate() const { return !terminated_ && chart_.can_complete(); }
  // An EOS token was accepted.
  bool is_terminated() const { return terminated_; }
  // Undoes the last `k` accepted tokens; false (nothing changed) if fewer were accepted.
  bool rollback(int32_t k);
  // Back to the start.
  void reset();
  int32_t num_accepted_tokens() const { return static_cast<int32_t>(history_.size()); }

  // Writes the allowed-token mask: `words` must have tokenizer().mask_words() entries.
  void fill_next_token_bitmask(std::span<uint32_t> words);
  // The bytes the grammar forces next (empty if more than one byte, or the end, is possible).
  std::string find_jump_forward_string();

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct Snapshot {
    size_t num_sets;
    bool terminated;
  };
  bool feed(std::string_view bytes);

  std::shared_ptr<const CompiledGrammar> grammar_;
  Chart chart_;
  bool terminated_ = false;
  std::vector<Snapshot> history_;  // state before each accepted token
  std::vector<int32_t> leaves_;
  std::vector<int32_t> candidates_;
};

}  // namespace deepinfer::structured
