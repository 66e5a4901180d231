// Automaton: the grammar IR compiled to one DFA per rule whose edges are byte transitions or
// rule references (a recursive transition network). The Earley recogniser (earley.h) runs over
// these states; a state id is global across rules.
//
// Built once per grammar: Thompson NFA per rule body -> subset construction (references are
// symbols of the alphabet) -> trimming of states that cannot reach acceptance, so that every
// state a recogniser holds has a completion (a live chart means a valid prefix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "structured/byte_set.h"
#include "structured/grammar.h"
#include "structured/limits.h"

namespace deepinfer::structured {

struct Automaton {
  int32_t num_states = 0;
  std::vector<int32_t> trans;      // [state * 256 + byte] -> target state, or -1
  std::vector<int32_t> ref_begin;  // refs of state s: [ref_begin[s], ref_begin[s + 1])
  std::vector<int32_t> ref_rule;
  std::vector<int32_t> ref_target;
  std::vector<uint8_t> accepting;
  std::vector<uint8_t> has_bytes;  // the state has at least one byte transition
  std::vector<int32_t> state_rule;
  std::vector<int32_t> rule_start;
  std::vector<uint8_t> rule_nullable;
  std::vector<ByteSet> rule_follow;  // bytes that may come right after the rule completes
  std::vector<std::string> rule_names;
  int32_t root = -1;

  int32_t next(int32_t state, uint8_t b) const {
    return trans[static_cast<size_t>(state) * 256 + b];
  }
};

struct AutomatonLimits {
  int32_t max_states = kMaxAutomatonStates;  // NFA and DFA states, all rules together
  int32_t max_repeat = kMaxRepeat;           // the largest bounded repetition count
  int32_t max_rules = kMaxRules;
  int64_t max_subset_work = kMaxSubsetWork;  // subset construction's work, all rules together
};

// Errors (InvalidArgument) name the rule: undefined body, a grammar that matches no string,
// a repetition or automaton over the limits.
Expected<Automaton> build_automaton(const Grammar& grammar, const AutomatonLimits& limits = {});

}  // namespace deepinfer::structured
