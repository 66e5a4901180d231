// CompiledGrammar: an automaton plus, for every state that scans bytes, the tokens whose fate
// from that state does not depend on the rest of the parse stack (the xgrammar "adaptive
// token mask cache"):
//   accepted  - the token's bytes can be consumed inside the state's rule (or complete it
//               exactly at the last byte), whatever called the rule;
//   uncertain - the rule may complete before the token ends and the next byte is in the rule's
//               FOLLOW set, so the caller decides: checked at run time against the real chart;
//   rejected  - everything else (not stored).
// Immutable once built; shared by every matcher of the same grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "structured/automaton.h"
#include "structured/grammar.h"
#include "structured/tokenizer_info.h"

namespace deepinfer::structured {

struct StateTokens {
  // Accepted tokens: as a bitmask (mask_words() words) when there are many, else as ids.
  std::vector<uint32_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> uncertain;  // sorted positions (TokenizerInfo::sorted), ascending
};

struct CompileStats {
  double automaton_ms = 0;
  double masks_ms = 0;
  int32_t num_states = 0;
  int32_t num_scan_states = 0;
  int32_t num_token_sets = 0;  // token sets computed: scanning states that walk alike share one
  int64_t num_uncertain = 0;   // summed over states
};

class CompiledGrammar {
 public:
  // `pool` (optional) spreads the per-state precompute over threads.
  static Expected<std::shared_ptr<const CompiledGrammar>> compile(
      const Grammar& grammar, std::shared_ptr<const TokenizerInfo> tokenizer,
      ThreadPool* pool = nullptr);

  const Automaton& automaton() const { return automaton_; }
  const TokenizerInfo& tokenizer() const { return *tokenizer_; }
  const StateTokens& tokens(int32_t state) const { return token_sets_[token_set_[state]]; }
  const CompileStats& stats() const { return stats_; }

 private:
  Automaton automaton_;
  std::shared_ptr<const TokenizerInfo> tokenizer_;
  // Per state, its token set: an index into token_sets_, whose entry 0 is empty (states
  // without bytes). Scanning states that walk the vocabulary alike share one entry.
  std::vector<int32_t> token_set_;
  std::vector<StateTokens> token_sets_;
  CompileStats stats_;
};

}  // namespace deepinfer::structured
