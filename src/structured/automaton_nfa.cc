// Byte classes and each rule's Thompson NFA (automaton_stages.h).
#include <algorithm>
#include <array>
#include <bit>

#include "base/input_limits.h"
#include "structured/automaton_stages.h"

namespace deepinfer::structured::automaton_stages {

// The coarsest partition of the byte values that every byte set of the grammar respects: the
// automaton's alphabet (plus rule references). A grammar that only names a few characters has
// a handful of classes, so a state's transitions are a short row instead of 256 entries.
void compute_byte_classes(const Grammar& g, Automaton& a) {
  std::array<uint8_t, 256>& of = a.byte_class;
  of.fill(0);
  std::vector<int32_t> size(256, 0), inside(256, 0), split_to(256, -1);
  size[0] = 256;
  int32_t count = 1;
  std::vector<ByteSet> seen;  // the last few sets refined by: skips the common repeats cheaply
  for (size_t i = 0; i < g.num_exprs() && count < 256; ++i) {
    const Expr& e = g.expr(static_cast<int32_t>(i));
    if (e.kind != ExprKind::kBytes || e.bytes.empty()) continue;
    if (std::find(seen.begin(), seen.end(), e.bytes) != seen.end()) continue;
    if (seen.size() >= 8) seen.erase(seen.begin());
    seen.push_back(e.bytes);
    // Count the set's bytes per class; a class only partly inside is split in two.
    std::vector<int32_t> touched;
    for (int w = 0; w < 4; ++w) {
      for (uint64_t bits = e.bytes.words[w]; bits; bits &= bits - 1) {
        const int32_t c = of[w * 64 + std::countr_zero(bits)];
        if (inside[c]++ == 0) touched.push_back(c);
      }
    }
    for (int32_t c : touched) {
      if (inside[c] < size[c]) {
        split_to[c] = count;
        size[count++] = inside[c];
        size[c] -= inside[c];
      }
      inside[c] = 0;
    }
    for (int w = 0; w < 4; ++w) {
      for (uint64_t bits = e.bytes.words[w]; bits; bits &= bits - 1) {
        const int b = w * 64 + std::countr_zero(bits);
        if (split_to[of[b]] >= 0) of[b] = static_cast<uint8_t>(split_to[of[b]]);
      }
    }
    for (int32_t c : touched) split_to[c] = -1;
  }
  // Number the classes by their first byte, so that the layout does not depend on rule order.
  std::vector<int32_t> renumber(256, -1);
  int32_t n = 0;
  for (int b = 0; b < 256; ++b) {
    if (renumber[of[b]] < 0) renumber[of[b]] = n++;
  }
  a.num_classes = n;
  a.class_bytes.assign(n, ByteSet{});
  for (int b = 0; b < 256; ++b) {
    of[b] = static_cast<uint8_t>(renumber[of[b]]);
    a.class_bytes[of[b]].set(static_cast<uint8_t>(b));
  }
}

namespace {

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& g, const AutomatonLimits& limits, int32_t* budget, ClassLists* classes)
      : g_(g), limits_(limits), budget_(budget), classes_(classes) {}

  int32_t new_state() {
    --*budget_;
    return num_states_++;
  }
  void eps(int32_t from, int32_t to) { eps_.push_back({from, to}); }

  // Builds `id` starting at `start`; returns the end state.
  Expected<int32_t> build(int32_t id, int32_t start) {
    if (*budget_ < 0) return too_many_states(limits_.max_states);
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        return start;
      case ExprKind::kBytes: {
        int32_t s = new_state();
        auto [off, n] = classes_->of(id, e.bytes);
        edges_.push_back({start, Nfa::Edge{s, off, n}});
        return s;
      }
      case ExprKind::kRef: {
        int32_t s = new_state();
        edges_.push_back({start, Nfa::Edge{s, e.rule, -1}});
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

  // The adjacency lists (a counting sort by source state; edge order is kept).
  Nfa finish() {
    Nfa nfa;
    nfa.num_states = num_states_;
    nfa.eps_begin.assign(num_states_ + 1, 0);
    for (auto [from, to] : eps_) ++nfa.eps_begin[from + 1];
    for (int32_t s = 0; s < num_states_; ++s) nfa.eps_begin[s + 1] += nfa.eps_begin[s];
    nfa.eps_to.assign(eps_.size(), 0);
    std::vector<int32_t> fill(nfa.eps_begin.begin(), nfa.eps_begin.end() - 1);
    for (auto [from, to] : eps_) nfa.eps_to[fill[from]++] = to;
    nfa.edge_begin.assign(num_states_ + 1, 0);
    for (const auto& [from, e] : edges_) ++nfa.edge_begin[from + 1];
    for (int32_t s = 0; s < num_states_; ++s) nfa.edge_begin[s + 1] += nfa.edge_begin[s];
    nfa.edges.assign(edges_.size(), Nfa::Edge{});
    fill.assign(nfa.edge_begin.begin(), nfa.edge_begin.end() - 1);
    for (const auto& [from, e] : edges_) nfa.edges[fill[from]++] = e;
    return nfa;
  }

 private:
  const Grammar& g_;
  const AutomatonLimits& limits_;
  int32_t* budget_;
  ClassLists* classes_;
  int32_t num_states_ = 0;
  std::vector<std::pair<int32_t, int32_t>> eps_;
  std::vector<std::pair<int32_t, Nfa::Edge>> edges_;
};

}  // namespace

Expected<RuleNfa> build_rule_nfa(const Grammar& g, const AutomatonLimits& limits, int32_t body,
                                 int32_t* budget, ClassLists* classes) {
  NfaBuilder nb(g, limits, budget, classes);
  RuleNfa r;
  r.start = nb.new_state();
  DI_ASSIGN_OR_RETURN(r.final_state, nb.build(body, r.start));
  r.nfa = nb.finish();
  return r;
}

}  // namespace deepinfer::structured::automaton_stages
