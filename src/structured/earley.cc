// Earley recogniser over the automaton; see earley.h.
#include "structured/earley.h"

namespace deepinfer::structured {

void Chart::reset() {
  items_.clear();
  set_begin_.assign(1, 0);
  popped_.clear();
  seed_rule_ = -1;
  set_begin_.push_back(0);
  popped_.push_back(0);
  add(a_->rule_start[a_->root], 0);
  close();
}

void Chart::reset_seeded(int32_t state) {
  items_.clear();
  set_begin_.assign(1, 0);
  popped_.clear();
  seed_rule_ = a_->state_rule[state];
  set_begin_.push_back(0);
  popped_.push_back(0);
  add(state, kSeedOrigin);
  close();
}

void Chart::add(int32_t state, int32_t origin) {
  // Sets are usually small (tens of items) and a linear scan wins; ambiguous grammars can
  // grow sets with many origins, so past kLinearLimit items an open-addressing table is used.
  constexpr size_t kLinearLimit = 32;
  const size_t b = set_begin_[num_sets() - 1];
  const size_t n = items_.size() - b;
  const uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) | static_cast<uint32_t>(origin);
  if (n < kLinearLimit) {
    for (size_t i = b; i < items_.size(); ++i) {
      if (items_[i].state == state && items_[i].origin == origin) return;
    }
  } else {
    if (n == kLinearLimit || n * 2 >= table_.size()) {
      // (Re)build from the set's items: the set just crossed the limit or the table is full.
      size_t cap = 64;
      while (cap < n * 4) cap *= 2;
      table_.assign(cap, kEmptySlot);
      for (size_t i = b; i < items_.size(); ++i) {
        insert_key((static_cast<uint64_t>(static_cast<uint32_t>(items_[i].state)) << 32) |
                   static_cast<uint32_t>(items_[i].origin));
      }
    }
    if (!insert_key(key)) return;
  }
  items_.push_back(Item{state, origin});
}

bool Chart::insert_key(uint64_t key) {
  const size_t mask = table_.size() - 1;
  size_t h = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;
  while (table_[h] != kEmptySlot) {
    if (table_[h] == key) return false;
    h = (h + 1) & mask;
  }
  table_[h] = key;
  return true;
}

bool Chart::advance(uint8_t byte) {
  const size_t prev_begin = set_begin_[num_sets() - 1];
  const size_t prev_end = items_.size();
  set_begin_.push_back(static_cast<uint32_t>(prev_end));
  popped_.push_back(0);
  // The new set is the last one now; scan the previous set into it.
  for (size_t i = prev_begin; i < prev_end; ++i) {
    int32_t t = a_->next(items_[i].state, byte);
    if (t >= 0) add(t, items_[i].origin);
  }
  if (items_.size() == prev_end) {
    set_begin_.pop_back();
    popped_.pop_back();
    return false;
  }
  close();
  return true;
}

void Chart::close() {
  const int32_t cur = static_cast<int32_t>(num_sets() - 1);
  const size_t begin = set_begin_[cur];
  for (size_t i = begin; i < items_.size(); ++i) {
    const Item it = items_[i];
    for (int32_t k = a_->ref_begin[it.state]; k < a_->ref_begin[it.state + 1]; ++k) {
      const int32_t rule = a_->ref_rule[k];
      add(a_->rule_start[rule], cur);
      if (a_->rule_nullable[rule]) add(a_->ref_target[k], it.origin);
    }
    if (!a_->accepting[it.state]) continue;
    const int32_t rule = a_->state_rule[it.state];
    if (it.origin == kSeedOrigin) {
      popped_[cur] = 1;  // the seed's rule ends here; its callers are unknown
      continue;
    }
    if (it.origin == cur) continue;  // empty completion: handled by the nullable shortcut
    const size_t ob = set_begin_[it.origin], oe = set_begin_[it.origin + 1];
    for (size_t j = ob; j < oe; ++j) {
      const Item p = items_[j];
      for (int32_t k = a_->ref_begin[p.state]; k < a_->ref_begin[p.state + 1]; ++k) {
        if (a_->ref_rule[k] == rule) add(a_->ref_target[k], p.origin);
      }
    }
  }
  set_begin_.back() = static_cast<uint32_t>(items_.size());
}

bool Chart::can_complete() const {
  for (const Item& it : last_set()) {
    if (it.origin == 0 && a_->accepting[it.state] && a_->state_rule[it.state] == a_->root &&
        seed_rule_ < 0) {
      return true;
    }
  }
  return false;
}

ByteSet Chart::next_bytes() const {
  ByteSet out;
  for (const Item& it : last_set()) out |= a_->scan_bytes[it.state];
  return out;
}

}  // namespace deepinfer::structured
