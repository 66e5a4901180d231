// Grammar IR -> per-rule DFAs over bytes and rule references; see automaton.h.
#include "structured/automaton.h"

#include <algorithm>
#include <array>
#include <bit>
#include <map>

#include "base/input_limits.h"

namespace deepinfer::structured {
namespace {

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

struct NfaEdge {
  enum Kind : uint8_t { kEps, kBytes, kRef } kind;
  ByteSet bytes;
  int32_t rule;
  int32_t to;
};

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& g, const AutomatonLimits& limits, int32_t* budget)
      : g_(g), limits_(limits), budget_(budget) {}

  int32_t new_state() {
    states_.emplace_back();
    --*budget_;
    return static_cast<int32_t>(states_.size() - 1);
  }
  void edge(int32_t from, NfaEdge e) { states_[from].push_back(e); }
  void eps(int32_t from, int32_t to) { edge(from, NfaEdge{NfaEdge::kEps, {}, -1, to}); }

  // Builds `id` starting at `start`; returns the end state.
  Expected<int32_t> build(int32_t id, int32_t start) {
    if (*budget_ < 0)
      return too_many_states(limits_.max_states);
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        return start;
      case ExprKind::kBytes: {
        int32_t s = new_state();
        edge(start, NfaEdge{NfaEdge::kBytes, e.bytes, -1, s});
        return s;
      }
      case ExprKind::kRef: {
        int32_t s = new_state();
        edge(start, NfaEdge{NfaEdge::kRef, {}, e.rule, s});
        return s;
      }
      case ExprKind::kSeq: {
        int32_t cur = start;
        for (int32_t c : e.children) {
          DI_ASSIGN_OR_RETURN(cur, build(c, cur));
        }
        return cur;
      }
      case ExprKind::kAlt: {
        int32_t end = new_state();
        for (int32_t c : e.children) {
          int32_t s = new_state();
          eps(start, s);
          DI_ASSIGN_OR_RETURN(int32_t t, build(c, s));
          eps(t, end);
        }
        return end;
      }
      case ExprKind::kRepeat: {
        if (e.min > limits_.max_repeat || e.max > limits_.max_repeat) {
          return invalid_argument(
              limit_message("repetition count " + format_count(std::max(e.min, e.max)),
                            limits_.max_repeat, "kMaxRepeat in src/structured/limits.h",
                            "use '*' or '+' for a long or unbounded run"));
        }
        int32_t cur = start;
        for (int32_t i = 0; i < e.min; ++i) {
          DI_ASSIGN_OR_RETURN(cur, build(e.children[0], cur));
        }
        if (e.max < 0) {
          int32_t loop = new_state();
          eps(cur, loop);
          DI_ASSIGN_OR_RETURN(int32_t t, build(e.children[0], loop));
          eps(t, loop);
          return loop;
        }
        int32_t end = new_state();
        eps(cur, end);
        for (int32_t i = e.min; i < e.max; ++i) {
          DI_ASSIGN_OR_RETURN(cur, build(e.children[0], cur));
          eps(cur, end);
        }
        return end;
      }
    }
    return start;
  }

  std::vector<std::vector<NfaEdge>> states_;

 private:
  const Grammar& g_;
  const AutomatonLimits& limits_;
  int32_t* budget_;
};

void closure(const std::vector<std::vector<NfaEdge>>& nfa, std::vector<int32_t>& set,
             std::vector<uint8_t>& mark) {
  std::vector<int32_t> stack(set.begin(), set.end());
  for (int32_t s : set) mark[s] = 1;
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    for (const NfaEdge& e : nfa[s]) {
      if (e.kind == NfaEdge::kEps && !mark[e.to]) {
        mark[e.to] = 1;
        set.push_back(e.to);
        stack.push_back(e.to);
      }
    }
  }
  for (int32_t s : set) mark[s] = 0;
  std::sort(set.begin(), set.end());
}

struct RuleDfa {
  std::vector<std::array<int32_t, 256>> trans;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> refs;  // (rule, local target)
  std::vector<uint8_t> accepting;
};

// `work` counts down the NFA states of every target set formed (limits.max_subset_work).
Expected<RuleDfa> determinize(const std::vector<std::vector<NfaEdge>>& nfa, int32_t start,
                              int32_t final_state, int32_t* budget, int32_t max_states,
                              int64_t* work, int64_t max_work) {
  RuleDfa dfa;
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  std::vector<uint8_t> mark(nfa.size(), 0);
  auto intern = [&](std::vector<int32_t> set) -> int32_t {
    closure(nfa, set, mark);
    *work -= static_cast<int64_t>(set.size());
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    int32_t id = static_cast<int32_t>(sets.size());
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    --*budget;
    return id;
  };
  intern({start});
  std::vector<std::pair<int, int32_t>> pairs;
  for (size_t cur = 0; cur < sets.size(); ++cur) {
    if (*budget < 0) {
      return too_many_states(max_states);
    }
    if (*work < 0) return too_much_subset_work(max_work);
    std::vector<const NfaEdge*> byte_edges;
    std::map<int32_t, std::vector<int32_t>> ref_targets;
    bool acc = false;
    for (int32_t s : sets[cur]) {
      if (s == final_state) acc = true;
      for (const NfaEdge& e : nfa[s]) {
        if (e.kind == NfaEdge::kBytes) byte_edges.push_back(&e);
        if (e.kind == NfaEdge::kRef) ref_targets[e.rule].push_back(e.to);
      }
    }
    std::array<int32_t, 256> row;
    row.fill(-1);
    // (byte, target) pairs from the set bits of each edge, grouped by byte: cheap when edges
    // are single bytes (enums, literals), no worse than a 256-byte sweep for wide classes.
    pairs.clear();
    for (const NfaEdge* e : byte_edges) {
      for (int w = 0; w < 4; ++w) {
        for (uint64_t bits = e->bytes.words[w]; bits; bits &= bits - 1) {
          pairs.push_back({w * 64 + std::countr_zero(bits), e->to});
        }
      }
    }
    std::sort(pairs.begin(), pairs.end());
    std::vector<int32_t> prev_targets, targets;
    int32_t prev_id = -1;
    for (size_t i = 0; i < pairs.size();) {
      const int b = pairs[i].first;
      targets.clear();
      for (; i < pairs.size() && pairs[i].first == b; ++i) {
        if (targets.empty() || targets.back() != pairs[i].second) targets.push_back(pairs[i].second);
      }
      if (prev_id < 0 || targets != prev_targets) {
        prev_targets = targets;
        prev_id = intern(targets);
      }
      row[b] = prev_id;
    }
    std::vector<std::pair<int32_t, int32_t>> refs;
    for (auto& [rule, ref_to] : ref_targets) refs.push_back({rule, intern(ref_to)});
    dfa.trans.push_back(row);
    dfa.refs.push_back(std::move(refs));
    dfa.accepting.push_back(acc ? 1 : 0);
  }
  return dfa;
}

using RefLists = std::vector<std::vector<std::pair<int32_t, int32_t>>>;

// Every rule's NFA (Thompson) and DFA (subset construction), appended to `a` under global state
// ids from a.num_states on; refs[s] gets the rule references leaving state s.
Status compile_rules(const Grammar& grammar, const AutomatonLimits& limits, Automaton& a,
                     RefLists& refs) {
  const auto& rules = grammar.rules();
  const int32_t num_rules = static_cast<int32_t>(rules.size());
  int32_t budget = limits.max_states;
  int64_t work = limits.max_subset_work;
  for (int32_t r = 0; r < num_rules; ++r) {
    a.rule_names.push_back(rules[r].name);
    if (rules[r].body < 0)
      return invalid_argument("rule '" + rules[r].name + "' is referenced but never defined");
    NfaBuilder nb(grammar, limits, &budget);
    int32_t s0 = nb.new_state();
    DI_ASSIGN_OR_RETURN(int32_t fin, nb.build(rules[r].body, s0));
    auto dfa_or =
        determinize(nb.states_, s0, fin, &budget, limits.max_states, &work, limits.max_subset_work);
    if (!dfa_or.ok()) return dfa_or.status().with_context("in rule '" + rules[r].name + "'");
    RuleDfa& dfa = dfa_or.value();
    const int32_t base = a.num_states;
    a.rule_start[r] = base;
    a.trans.resize(a.trans.size() + dfa.trans.size() * 256);
    for (size_t i = 0; i < dfa.trans.size(); ++i) {
      int32_t* row = a.trans.data() + (static_cast<size_t>(base) + i) * 256;
      for (int b = 0; b < 256; ++b) {
        const int32_t t = dfa.trans[i][b];
        row[b] = t < 0 ? -1 : t + base;
      }
      std::vector<std::pair<int32_t, int32_t>> rr;
      for (auto [rule, t] : dfa.refs[i]) rr.push_back({rule, t + base});
      refs.push_back(std::move(rr));
      a.accepting.push_back(dfa.accepting[i]);
      a.state_rule.push_back(r);
    }
    a.num_states += static_cast<int32_t>(dfa.trans.size());
  }
  return Status::ok_status();
}

// Nullable rules (fixpoint over "start reaches accepting through nullable references").
void find_nullable_rules(Automaton& a, const RefLists& refs) {
  const int32_t num_rules = static_cast<int32_t>(a.rule_start.size());
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < num_rules; ++r) {
      if (a.rule_nullable[r]) continue;
      std::vector<int32_t> stack{a.rule_start[r]};
      std::map<int32_t, bool> visited;
      bool ok = false;
      while (!stack.empty() && !ok) {
        int32_t s = stack.back();
        stack.pop_back();
        if (visited[s]) continue;
        visited[s] = true;
        if (a.accepting[s]) ok = true;
        for (auto [rule, t] : refs[s]) {
          if (a.rule_nullable[rule]) stack.push_back(t);
        }
      }
      if (ok) {
        a.rule_nullable[r] = 1;
        changed = true;
      }
    }
  }
}

struct Liveness {
  std::vector<uint8_t> live;        // per state: can reach acceptance
  std::vector<uint8_t> productive;  // per rule: can complete
};

// Live states: can reach acceptance through bytes and references to productive rules.
Liveness find_live_states(const Automaton& a, const RefLists& refs) {
  const int32_t n = a.num_states;
  const int32_t num_rules = static_cast<int32_t>(a.rule_start.size());
  std::vector<std::vector<int32_t>> byte_preds(n);
  for (int32_t s = 0; s < n; ++s) {
    int32_t last = -2;
    for (int b = 0; b < 256; ++b) {
      int32_t t = a.trans[static_cast<size_t>(s) * 256 + b];
      if (t >= 0 && t != last) {
        byte_preds[t].push_back(s);
        last = t;
      }
    }
  }
  for (auto& v : byte_preds) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  std::vector<std::vector<std::pair<int32_t, int32_t>>> ref_preds(n);        // t -> (pred, rule)
  std::vector<std::vector<std::pair<int32_t, int32_t>>> by_rule(num_rules);  // rule -> (pred, t)
  for (int32_t s = 0; s < n; ++s) {
    for (auto [rule, t] : refs[s]) {
      ref_preds[t].push_back({s, rule});
      by_rule[rule].push_back({s, t});
    }
  }
  std::vector<uint8_t> live(n, 0), productive(num_rules, 0);
  std::vector<int32_t> work;
  auto make_live = [&](int32_t s) {
    if (!live[s]) {
      live[s] = 1;
      work.push_back(s);
    }
  };
  for (int32_t s = 0; s < n; ++s) {
    if (a.accepting[s]) make_live(s);
  }
  while (!work.empty()) {
    int32_t t = work.back();
    work.pop_back();
    for (int32_t p : byte_preds[t]) make_live(p);
    for (auto [p, rule] : ref_preds[t]) {
      if (productive[rule]) make_live(p);
    }
    int32_t r = a.state_rule[t];
    if (t == a.rule_start[r] && !productive[r]) {
      productive[r] = 1;
      for (auto [p, tt] : by_rule[r]) {
        if (live[tt]) make_live(p);
      }
    }
  }
  return {std::move(live), std::move(productive)};
}

// Drops the transitions and references into dead states and lays the references out flat
// (ref_begin / ref_rule / ref_target); returns each state's own byte set, the seed of FIRST.
std::vector<ByteSet> trim(Automaton& a, const RefLists& refs, const Liveness& liveness) {
  const int32_t n = a.num_states;
  const std::vector<uint8_t>& live = liveness.live;
  const std::vector<uint8_t>& productive = liveness.productive;
  a.ref_begin.push_back(0);
  a.has_bytes.assign(n, 0);
  std::vector<ByteSet> first(n);  // FIRST byte sets, seeded with each state's own bytes
  for (int32_t s = 0; s < n; ++s) {
    int32_t* row = a.trans.data() + static_cast<size_t>(s) * 256;
    for (int b = 0; b < 256; ++b) {
      if (row[b] >= 0 && !live[row[b]]) row[b] = -1;
      if (row[b] >= 0) first[s].set(static_cast<uint8_t>(b));
    }
    a.has_bytes[s] = first[s].empty() ? 0 : 1;
    for (auto [rule, t] : refs[s]) {
      if (productive[rule] && live[t]) {
        a.ref_rule.push_back(rule);
        a.ref_target.push_back(t);
      }
    }
    a.ref_begin.push_back(static_cast<int32_t>(a.ref_rule.size()));
  }
  return first;
}

// FIRST and FOLLOW byte sets (over-approximations are fine; they only prune).
void first_and_follow(Automaton& a, std::vector<ByteSet> first) {
  const int32_t n = a.num_states;
  std::vector<uint8_t> null_state(a.accepting.begin(), a.accepting.end());
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t k = a.ref_begin[s]; k < a.ref_begin[s + 1]; ++k) {
        int32_t rule = a.ref_rule[k], t = a.ref_target[k];
        ByteSet f = first[s];
        f |= first[a.rule_start[rule]];
        if (a.rule_nullable[rule]) {
          f |= first[t];
          if (null_state[t] && !null_state[s]) {
            null_state[s] = 1;
            changed = true;
          }
        }
        if (!(f == first[s])) {
          first[s] = f;
          changed = true;
        }
      }
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t k = a.ref_begin[s]; k < a.ref_begin[s + 1]; ++k) {
        int32_t rule = a.ref_rule[k], t = a.ref_target[k];
        ByteSet f = a.rule_follow[rule];
        f |= first[t];
        if (null_state[t]) f |= a.rule_follow[a.state_rule[s]];
        if (!(f == a.rule_follow[rule])) {
          a.rule_follow[rule] = f;
          changed = true;
        }
      }
    }
  }
}

}  // namespace

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
  RefLists refs;  // per global state: its (rule, target) references
  DI_TRY(compile_rules(grammar, limits, a, refs));
  find_nullable_rules(a, refs);
  const Liveness live = find_live_states(a, refs);
  if (!live.productive[a.root]) {
    return invalid_argument("the grammar matches no string (root rule '" + a.rule_names[a.root] +
                            "' can never complete)");
  }
  first_and_follow(a, trim(a, refs, live));
  return a;
}

}  // namespace deepinfer::structured
