// Each rule's DFA by subset construction (automaton_stages.h).
#include <algorithm>
#include <bit>

#include "structured/automaton_stages.h"

namespace deepinfer::structured::automaton_stages {
namespace {

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
  std::vector<uint64_t> sets_;  // the subsets, words_ words each
  HashedIds ids_;               // subset id by hash
};

}  // namespace

Expected<RuleDfa> determinize(const RuleNfa& rule, const ClassLists& classes, int32_t num_classes,
                              int32_t* budget, int32_t max_states, int64_t* work,
                              int64_t max_work) {
  if (rule.nfa.num_states <= kBitsetNfaStates) {
    BitsetSubsetConstruction sc(rule.nfa, classes, num_classes, rule.final_state);
    return sc.run(rule.start, budget, max_states, work, max_work);
  }
  SubsetConstruction sc(rule.nfa, classes, num_classes, rule.final_state);
  return sc.run(rule.start, budget, max_states, work, max_work);
}

}  // namespace deepinfer::structured::automaton_stages
