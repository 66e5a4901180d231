// Per-thread state for encode(): a word -> ids cache and scratch buffers.
//
// Each thread keeps its own cache per Tokenizer instance (keyed by the instance's uid), so the
// const encode() needs no lock. A cache holds at most kMaxEntries words (of at most
// kMaxWordBytes bytes each), grows from a small index, and is cleared when full; a thread
// keeps the caches of its last kMaxInstances tokenizers (tokenizer.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/string_map.h"

namespace deepinfer::tokenizer::detail {

class WordCache {
 public:
  static constexpr size_t kMaxEntries = 1 << 17;
  static constexpr size_t kMaxWordBytes = 256;

  WordCache() { clear(); }

  // The cached ids of `word` (n set), or nullptr.
  const int32_t* find(std::string_view word, uint64_t hash, uint32_t* n) const {
    size_t slot = hash & mask_;
    while (true) {
      const Slot& s = slots_[slot];
      if (s.val_len == kEmpty) return nullptr;
      if (s.hash == hash && s.key_len == word.size() &&
          std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
        *n = s.val_len;
        return vals_.data() + s.val_off;
      }
      slot = (slot + 1) & mask_;
    }
  }

  void insert(std::string_view word, uint64_t hash, const int32_t* ids, uint32_t n) {
    if (word.size() > kMaxWordBytes) return;
    if (count_ >= kMaxEntries) clear();
    if ((count_ + 1) * 2 > slots_.size()) grow();
    size_t slot = hash & mask_;
    while (slots_[slot].val_len != kEmpty) slot = (slot + 1) & mask_;
    slots_[slot] = Slot{hash, static_cast<uint32_t>(keys_.size()),
                        static_cast<uint32_t>(word.size()), static_cast<uint32_t>(vals_.size()), n};
    keys_.append(word);
    vals_.insert(vals_.end(), ids, ids + n);
    ++count_;
  }

  void clear() {
    slots_.assign(kInitialSlots, Slot{});
    mask_ = slots_.size() - 1;
    keys_.clear();
    vals_.clear();
    count_ = 0;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  static constexpr size_t kInitialSlots = 4096;
  void grow() {  // doubles the index; keys and values stay where they are
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.val_len == kEmpty) continue;
      size_t slot = s.hash & mask_;
      while (slots_[slot].val_len != kEmpty) slot = (slot + 1) & mask_;
      slots_[slot] = s;
    }
  }
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0, val_off = 0, val_len = kEmpty;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string keys_;
  std::vector<int32_t> vals_;
  size_t count_ = 0;
};

struct ThreadState {
  uint64_t uid = 0;
  WordCache cache;
  PreTokenizerScratch pre;
  BpeScratch bpe;
  std::vector<Segment> segments;
  std::vector<ByteRange> pieces;
  std::string repaired;
};

// The calling thread's state for the tokenizer instance `uid`.
ThreadState& thread_state(uint64_t uid);

}  // namespace deepinfer::tokenizer::detail
