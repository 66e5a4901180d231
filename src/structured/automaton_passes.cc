// The passes over the whole automaton (automaton_stages.h): nullable rules, liveness, trimming,
// row packing, FIRST / FOLLOW.
#include <algorithm>
#include <bit>

#include "structured/automaton_stages.h"

namespace deepinfer::structured::automaton_stages {
namespace {

// States that reach acceptance through references to nullable rules alone, and (filling in
// `nullable`) the rules whose start state does: a least fixpoint, solved from the accepting
// states backwards in time linear in states and references. `for_each_ref(fn)` calls
// fn(state, rule, target) for every reference.
template <typename ForEachRef>
std::vector<uint8_t> solve_null_states(const Automaton& a, std::vector<uint8_t>& nullable,
                                       ForEachRef&& for_each_ref) {
  const int32_t n = a.num_states;
  const int32_t num_rules = static_cast<int32_t>(a.rule_start.size());
  std::vector<int32_t> to_begin(n + 1, 0), rule_begin(num_rules + 1, 0);
  for_each_ref([&](int32_t, int32_t rule, int32_t t) {
    ++to_begin[t + 1];
    ++rule_begin[rule + 1];
  });
  for (int32_t s = 0; s < n; ++s) to_begin[s + 1] += to_begin[s];
  for (int32_t r = 0; r < num_rules; ++r) rule_begin[r + 1] += rule_begin[r];
  std::vector<std::pair<int32_t, int32_t>> by_target(to_begin[n]);          // t -> (state, rule)
  std::vector<std::pair<int32_t, int32_t>> by_rule(rule_begin[num_rules]);  // rule -> (state, t)
  {
    std::vector<int32_t> ft(to_begin.begin(), to_begin.end() - 1);
    std::vector<int32_t> fr(rule_begin.begin(), rule_begin.end() - 1);
    for_each_ref([&](int32_t s, int32_t rule, int32_t t) {
      by_target[ft[t]++] = {s, rule};
      by_rule[fr[rule]++] = {s, t};
    });
  }
  std::vector<uint8_t> null_state(n, 0);
  std::vector<int32_t> work;
  auto make_null = [&](int32_t s) {
    if (!null_state[s]) {
      null_state[s] = 1;
      work.push_back(s);
    }
  };
  for (int32_t s = 0; s < n; ++s) {
    if (a.accepting[s]) make_null(s);
  }
  while (!work.empty()) {
    const int32_t x = work.back();
    work.pop_back();
    for (int32_t k = to_begin[x]; k < to_begin[x + 1]; ++k) {
      if (nullable[by_target[k].second]) make_null(by_target[k].first);
    }
    const int32_t r = a.state_rule[x];
    if (x == a.rule_start[r] && !nullable[r]) {
      nullable[r] = 1;
      for (int32_t k = rule_begin[r]; k < rule_begin[r + 1]; ++k) {
        if (null_state[by_rule[k].second]) make_null(by_rule[k].first);
      }
    }
  }
  return null_state;
}

}  // namespace

// Nullable rules: the start reaches acceptance through references to nullable rules.
void find_nullable_rules(Automaton& a, const Transitions& edges) {
  solve_null_states(a, a.rule_nullable, [&](auto&& fn) { edges.for_each_ref(a.num_classes, fn); });
}

// Live states: can reach acceptance through bytes and references to productive rules.
Liveness find_live_states(const Automaton& a, const Transitions& edges) {
  const int32_t n = a.num_states;
  const int32_t num_rules = static_cast<int32_t>(a.rule_start.size());
  const int32_t nc = a.num_classes;
  // Predecessors by target (byte transitions and references), and references by rule: counting
  // sorts of the transition list.
  std::vector<int32_t> pred_begin(static_cast<size_t>(n) + 1, 0), rule_begin(num_rules + 1, 0);
  for (size_t k = 0; k < edges.label.size(); ++k) {
    ++pred_begin[edges.target[k] + 1];
    if (edges.label[k] >= nc) ++rule_begin[edges.label[k] - nc + 1];
  }
  for (int32_t s = 0; s < n; ++s) pred_begin[s + 1] += pred_begin[s];
  for (int32_t r = 0; r < num_rules; ++r) rule_begin[r + 1] += rule_begin[r];
  std::vector<std::pair<int32_t, int32_t>> preds(pred_begin[n]);            // t -> (pred, label)
  std::vector<std::pair<int32_t, int32_t>> by_rule(rule_begin[num_rules]);  // rule -> (pred, t)
  {
    std::vector<int32_t> fp(pred_begin.begin(), pred_begin.end() - 1);
    std::vector<int32_t> fr(rule_begin.begin(), rule_begin.end() - 1);
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t k = edges.begin[s]; k < edges.begin[s + 1]; ++k) {
        const int32_t l = edges.label[k], t = edges.target[k];
        preds[fp[t]++] = {s, l};
        if (l >= nc) by_rule[fr[l - nc]++] = {s, t};
      }
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
    for (int32_t k = pred_begin[t]; k < pred_begin[t + 1]; ++k) {
      const auto [p, l] = preds[k];
      if (l < nc || productive[l - nc]) make_live(p);
    }
    int32_t r = a.state_rule[t];
    if (t == a.rule_start[r] && !productive[r]) {
      productive[r] = 1;
      for (int32_t k = rule_begin[r]; k < rule_begin[r + 1]; ++k) {
        if (live[by_rule[k].second]) make_live(by_rule[k].first);
      }
    }
  }
  return {std::move(live), std::move(productive)};
}

// Drops the references into dead states and lays the rest out flat (ref_begin / ref_rule /
// ref_target); fills scan_bytes and has_bytes from the byte transitions into live states.
void trim(Automaton& a, const Transitions& edges, const Liveness& liveness) {
  const int32_t n = a.num_states;
  const int32_t nc = a.num_classes;
  const std::vector<uint8_t>& live = liveness.live;
  const std::vector<uint8_t>& productive = liveness.productive;
  a.ref_begin.push_back(0);
  a.has_bytes.assign(n, 0);
  a.scan_bytes.assign(n, ByteSet{});
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t k = edges.begin[s]; k < edges.begin[s + 1]; ++k) {
      const int32_t l = edges.label[k], t = edges.target[k];
      if (l < nc) {
        if (live[t]) a.scan_bytes[s] |= a.class_bytes[l];
      } else if (productive[l - nc] && live[t]) {
        a.ref_rule.push_back(l - nc);
        a.ref_target.push_back(t);
      }
    }
    a.has_bytes[s] = a.scan_bytes[s].empty() ? 0 : 1;
    a.ref_begin.push_back(static_cast<int32_t>(a.ref_rule.size()));
  }
}

// Packs the byte transitions into live states into a.slots / a.row_base: each state's row goes
// at the first offset where the slots of its classes are free (first fit over the free slots,
// found through a "next free slot" forest), giving up after a bounded number of probes and
// then placing the row past the end. Linear in the transitions, up to the bounded probing.
void pack_rows(Automaton& a, const Transitions& edges, const std::vector<uint8_t>& live) {
  const int32_t n = a.num_states;
  const int32_t nc = a.num_classes;
  a.row_base.assign(n, 0);
  a.slots.assign(static_cast<size_t>(nc), TransitionSlot{});
  // free_next[i]: a slot at or after i that may be free (i itself if free); slots at or past
  // the end are free.
  std::vector<int32_t> free_next(static_cast<size_t>(nc) + 1);
  for (int32_t i = 0; i <= nc; ++i) free_next[i] = i;
  auto find_free = [&](int32_t i) {
    while (i < static_cast<int32_t>(free_next.size()) - 1 && free_next[i] != i) {
      free_next[i] = free_next[free_next[i]];
      i = free_next[i];
    }
    return i;
  };
  auto is_free = [&](int32_t i) {
    return i >= static_cast<int32_t>(a.slots.size()) || a.slots[i].owner < 0;
  };
  std::vector<int32_t> cls, tgt;
  int32_t first_free = 0;
  for (int32_t s = 0; s < n; ++s) {
    cls.clear();
    tgt.clear();
    for (int32_t k = edges.begin[s]; k < edges.begin[s + 1]; ++k) {
      if (edges.label[k] < nc && live[edges.target[k]]) {
        cls.push_back(edges.label[k]);
        tgt.push_back(edges.target[k]);
      }
    }
    if (cls.empty()) continue;  // row_base 0: no slot is owned by s
    const int32_t num = static_cast<int32_t>(cls.size());
    int32_t budget = 16 + 2 * num;  // slot checks before giving up on the free slots
    int32_t base = -1;
    first_free = find_free(first_free);
    for (int32_t f = first_free; budget > 0; f = find_free(f + 1)) {
      const int32_t b = f - cls[0];
      if (b < 0) {
        --budget;
        continue;
      }
      int32_t i = 1;
      while (i < num && is_free(b + cls[i])) ++i;
      budget -= i;
      if (i == num) {
        base = b;
        break;
      }
    }
    if (base < 0) base = std::max<int32_t>(0, static_cast<int32_t>(a.slots.size()) - cls[0]);
    const size_t end = static_cast<size_t>(base) + static_cast<size_t>(nc);
    if (a.slots.size() < end) {
      const size_t old = a.slots.size();
      a.slots.resize(end);
      free_next.resize(end + 1);
      for (size_t i = old; i <= end; ++i) free_next[i] = static_cast<int32_t>(i);
    }
    a.row_base[s] = base;
    for (int32_t i = 0; i < num; ++i) {
      const int32_t slot = base + cls[i];
      a.slots[slot] = TransitionSlot{s, tgt[i]};
      free_next[slot] = slot + 1;
    }
  }
}

// FIRST and FOLLOW byte sets (over-approximations are fine; they only prune). Both are least
// fixpoints of unions along references, solved with work lists: a set that grows passes its
// bytes on to the sets that include it.
void first_and_follow(Automaton& a) {
  std::vector<ByteSet> first = a.scan_bytes;  // seeded with each state's own bytes
  const int32_t n = a.num_states;
  auto for_each_ref = [&](auto&& fn) {
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t k = a.ref_begin[s]; k < a.ref_begin[s + 1]; ++k) {
        fn(s, a.ref_rule[k], a.ref_target[k]);
      }
    }
  };
  std::vector<uint8_t> nullable = a.rule_nullable;
  const std::vector<uint8_t> null_state = solve_null_states(a, nullable, for_each_ref);
  // FIRST(s) includes FIRST(start of each rule s refers to) and, past a nullable one, FIRST of
  // the reference's target.
  std::vector<std::pair<int32_t, int32_t>> edges;  // (from, into): FIRST(into) ⊇ FIRST(from)
  for_each_ref([&](int32_t s, int32_t rule, int32_t t) {
    edges.push_back({a.rule_start[rule], s});
    if (a.rule_nullable[rule]) edges.push_back({t, s});
  });
  auto propagate = [](std::vector<ByteSet>& sets,
                      const std::vector<std::pair<int32_t, int32_t>>& into) {
    const int32_t count = static_cast<int32_t>(sets.size());
    std::vector<int32_t> begin(count + 1, 0), next(into.size());
    for (auto [from, to] : into) ++begin[from + 1];
    for (int32_t i = 0; i < count; ++i) begin[i + 1] += begin[i];
    std::vector<int32_t> fill(begin.begin(), begin.end() - 1);
    for (auto [from, to] : into) next[fill[from]++] = to;
    std::vector<int32_t> work;
    std::vector<uint8_t> queued(count, 0);
    for (int32_t i = 0; i < count; ++i) {
      if (begin[i + 1] > begin[i]) {
        work.push_back(i);
        queued[i] = 1;
      }
    }
    while (!work.empty()) {
      const int32_t x = work.back();
      work.pop_back();
      queued[x] = 0;
      for (int32_t k = begin[x]; k < begin[x + 1]; ++k) {
        const int32_t y = next[k];
        ByteSet f = sets[y];
        f |= sets[x];
        if (!(f == sets[y])) {
          sets[y] = f;
          if (!queued[y] && begin[y + 1] > begin[y]) {
            queued[y] = 1;
            work.push_back(y);
          }
        }
      }
    }
  };
  propagate(first, edges);
  // FOLLOW(rule) includes FIRST of each reference's target and, where the target may end the
  // referring rule, FOLLOW of that rule.
  edges.clear();
  for_each_ref([&](int32_t s, int32_t rule, int32_t t) {
    a.rule_follow[rule] |= first[t];
    if (null_state[t]) edges.push_back({a.state_rule[s], rule});
  });
  propagate(a.rule_follow, edges);
}

}  // namespace deepinfer::structured::automaton_stages
