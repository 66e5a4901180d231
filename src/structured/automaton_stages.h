// The stages of build_automaton (automaton.cc), each in its own file, and the structures they
// pass along: byte classes and each rule's Thompson NFA (automaton_nfa.cc), its DFA by subset
// construction (automaton_subset.cc), the minimal DFA appended to the automaton
// (automaton_minimize.cc), and the passes over the whole automaton: nullable rules, liveness,
// trimming, row packing, FIRST / FOLLOW (automaton_passes.cc). Internal to src/structured.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/status.h"
#include "structured/automaton.h"
#include "structured/grammar.h"

namespace deepinfer::structured::automaton_stages {

// The errors of the size limits (automaton.cc), shared by the NFA and subset stages.
Status too_many_states(int32_t max_states);
Status too_much_subset_work(int64_t max_work);

// The classes of each byte set of the grammar, listed once per expression.
class ClassLists {
 public:
  ClassLists(const Automaton& a, size_t num_exprs)
      : a_(a), begin_(num_exprs, -1), count_(num_exprs, 0), first_byte_(a.num_classes) {
    for (int b = 255; b >= 0; --b) first_byte_[a.byte_class[b]] = static_cast<uint8_t>(b);
  }

  // Returns (offset into pool(), count).
  std::pair<int32_t, int32_t> of(int32_t expr, const ByteSet& bytes) {
    if (begin_[expr] < 0) {
      begin_[expr] = static_cast<int32_t>(pool_.size());
      // A class lies wholly inside or outside every byte set: its first byte decides.
      for (int32_t c = 0; c < a_.num_classes; ++c) {
        if (bytes.test(first_byte_[c])) pool_.push_back(static_cast<uint8_t>(c));
      }
      count_[expr] = static_cast<int32_t>(pool_.size()) - begin_[expr];
    }
    return {begin_[expr], count_[expr]};
  }
  const std::vector<uint8_t>& pool() const { return pool_; }

 private:
  const Automaton& a_;
  std::vector<int32_t> begin_, count_;
  std::vector<uint8_t> first_byte_;  // class -> its smallest byte
  std::vector<uint8_t> pool_;
};

// One rule's Thompson NFA, its edges in two flat adjacency lists (compressed rows): epsilon
// edges, and byte-class and reference edges.
struct Nfa {
  struct Edge {
    int32_t to;
    int32_t a;  // byte edge: offset of its classes in ClassLists::pool(); reference: the rule
    int32_t n;  // byte edge: number of classes; reference: -1
  };
  int32_t num_states = 0;
  std::vector<int32_t> eps_begin, eps_to;
  std::vector<int32_t> edge_begin;
  std::vector<Edge> edges;
};

// The transitions of every state of the automaton, listed per state (global ids, in state
// order): labels below a.num_classes are byte classes, the others a.num_classes + rule. The
// passes over the whole automaton (liveness, trimming) read these instead of the rows.
struct Transitions {
  std::vector<int32_t> begin{0};  // state s: [begin[s], begin[s + 1])
  std::vector<int32_t> label;
  std::vector<int32_t> target;

  // fn(state, rule, target) for every rule reference.
  template <typename Fn>
  void for_each_ref(int32_t num_classes, Fn&& fn) const {
    for (size_t s = 0; s + 1 < begin.size(); ++s) {
      for (int32_t k = begin[s]; k < begin[s + 1]; ++k) {
        if (label[k] >= num_classes) fn(static_cast<int32_t>(s), label[k] - num_classes, target[k]);
      }
    }
  }
};

// One rule's DFA with its transitions listed per state: labels below the number of byte
// classes are classes, the others (num_classes + rule) rule references.
struct RuleDfa {
  int32_t num_states = 0;
  std::vector<int32_t> begin{0};  // transitions of state s: [begin[s], begin[s + 1])
  std::vector<int32_t> label;
  std::vector<int32_t> target;
  std::vector<uint8_t> accepting;
};

struct Liveness {
  std::vector<uint8_t> live;        // per state: can reach acceptance
  std::vector<uint8_t> productive;  // per rule: can complete
};

// automaton_nfa.cc: the automaton's byte classes (a.byte_class, a.num_classes).
void compute_byte_classes(const Grammar& g, Automaton& a);

// Rule body `body`'s Thompson NFA, its states counted down from *budget.
struct RuleNfa {
  Nfa nfa;
  int32_t start = 0, final_state = 0;
};
Expected<RuleNfa> build_rule_nfa(const Grammar& g, const AutomatonLimits& limits, int32_t body,
                                 int32_t* budget, ClassLists* classes);

// automaton_subset.cc: the rule's DFA by subset construction, its states counted down from
// *budget (of max_states) and its subset work from *work (of max_work).
Expected<RuleDfa> determinize(const RuleNfa& rule, const ClassLists& classes, int32_t num_classes,
                              int32_t* budget, int32_t max_states, int64_t* work, int64_t max_work);

// automaton_minimize.cc
void append_minimal(RuleDfa in, int32_t r, Automaton& a, Transitions& edges);

// automaton_passes.cc
void find_nullable_rules(Automaton& a, const Transitions& edges);
Liveness find_live_states(const Automaton& a, const Transitions& edges);
void trim(Automaton& a, const Transitions& edges, const Liveness& liveness);
void pack_rows(Automaton& a, const Transitions& edges, const std::vector<uint8_t>& live);
void first_and_follow(Automaton& a);

}  // namespace deepinfer::structured::automaton_stages
