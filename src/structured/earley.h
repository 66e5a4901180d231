// Chart: an Earley recogniser over the automaton's per-rule DFAs, one item set per input byte.
//
// Items are (DFA state, origin set). All sets live in one flat arena, so pushing a byte is an
// append and rolling back is a truncate: the matcher's rollback and the mask computation's
// trie walk (try a token's bytes, back off to the shared prefix, try the next) both rely on
// that. Every state in the automaton can reach acceptance, so a non-empty set means the input
// so far is a valid prefix.
//
// "Seed" mode starts from a single state instead of the root, with an origin before set 0
// (kSeedOrigin: the caller is unknown), and records where the seed's rule may complete (a
// "pop": what follows then depends on the caller). Rules predicted inside set 0 keep their
// own origin 0, so a completion of the seed's rule is never mistaken for theirs. The
// token-mask precompute uses this to classify tokens context-independently.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "structured/automaton.h"

namespace deepinfer::structured {

struct Item {
  int32_t state;
  int32_t origin;
};

inline constexpr int32_t kSeedOrigin = -1;

class Chart {
 public:
  explicit Chart(const Automaton* automaton) : a_(automaton) {}

  // Set 0 = closure of the root rule's start state.
  void reset();
  // Set 0 = closure of {state, origin 0}; pops of state's rule at origin 0 are recorded.
  void reset_seeded(int32_t state);

  // Scans byte `b` into a new set; returns false (and adds nothing) if no item accepts it.
  bool advance(uint8_t b);
  // Keeps the first `num_sets` sets.
  void truncate(size_t num_sets) {
    items_.resize(set_begin_[num_sets]);
    set_begin_.resize(num_sets + 1);
    popped_.resize(num_sets);
  }
  size_t num_sets() const { return set_begin_.size() - 1; }
  std::span<const Item> set(size_t k) const {
    return {items_.data() + set_begin_[k], items_.data() + set_begin_[k + 1]};
  }
  std::span<const Item> last_set() const { return set(num_sets() - 1); }
  // The root rule has completed over the whole input (EOS may follow).
  bool can_complete() const;
  // Seed mode: the seed's rule may have completed in the closure of set k.
  bool popped(size_t k) const { return popped_[k] != 0; }
  // Bytes that some item of the last set can scan.
  ByteSet next_bytes() const;

 private:
  void add(int32_t state, int32_t origin);
  bool insert_key(uint64_t key);  // false if present
  void close();

  static constexpr uint64_t kEmptySlot = ~uint64_t{0};

  const Automaton* a_;
  std::vector<Item> items_;
  std::vector<uint32_t> set_begin_{0};
  std::vector<uint8_t> popped_;
  std::vector<uint64_t> table_;  // dedup table of the set being built, once it is large
  int32_t seed_rule_ = -1;
};

}  // namespace deepinfer::structured
