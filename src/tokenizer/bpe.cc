// The BPE merge loops (see bpe.h).
#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>

namespace deepinfer::tokenizer {

void MergeTable::build(
    const std::vector<std::pair<uint64_t, std::pair<int32_t, int32_t>>>& entries) {
  size_t cap = 16;
  while (cap < entries.size() * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  shift_ = 64 - __builtin_ctzll(cap);
  size_ = 0;
  for (const auto& [k, v] : entries) {
    size_t slot = (k * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[slot].key != kEmpty && slots_[slot].key != k) slot = (slot + 1) & mask_;
    if (slots_[slot].key == kEmpty) ++size_;
    slots_[slot] = Slot{k, v.first, v.second};  // a later duplicate replaces, like HF's HashMap
  }
}

void BpeModel::initial_symbols(std::string_view word, BpeScratch& s) const {
  s.ids.clear();
  bool prev_unk = false;
  for (unsigned char b : word) {
    int32_t id = byte_ids_[b];
    if (id >= 0) {
      s.ids.push_back(id);
      prev_unk = false;
    } else if (unk_id_ >= 0) {
      if (!(fuse_unk_ && prev_unk)) s.ids.push_back(unk_id_);
      prev_unk = true;
    }
  }
}

void BpeModel::encode_word(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    auto it = whole_words_.find(std::string(word));
    if (it != whole_words_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  initial_symbols(word, s);
  if (s.ids.size() <= 1) {
    out.insert(out.end(), s.ids.begin(), s.ids.end());
    return;
  }
  if (s.ids.size() <= 256) {
    merge_small(s, out);
  } else {
    merge_heap(s, out);
  }
}

void BpeModel::merge_small(BpeScratch& s, std::vector<int32_t>& out) const {
  auto& ids = s.ids;
  size_t n = ids.size();
  s.ranks.resize(n);
  s.merged.resize(n);
  int32_t* rank = s.ranks.data();
  int32_t* merged = s.merged.data();
  for (size_t k = 0; k + 1 < n; ++k) {
    if (!merges_.find(ids[k], ids[k + 1], &rank[k], &merged[k])) rank[k] = INT_MAX;
  }
  while (n > 1) {
    size_t best = 0;
    int32_t best_rank = rank[0];
    for (size_t k = 1; k + 1 < n; ++k) {
      if (rank[k] < best_rank) {
        best_rank = rank[k];
        best = k;
      }
    }
    if (best_rank == INT_MAX) break;
    ids[best] = merged[best];
    // Remove symbol best+1 and pair best+1 (pair best is recomputed below).
    for (size_t k = best + 1; k + 1 < n; ++k) {
      ids[k] = ids[k + 1];
      rank[k] = rank[k + 1];
      merged[k] = merged[k + 1];
    }
    --n;
    if (best > 0 && !merges_.find(ids[best - 1], ids[best], &rank[best - 1], &merged[best - 1])) {
      rank[best - 1] = INT_MAX;
    }
    if (best + 1 < n) {
      if (!merges_.find(ids[best], ids[best + 1], &rank[best], &merged[best])) rank[best] = INT_MAX;
    }
  }
  out.insert(out.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

void BpeModel::merge_heap(BpeScratch& s, std::vector<int32_t>& out) const {
  const size_t n = s.ids.size();
  auto& syms = s.syms;
  syms.resize(n);
  for (size_t k = 0; k < n; ++k) {
    syms[k] = {s.ids[k], static_cast<int32_t>(k) - 1, k + 1 < n ? static_cast<int32_t>(k + 1) : -1};
  }
  // Min-heap on (rank, pos).
  auto later = [](const BpeScratch::Entry& a, const BpeScratch::Entry& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto& heap = s.heap;
  heap.clear();
  auto push = [&](int32_t pos) {
    int32_t next = syms[pos].next;
    if (next < 0) return;
    int32_t rank, merged;
    if (merges_.find(syms[pos].id, syms[next].id, &rank, &merged)) {
      heap.push_back({rank, pos, merged});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (size_t k = 0; k + 1 < n; ++k) push(static_cast<int32_t>(k));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    BpeScratch::Entry top = heap.back();
    heap.pop_back();
    auto& sym = syms[top.pos];
    if (sym.id < 0 || sym.next < 0) continue;  // removed, or now the last symbol
    int32_t rank, merged;
    if (!merges_.find(sym.id, syms[sym.next].id, &rank, &merged) || merged != top.merged) continue;
    // Merge `next` into `sym`.
    int32_t next = sym.next;
    sym.id = merged;
    sym.next = syms[next].next;
    syms[next].id = -1;
    if (sym.next >= 0) syms[sym.next].prev = top.pos;
    if (sym.prev >= 0) push(sym.prev);
    push(top.pos);
  }
  for (int32_t k = 0; k >= 0; k = syms[k].next) out.push_back(syms[k].id);
}

}  // namespace deepinfer::tokenizer
