// Automaton: the grammar IR compiled to one DFA per rule whose edges are byte transitions or
// rule references (a recursive transition network). The Earley recogniser (earley.h) runs over
// these states; a state id is global across rules.
//
// Built once per grammar: byte classes (the coarsest partition of the 256 byte values that
// every byte set of the grammar respects) -> Thompson NFA per rule body -> subset construction
// over the classes (references are symbols of the alphabet too) -> minimisation (partition
// refinement) -> trimming of states that cannot reach acceptance, so that every state a
// recogniser holds has a completion (a live chart means a valid prefix).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "structured/byte_set.h"
#include "structured/grammar.h"
#include "structured/limits.h"

namespace deepinfer::structured {

// One slot of the packed transition table: the state that owns it, and that state's target.
struct TransitionSlot {
  int32_t owner = -1;
  int32_t target = -1;
};

struct Automaton {
  int32_t num_states = 0;
  // Byte classes: bytes of one class go to the same target from every state.
  int32_t num_classes = 1;
  std::array<uint8_t, 256> byte_class{};  // byte -> class
  std::vector<ByteSet> class_bytes;       // class -> its bytes
  // Byte transitions, rows packed into one table (row displacement): state s on class c goes
  // to slots[row_base[s] + c].target if that slot's owner is s, else nowhere. Most states
  // have a few transitions out of many classes; their rows interleave, so the table is about
  // as long as the number of transitions rather than states x classes.
  std::vector<int32_t> row_base;
  std::vector<TransitionSlot> slots;
  std::vector<int32_t> ref_begin;  // refs of state s: [ref_begin[s], ref_begin[s + 1])
  std::vector<int32_t> ref_rule;
  std::vector<int32_t> ref_target;
  std::vector<uint8_t> accepting;
  std::vector<uint8_t> has_bytes;   // the state has at least one byte transition
  std::vector<ByteSet> scan_bytes;  // the bytes the state has a transition on
  std::vector<int32_t> state_rule;
  std::vector<int32_t> rule_start;
  std::vector<uint8_t> rule_nullable;
  std::vector<ByteSet> rule_follow;  // bytes that may come right after the rule completes
  std::vector<std::string> rule_names;
  int32_t root = -1;
  int64_t subset_work = 0;  // what the subset construction counted against max_subset_work

  int32_t next(int32_t state, uint8_t b) const {
    const TransitionSlot& slot = slots[static_cast<size_t>(row_base[state]) + byte_class[b]];
    return slot.owner == state ? slot.target : -1;
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
