// Grammar IR -> minimal per-rule DFAs over byte classes and rule references; see automaton.h.
#include "structured/automaton.h"

#include <algorithm>
#include <array>
#include <bit>

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
    nfa.eps_to.resize(eps_.size());
    std::vector<int32_t> fill(nfa.eps_begin.begin(), nfa.eps_begin.end() - 1);
    for (auto [from, to] : eps_) nfa.eps_to[fill[from]++] = to;
    nfa.edge_begin.assign(num_states_ + 1, 0);
    for (const auto& [from, e] : edges_) ++nfa.edge_begin[from + 1];
    for (int32_t s = 0; s < num_states_; ++s) nfa.edge_begin[s + 1] += nfa.edge_begin[s];
    nfa.edges.resize(edges_.size());
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

uint64_t hash_states(const int32_t* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<uint32_t>(p[i])) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
  }
  return h;
}

// Subset construction over byte classes and references. A subset keeps only the NFA states of
// its epsilon closure that matter (those with byte or reference edges, and the final state), so
// closures that differ only in pass-through states are one DFA state. Subsets are interned in
// one flat arena through an open-addressing table of their hashes; a state's targets are
// gathered per class in one pass over its NFA states' edges, and classes with the same gathered
// list share one closure. `work` counts down the NFA states of every target set formed, the
// whole closure (limits.max_subset_work): per state, once per distinct target of its classes
// and once per referenced rule.
// Ids 0, 1, ... of keys the caller stores, found by their 64-bit hash (open addressing, linear
// probing); `same(id)` says whether stored key `id` equals the one looked up. Both subset
// constructions intern their subsets through it.
class HashedIds {
 public:
  int32_t size() const { return static_cast<int32_t>(hashes_.size()); }

  // The id of the key with hash h for which same(id) holds, or a new id (*added) the caller
  // then stores the key under.
  template <class Same>
  int32_t find_or_add(uint64_t h, Same same, bool* added) {
    if ((hashes_.size() + 1) * 2 > table_.size()) grow();
    const size_t mask = table_.size() - 1;
    for (size_t slot = h & mask;; slot = (slot + 1) & mask) {
      const int32_t id = table_[slot];
      if (id < 0) {
        table_[slot] = size();
        hashes_.push_back(h);
        *added = true;
        return size() - 1;
      }
      if (hashes_[id] == h && same(id)) {
        *added = false;
        return id;
      }
    }
  }

 private:
  void grow() {
    std::vector<int32_t> table(std::max<size_t>(64, table_.size() * 2), -1);
    const size_t mask = table.size() - 1;
    for (int32_t id = 0; id < size(); ++id) {
      size_t slot = hashes_[id] & mask;
      while (table[slot] >= 0) slot = (slot + 1) & mask;
      table[slot] = id;
    }
    table_ = std::move(table);
  }

  std::vector<uint64_t> hashes_;  // id -> hash
  std::vector<int32_t> table_;    // slots of ids, -1 free
};

class SubsetConstruction {
 public:
  SubsetConstruction(const Nfa& nfa, const ClassLists& classes, int32_t num_classes,
                     int32_t final_state)
      : nfa_(nfa),
        pool_(classes.pool()),
        num_classes_(num_classes),
        final_(final_state),
        mark_(nfa.num_states, 0),
        bucket_(num_classes) {}

  Expected<RuleDfa> run(int32_t start, int32_t* budget, int32_t max_states, int64_t* work,
                        int64_t max_work) {
    RuleDfa dfa;
    raw_.assign(1, start);
    intern_raw(budget);
    *work -= visited_;
    std::vector<int32_t> touched;
    std::vector<std::pair<int32_t, int32_t>> ref_pairs, out;
    for (int32_t cur = 0; cur < num_sets(); ++cur) {
      if (*budget < 0) return too_many_states(max_states);
      if (*work < 0) return too_much_subset_work(max_work);
      touched.clear();
      ref_pairs.clear();
      out.clear();
      bool acc = false;
      const int64_t set_end = set_begin_[cur + 1];
      for (int64_t i = set_begin_[cur]; i < set_end; ++i) {
        const int32_t s = members_[i];
        if (s == final_) acc = true;
        for (int32_t k = nfa_.edge_begin[s]; k < nfa_.edge_begin[s + 1]; ++k) {
          const Nfa::Edge& e = nfa_.edges[k];
          if (e.n < 0) {
            ref_pairs.push_back({e.a, e.to});
            continue;
          }
          for (int32_t j = 0; j < e.n; ++j) {
            const int32_t c = pool_[e.a + j];
            if (bucket_[c].empty()) touched.push_back(c);
            bucket_[c].push_back(e.to);
          }
        }
      }
      // Classes whose gathered lists are equal (same edges, same order) share one target: sorted
      // by the lists' hashes, equal ones meet.
      by_hash_.clear();
      for (int32_t c : touched) {
        by_hash_.push_back({hash_states(bucket_[c].data(), bucket_[c].size()), c});
      }
      std::sort(by_hash_.begin(), by_hash_.end());
      for (size_t i = 0; i < by_hash_.size();) {
        size_t j = i;
        while (j < by_hash_.size() && by_hash_[j].first == by_hash_[i].first) ++j;
        const size_t group = out.size();
        for (size_t k = i; k < j; ++k) {
          const int32_t c = by_hash_[k].second;
          int32_t id = -1;
          for (size_t p = i; p < k && id < 0; ++p) {
            if (bucket_[by_hash_[p].second] == bucket_[c]) id = out[group + (p - i)].second;
          }
          if (id < 0) {
            raw_ = bucket_[c];
            id = intern_raw(budget);
            *work -= visited_;
          }
          out.push_back({c, id});
        }
        i = j;
      }
      for (int32_t c : touched) bucket_[c].clear();
      std::sort(out.begin(), out.end());
      std::sort(ref_pairs.begin(), ref_pairs.end());
      for (size_t i = 0; i < ref_pairs.size();) {
        const int32_t rule = ref_pairs[i].first;
        raw_.clear();
        for (; i < ref_pairs.size() && ref_pairs[i].first == rule; ++i) {
          raw_.push_back(ref_pairs[i].second);
        }
        const int32_t id = intern_raw(budget);
        *work -= visited_;
        out.push_back({num_classes_ + rule, id});
      }
      for (auto [l, t] : out) {
        dfa.label.push_back(l);
        dfa.target.push_back(t);
      }
      dfa.begin.push_back(static_cast<int32_t>(dfa.label.size()));
      dfa.accepting.push_back(acc ? 1 : 0);
    }
    dfa.num_states = num_sets();
    return dfa;
  }

 private:
  int32_t num_sets() const { return static_cast<int32_t>(set_begin_.size()) - 1; }

  // raw_ -> its epsilon closure (visited_ states), of which the states with edges and the final
  // state, sorted, are the subset; returns its id (a new one counts against the state budget).
  int32_t intern_raw(int32_t* budget) {
    closure_.clear();
    for (int32_t s : raw_) {
      if (!mark_[s]) {
        mark_[s] = 1;
        closure_.push_back(s);
      }
    }
    for (size_t i = 0; i < closure_.size(); ++i) {
      const int32_t s = closure_[i];
      for (int32_t k = nfa_.eps_begin[s]; k < nfa_.eps_begin[s + 1]; ++k) {
        const int32_t t = nfa_.eps_to[k];
        if (!mark_[t]) {
          mark_[t] = 1;
          closure_.push_back(t);
        }
      }
    }
    visited_ = static_cast<int64_t>(closure_.size());
    size_t kept = 0;
    for (int32_t s : closure_) {
      mark_[s] = 0;
      if (s == final_ || nfa_.edge_begin[s + 1] > nfa_.edge_begin[s]) closure_[kept++] = s;
    }
    closure_.resize(kept);
    std::sort(closure_.begin(), closure_.end());
    bool added = false;
    const int32_t id = ids_.find_or_add(
        hash_states(closure_.data(), closure_.size()),
        [&](int32_t other) {
          const int64_t n = set_begin_[other + 1] - set_begin_[other];
          return n == static_cast<int64_t>(closure_.size()) &&
                 std::equal(closure_.begin(), closure_.end(), members_.begin() + set_begin_[other]);
        },
        &added);
    if (added) {
      members_.insert(members_.end(), closure_.begin(), closure_.end());
      set_begin_.push_back(static_cast<int64_t>(members_.size()));
      --*budget;
    }
    return id;
  }

  const Nfa& nfa_;
  const std::vector<uint8_t>& pool_;
  const int32_t num_classes_;
  const int32_t final_;
  std::vector<uint8_t> mark_;
  std::vector<std::vector<int32_t>> bucket_;           // per class: targets gathered for this state
  std::vector<std::pair<uint64_t, int32_t>> by_hash_;  // (hash of gathered list, class)
  std::vector<int32_t> raw_, closure_;
  int64_t visited_ = 0;                // size of the last closure, pass-through states included
  std::vector<int32_t> members_;       // the subsets, one after another
  std::vector<int64_t> set_begin_{0};  // subset id -> offset in members_
  HashedIds ids_;                      // subset id by hash
};

// The same construction for small NFAs (up to kBitsetNfaStates states): subsets are bitsets,
// a closure is the union of precomputed per-state closures, and nothing is sorted. This is the
// shape of the expensive patterns (a short pattern whose DFA is large: "[9a]+\d{233}" has 240
// NFA states and 27,000 DFA states of up to 233 positions each). The moves of all of a
// subset's states on one class are gathered with one shifted AND per word where the target is
// the next state, as it is for most byte edges of a Thompson NFA. A subset takes
// kBitsetNfaStates / 8 bytes at most. The work counted is the same as the other construction's.
inline constexpr int32_t kBitsetNfaStates = 1024;

class BitsetSubsetConstruction {
 public:
  BitsetSubsetConstruction(const Nfa& nfa, const ClassLists& classes, int32_t num_classes,
                           int32_t final_state)
      : nfa_(nfa),
        pool_(classes.pool()),
        num_classes_(num_classes),
        final_(final_state),
        words_(static_cast<size_t>(nfa.num_states + 63) / 64),
        closure_of_(static_cast<size_t>(nfa.num_states) * words_, 0),
        important_(words_, 0),
        buckets_(static_cast<size_t>(num_classes) * words_, 0),
        touched_(num_classes, 0),
        raw_(words_),
        closure_(words_),
        trivial_(words_, 0),
        has_refs_(words_, 0),
        other_moves_(words_, 0),
        shift_mask_(static_cast<size_t>(num_classes) * words_, 0),
        move_begin_(nfa.num_states + 1, 0) {
    std::vector<int32_t> stack;
    for (int32_t s = 0; s < nfa.num_states; ++s) {
      uint64_t* cl = &closure_of_[static_cast<size_t>(s) * words_];
      set(cl, s);
      stack.assign(1, s);
      while (!stack.empty()) {
        const int32_t x = stack.back();
        stack.pop_back();
        for (int32_t k = nfa.eps_begin[x]; k < nfa.eps_begin[x + 1]; ++k) {
          const int32_t t = nfa.eps_to[k];
          if (!test(cl, t)) {
            set(cl, t);
            stack.push_back(t);
          }
        }
      }
      if (s == final_ || nfa.edge_begin[s + 1] > nfa.edge_begin[s]) set(important_.data(), s);
      if (nfa.eps_begin[s + 1] == nfa.eps_begin[s]) set(trivial_.data(), s);
      // Moves to the next state (most of them: Thompson's construction numbers a byte edge's
      // target right after its source) go into the per-class shift masks; the others are listed
      // per state. References are read from the NFA's edges.
      for (int32_t k = nfa.edge_begin[s]; k < nfa.edge_begin[s + 1]; ++k) {
        const Nfa::Edge& e = nfa.edges[k];
        if (e.n < 0) set(has_refs_.data(), s);
        for (int32_t j = 0; j < e.n; ++j) {
          const int32_t c = pool_[e.a + j];
          if (e.to == s + 1) {
            set(&shift_mask_[static_cast<size_t>(c) * words_], s);
          } else {
            moves_.push_back({c, e.to});
            set(other_moves_.data(), s);
          }
        }
      }
      move_begin_[s + 1] = static_cast<int32_t>(moves_.size());
    }
    for (int32_t c = 0; c < num_classes; ++c) {
      const uint64_t* m = &shift_mask_[static_cast<size_t>(c) * words_];
      if (std::any_of(m, m + words_, [](uint64_t w) { return w != 0; }))
        shift_classes_.push_back(c);
    }
  }

  Expected<RuleDfa> run(int32_t start, int32_t* budget, int32_t max_states, int64_t* work,
                        int64_t max_work) {
    RuleDfa dfa;
    std::fill(raw_.begin(), raw_.end(), 0);
    set(raw_.data(), start);
    intern(raw_.data(), budget);
    *work -= visited_;
    std::vector<int32_t> touched;
    std::vector<std::pair<int32_t, int32_t>> ref_pairs, out;
    for (int32_t cur = 0; cur < num_sets(); ++cur) {
      if (*budget < 0) return too_many_states(max_states);
      if (*work < 0) return too_much_subset_work(max_work);
      touched.clear();
      ref_pairs.clear();
      out.clear();
      const uint64_t* members = &sets_[static_cast<size_t>(cur) * words_];
      const bool acc = test(members, final_);
      for (int32_t c : shift_classes_) {  // targets = (members on a move to the next) << 1
        const uint64_t* m = &shift_mask_[static_cast<size_t>(c) * words_];
        uint64_t* b = bucket(c);
        uint64_t carry = 0, any = 0;
        for (size_t w = 0; w < words_; ++w) {
          const uint64_t x = members[w] & m[w];
          b[w] = (x << 1) | carry;
          carry = x >> 63;
          any |= x;
        }
        if (any) {
          touched_[c] = 1;
          touched.push_back(c);
        }
      }
      for (size_t w = 0; w < words_; ++w) {
        for (uint64_t bits = members[w] & (other_moves_[w] | has_refs_[w]); bits;
             bits &= bits - 1) {
          const int32_t s = static_cast<int32_t>(w * 64) + std::countr_zero(bits);
          for (int32_t k = move_begin_[s]; k < move_begin_[s + 1]; ++k) {
            const auto [c, to] = moves_[k];
            if (!touched_[c]) {
              touched_[c] = 1;
              touched.push_back(c);
            }
            set(bucket(c), to);
          }
          if (test(has_refs_.data(), s)) {
            for (int32_t k = nfa_.edge_begin[s]; k < nfa_.edge_begin[s + 1]; ++k) {
              const Nfa::Edge& e = nfa_.edges[k];
              if (e.n < 0) ref_pairs.push_back({e.a, e.to});
            }
          }
        }
      }
      // Classes with equal gathered sets share one target: sorted by hash, equal ones meet.
      by_hash_.clear();
      for (int32_t c : touched) by_hash_.push_back({hash_words(bucket(c)), c});
      std::sort(by_hash_.begin(), by_hash_.end());
      for (size_t i = 0; i < by_hash_.size();) {
        size_t j = i;
        while (j < by_hash_.size() && by_hash_[j].first == by_hash_[i].first) ++j;
        const size_t group = out.size();
        for (size_t k = i; k < j; ++k) {
          const int32_t c = by_hash_[k].second;
          int32_t id = -1;
          for (size_t p = i; p < k && id < 0; ++p) {
            if (equal(bucket(by_hash_[p].second), bucket(c))) id = out[group + (p - i)].second;
          }
          if (id < 0) {
            id = intern(bucket(c), budget);
            *work -= visited_;
          }
          out.push_back({c, id});
        }
        i = j;
      }
      for (int32_t c : touched) {
        std::fill(bucket(c), bucket(c) + words_, 0);
        touched_[c] = 0;
      }
      std::sort(out.begin(), out.end());
      std::sort(ref_pairs.begin(), ref_pairs.end());
      for (size_t i = 0; i < ref_pairs.size();) {
        const int32_t rule = ref_pairs[i].first;
        std::fill(raw_.begin(), raw_.end(), 0);
        for (; i < ref_pairs.size() && ref_pairs[i].first == rule; ++i) {
          set(raw_.data(), ref_pairs[i].second);
        }
        const int32_t id = intern(raw_.data(), budget);
        *work -= visited_;
        out.push_back({num_classes_ + rule, id});
      }
      for (auto [l, t] : out) {
        dfa.label.push_back(l);
        dfa.target.push_back(t);
      }
      dfa.begin.push_back(static_cast<int32_t>(dfa.label.size()));
      dfa.accepting.push_back(acc ? 1 : 0);
    }
    dfa.num_states = num_sets();
    return dfa;
  }

 private:
  static void set(uint64_t* b, int32_t i) { b[i >> 6] |= uint64_t{1} << (i & 63); }
  static bool test(const uint64_t* b, int32_t i) { return (b[i >> 6] >> (i & 63)) & 1; }
  bool equal(const uint64_t* x, const uint64_t* y) const { return std::equal(x, x + words_, y); }
  uint64_t hash_words(const uint64_t* b) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (size_t w = 0; w < words_; ++w) {
      h = (h ^ b[w]) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 29;
    }
    return h;
  }
  uint64_t* bucket(int32_t c) { return &buckets_[static_cast<size_t>(c) * words_]; }
  int32_t num_sets() const { return ids_.size(); }

  // The closure of `raw` (visited_ states), kept to the states that matter; returns its id (a
  // new one counts against the state budget).
  int32_t intern(const uint64_t* raw, int32_t* budget) {
    // States without epsilon edges are their own closure; the others add theirs.
    for (size_t w = 0; w < words_; ++w) closure_[w] = raw[w] & trivial_[w];
    for (size_t w = 0; w < words_; ++w) {
      for (uint64_t bits = raw[w] & ~trivial_[w]; bits; bits &= bits - 1) {
        const int32_t s = static_cast<int32_t>(w * 64) + std::countr_zero(bits);
        const uint64_t* c = &closure_of_[static_cast<size_t>(s) * words_];
        for (size_t v = 0; v < words_; ++v) closure_[v] |= c[v];
      }
    }
    visited_ = 0;
    for (size_t w = 0; w < words_; ++w) {
      visited_ += std::popcount(closure_[w]);
      closure_[w] &= important_[w];
    }
    bool added = false;
    const int32_t id = ids_.find_or_add(
        hash_words(closure_.data()),
        [&](int32_t other) {
          return equal(closure_.data(), &sets_[static_cast<size_t>(other) * words_]);
        },
        &added);
    if (added) {
      sets_.insert(sets_.end(), closure_.begin(), closure_.end());
      --*budget;
    }
    return id;
  }

  const Nfa& nfa_;
  const std::vector<uint8_t>& pool_;
  const int32_t num_classes_;
  const int32_t final_;
  const size_t words_;                // 64-bit words per set of NFA states
  std::vector<uint64_t> closure_of_;  // per NFA state: its epsilon closure
  std::vector<uint64_t> important_;   // the states with edges, and the final one
  std::vector<uint64_t> buckets_;     // per class: targets gathered for this state
  std::vector<uint8_t> touched_;      // per class: its bucket is in use
  std::vector<uint64_t> raw_, closure_;
  std::vector<uint64_t> trivial_;       // NFA states without epsilon edges
  std::vector<uint64_t> has_refs_;      // NFA states with reference edges
  std::vector<uint64_t> other_moves_;   // NFA states with moves listed in moves_
  std::vector<uint64_t> shift_mask_;    // per class: the states with a move to the next state
  std::vector<int32_t> shift_classes_;  // classes whose shift mask is not empty
  std::vector<int32_t> move_begin_;     // per NFA state: its other moves
  std::vector<std::pair<int32_t, int32_t>> moves_;  // (class, target)
  std::vector<std::pair<uint64_t, int32_t>> by_hash_;
  int64_t visited_ = 0;
  std::vector<uint64_t> sets_;    // the subsets, words_ words each
  HashedIds ids_;                 // subset id by hash
};

// A set partition that can be refined in time proportional to the marked elements (Valmari,
// "Fast brief practical DFA minimization", 2012): the elements of set s are
// elems[first[s] .. past[s]), marked ones first.
class Refinable {
 public:
  void init(int32_t n) {
    num_sets = n > 0 ? 1 : 0;
    elems.resize(n);
    loc.resize(n);
    set_of.assign(n, 0);
    first.assign(std::max(n, 1), 0);
    past.assign(std::max(n, 1), 0);
    for (int32_t i = 0; i < n; ++i) elems[i] = loc[i] = i;
    if (n > 0) past[0] = n;
  }
  // `marked` and `touched` are shared scratch, at least as long as the number of sets.
  void mark(int32_t e, std::vector<int32_t>& marked, std::vector<int32_t>& touched) {
    const int32_t s = set_of[e], i = loc[e], j = first[s] + marked[s];
    elems[i] = elems[j];
    loc[elems[i]] = i;
    elems[j] = e;
    loc[e] = j;
    if (marked[s]++ == 0) touched.push_back(s);
  }
  void split(std::vector<int32_t>& marked, std::vector<int32_t>& touched) {
    while (!touched.empty()) {
      const int32_t s = touched.back();
      touched.pop_back();
      const int32_t j = first[s] + marked[s];
      if (j == past[s]) {
        marked[s] = 0;
        continue;
      }
      const int32_t z = num_sets;
      if (marked[s] <= past[s] - j) {  // the marked part is the smaller: it moves
        first[z] = first[s];
        past[z] = first[s] = j;
      } else {
        past[z] = past[s];
        first[z] = past[s] = j;
      }
      for (int32_t i = first[z]; i < past[z]; ++i) set_of[elems[i]] = z;
      marked[s] = marked[z] = 0;
      ++num_sets;
    }
  }

  int32_t num_sets = 0;
  std::vector<int32_t> elems, loc, set_of, first, past;
};

// Appends the minimal DFA of `in` (rule r's) to `a` from global id a.num_states on, its
// transitions to `edges` (the rows are packed once every rule is in): partition
// refinement over its transitions, O(m log n) for m transitions (Valmari 2012). States that
// cannot reach acceptance within the rule are dropped first (the automaton's trim would drop
// them anyway). The start stays the rule's first state; the rest are numbered breadth first
// over transitions in label order.
void append_minimal(RuleDfa in, int32_t r, Automaton& a, Transitions& edges) {
  const int32_t n = in.num_states;
  std::vector<int32_t> tail(in.label.size());
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t k = in.begin[s]; k < in.begin[s + 1]; ++k) tail[k] = s;
  }
  std::vector<int32_t>& label = in.label;
  std::vector<int32_t>& head = in.target;
  // The transitions into each state q: adj[adj_begin[q] .. adj_begin[q + 1]).
  std::vector<int32_t> adj, adj_begin(n + 1);
  auto index_heads = [&] {
    const int32_t m = static_cast<int32_t>(head.size());
    adj.resize(m);
    std::fill(adj_begin.begin(), adj_begin.end(), 0);
    for (int32_t t = 0; t < m; ++t) ++adj_begin[head[t] + 1];
    for (int32_t q = 0; q < n; ++q) adj_begin[q + 1] += adj_begin[q];
    std::vector<int32_t> fill(adj_begin.begin(), adj_begin.end() - 1);
    for (int32_t t = 0; t < m; ++t) adj[fill[head[t]]++] = t;
  };
  Refinable blocks;
  blocks.init(n);
  // Co-reachable states (those that reach an accepting one) to the front of set 0, accepting
  // ones first.
  int32_t reached = 0;
  auto reach = [&](int32_t q) {
    const int32_t i = blocks.loc[q];
    if (i >= reached) {
      blocks.elems[i] = blocks.elems[reached];
      blocks.loc[blocks.elems[i]] = i;
      blocks.elems[reached] = q;
      blocks.loc[q] = reached++;
    }
  };
  for (int32_t q = 0; q < n; ++q) {
    if (in.accepting[q]) reach(q);
  }
  const int32_t num_accepting = reached;
  index_heads();
  for (int32_t i = 0; i < reached; ++i) {
    const int32_t q = blocks.elems[i];
    for (int32_t j = adj_begin[q]; j < adj_begin[q + 1]; ++j) reach(tail[adj[j]]);
  }
  const int32_t live = reached;
  auto is_live = [&](int32_t q) { return blocks.loc[q] < live; };
  const int32_t base = a.num_states;
  a.rule_start[r] = base;
  auto add_state = [&](uint8_t accepting) {
    a.accepting.push_back(accepting);
    a.state_rule.push_back(r);
    ++a.num_states;
  };
  if (!is_live(0)) {  // the rule matches nothing
    add_state(0);
    edges.begin.push_back(static_cast<int32_t>(edges.label.size()));
    return;
  }
  {
    size_t k = 0;
    for (size_t t = 0; t < head.size(); ++t) {
      if (is_live(head[t])) {  // then its tail is live too
        tail[k] = tail[t];
        label[k] = label[t];
        head[k] = head[t];
        ++k;
      }
    }
    tail.resize(k);
    label.resize(k);
    head.resize(k);
  }
  const int32_t m = static_cast<int32_t>(tail.size());
  blocks.past[0] = live;
  std::vector<int32_t> marked(std::max(n, m) + 1, 0), touched;
  // Accepting states apart from the rest.
  marked[0] = num_accepting;
  touched.push_back(0);
  blocks.split(marked, touched);
  // Cords: transitions grouped by label (a counting sort, or a comparison sort where the
  // labels' range is much wider than the transitions: references to a few of many rules).
  Refinable cords;
  cords.init(m);
  if (m > 0) {
    const int32_t num_labels = *std::max_element(label.begin(), label.end()) + 1;
    if (num_labels <= 2 * m + 256) {
      std::vector<int32_t> fill(num_labels + 1, 0);
      for (int32_t t = 0; t < m; ++t) ++fill[label[t] + 1];
      for (int32_t l = 0; l < num_labels; ++l) fill[l + 1] += fill[l];
      for (int32_t t = 0; t < m; ++t) cords.elems[fill[label[t]]++] = t;
    } else {
      std::sort(cords.elems.begin(), cords.elems.end(),
                [&](int32_t x, int32_t y) { return label[x] < label[y]; });
    }
    cords.num_sets = 0;
    for (int32_t i = 0; i < m; ++i) {
      const int32_t t = cords.elems[i];
      if (i == 0 || label[t] != label[cords.elems[i - 1]]) {
        if (i > 0) cords.past[cords.num_sets - 1] = i;
        cords.first[cords.num_sets++] = i;
      }
      cords.set_of[t] = cords.num_sets - 1;
      cords.loc[t] = i;
    }
    cords.past[cords.num_sets - 1] = m;
  }
  index_heads();
  for (int32_t b = 1, c = 0; c < cords.num_sets; ++c) {
    for (int32_t i = cords.first[c]; i < cords.past[c]; ++i) {
      blocks.mark(tail[cords.elems[i]], marked, touched);
    }
    blocks.split(marked, touched);
    for (; b < blocks.num_sets; ++b) {
      for (int32_t i = blocks.first[b]; i < blocks.past[b]; ++i) {
        const int32_t q = blocks.elems[i];
        for (int32_t j = adj_begin[q]; j < adj_begin[q + 1]; ++j) {
          cords.mark(adj[j], marked, touched);
        }
      }
      cords.split(marked, touched);
    }
  }
  // One representative per block, and the live transitions of each state (still in label
  // order within a state: the compaction kept their order).
  const int32_t num_blocks = blocks.num_sets;
  std::vector<int32_t> rep(num_blocks, -1), new_id(num_blocks, -1), order;
  for (int32_t i = 0; i < live; ++i) {
    const int32_t q = blocks.elems[i];
    if (rep[blocks.set_of[q]] < 0) rep[blocks.set_of[q]] = q;
  }
  std::vector<int32_t> out_begin(n + 1, 0);
  for (int32_t t = 0; t < m; ++t) ++out_begin[tail[t] + 1];
  for (int32_t q = 0; q < n; ++q) out_begin[q + 1] += out_begin[q];
  new_id[blocks.set_of[0]] = 0;
  order.push_back(blocks.set_of[0]);
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t q = rep[order[k]];
    add_state(in.accepting[q]);
    for (int32_t t = out_begin[q]; t < out_begin[q + 1]; ++t) {
      const int32_t tb = blocks.set_of[head[t]];
      if (new_id[tb] < 0) {
        new_id[tb] = static_cast<int32_t>(order.size());
        order.push_back(tb);
      }
      edges.label.push_back(label[t]);
      edges.target.push_back(base + new_id[tb]);
    }
    edges.begin.push_back(static_cast<int32_t>(edges.label.size()));
  }
}

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
    Nfa nfa;
    int32_t s0 = 0, fin = 0;
    {
      NfaBuilder nb(grammar, limits, &budget, &classes);
      s0 = nb.new_state();
      DI_ASSIGN_OR_RETURN(fin, nb.build(rules[r].body, s0));
      nfa = nb.finish();
    }
    Expected<RuleDfa> dfa = internal_error("not built");
    if (nfa.num_states <= kBitsetNfaStates) {
      BitsetSubsetConstruction sc(nfa, classes, a.num_classes, fin);
      dfa = sc.run(s0, &budget, limits.max_states, &work, limits.max_subset_work);
    } else {
      SubsetConstruction sc(nfa, classes, a.num_classes, fin);
      dfa = sc.run(s0, &budget, limits.max_states, &work, limits.max_subset_work);
    }
    if (!dfa.ok()) return dfa.status().with_context("in rule '" + rules[r].name + "'");
    nfa = Nfa{};
    append_minimal(std::move(dfa.value()), r, a, edges);
  }
  a.subset_work = limits.max_subset_work - work;
  return Status::ok_status();
}

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

// Nullable rules: the start reaches acceptance through references to nullable rules.
void find_nullable_rules(Automaton& a, const Transitions& edges) {
  solve_null_states(a, a.rule_nullable, [&](auto&& fn) { edges.for_each_ref(a.num_classes, fn); });
}

struct Liveness {
  std::vector<uint8_t> live;        // per state: can reach acceptance
  std::vector<uint8_t> productive;  // per rule: can complete
};

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
  compute_byte_classes(grammar, a);
  Transitions edges;
  DI_TRY(compile_rules(grammar, limits, a, edges));
  find_nullable_rules(a, edges);
  const Liveness live = find_live_states(a, edges);
  if (!live.productive[a.root]) {
    return invalid_argument("the grammar matches no string (root rule '" + a.rule_names[a.root] +
                            "' can never complete)");
  }
  trim(a, edges, live);
  pack_rows(a, edges, live.live);
  first_and_follow(a);
  return a;
}

}  // namespace deepinfer::structured
