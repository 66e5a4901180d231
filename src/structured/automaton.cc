// Grammar IR -> minimal per-rule DFAs over byte classes and rule references; see automaton.h.
// The stages are in automaton_{nfa,subset,minimize,passes}.cc (automaton_stages.h).
#include "structured/automaton.h"

#include "base/input_limits.h"
#include "structured/automaton_stages.h"

namespace deepinfer::structured::automaton_stages {

Status too_many_states(int32_t max_states) {
  return invalid_argument("grammar too large: its automaton needs more than " +
                          format_count(max_states) +
                          " states (kMaxAutomatonStates in src/structured/limits.h); bound fewer "
                          "repetitions or simplify the grammar");
}

Status too_much_subset_work(int64_t max_work) {
  return invalid_argument(
      "grammar too complex: " +
      limit_message("building its automaton", static_cast<uint64_t>(max_work),
                    "NFA states gathered into subsets, kMaxSubsetWork in src/structured/limits.h",
                    "an unbounded repetition followed by a long bounded one over overlapping "
                    "characters (as in [9a]+\\d{400}) does this: make them exclusive or the bound "
                    "smaller"));
}

namespace {

// Every rule's NFA (Thompson), DFA (subset construction) and minimal DFA, appended to `a`
// under global state ids from a.num_states on, their transitions listed in `edges` too.
Status compile_rules(const Grammar& grammar, const AutomatonLimits& limits, Automaton& a,
                     Transitions& edges) {
  const auto& rules = grammar.rules();
  const int32_t num_rules = static_cast<int32_t>(rules.size());
  int32_t budget = limits.max_states;
  int64_t work = limits.max_subset_work;
  ClassLists classes(a, grammar.num_exprs());
  for (int32_t r = 0; r < num_rules; ++r) {
    a.rule_names.push_back(rules[r].name);
    if (rules[r].body < 0)
      return invalid_argument("rule '" + rules[r].name + "' is referenced but never defined");
    Expected<RuleNfa> nfa = build_rule_nfa(grammar, limits, rules[r].body, &budget, &classes);
    if (!nfa.ok()) return nfa.status();
    Expected<RuleDfa> dfa = determinize(*nfa, classes, a.num_classes, &budget, limits.max_states,
                                        &work, limits.max_subset_work);
    if (!dfa.ok()) return dfa.status().with_context("in rule '" + rules[r].name + "'");
    append_minimal(std::move(dfa.value()), r, a, edges);
  }
  a.subset_work = limits.max_subset_work - work;
  return Status::ok_status();
}

}  // namespace
}  // namespace deepinfer::structured::automaton_stages

namespace deepinfer::structured {

namespace st = automaton_stages;

Expected<Automaton> build_automaton(const Grammar& grammar, const AutomatonLimits& limits) {
  const auto& rules = grammar.rules();
  const int32_t num_rules = static_cast<int32_t>(rules.size());
  if (grammar.root() < 0 || grammar.root() >= num_rules)
    return invalid_argument("grammar has no root rule");
  if (num_rules > limits.max_rules) {
    return invalid_argument("grammar too large: " +
                            limit_message(format_count(num_rules) + " rules", limits.max_rules,
                                          "kMaxRules in src/structured/limits.h",
                                          "merge rules or share them"));
  }
  Automaton a;
  a.root = grammar.root();
  a.rule_start.assign(num_rules, -1);
  a.rule_nullable.assign(num_rules, 0);
  a.rule_follow.assign(num_rules, ByteSet{});
  st::compute_byte_classes(grammar, a);
  st::Transitions edges;
  DI_TRY(st::compile_rules(grammar, limits, a, edges));
  st::find_nullable_rules(a, edges);
  const st::Liveness live = st::find_live_states(a, edges);
  if (!live.productive[a.root]) {
    return invalid_argument("the grammar matches no string (root rule '" + a.rule_names[a.root] +
                            "' can never complete)");
  }
  st::trim(a, edges, live);
  st::pack_rows(a, edges, live.live);
  st::first_and_follow(a);
  return a;
}

}  // namespace deepinfer::structured
