// The byte-level BPE model: merge ranks keyed by the pair of ids, and the merge loop.
//
// Words arrive as raw bytes (the ByteLevel byte->char mapping is folded into the vocabulary at
// load time), start as one symbol per byte and merge like Hugging Face's BPE::merge_word: the
// pair with the lowest rank first, the leftmost of equal pairs first. Short words use an
// array scan (no allocation beyond the scratch); long ones a heap with lazy invalidation
// (same result, O(n log n)). A byte whose single-char token is missing from the vocabulary
// becomes the unk token if there is one (fused with a preceding unk when fuse_unk) and is
// dropped otherwise, as HF does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deepinfer::tokenizer {

// Open-addressing map (id_a, id_b) -> (rank, merged id), built once, read-only afterwards.
class MergeTable {
 public:
  void build(const std::vector<std::pair<uint64_t, std::pair<int32_t, int32_t>>>& entries);
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Returns false when the pair has no merge.
  bool find(int32_t a, int32_t b, int32_t* rank, int32_t* merged) const {
    const uint64_t k = key(a, b);
    size_t slot = (k * 0x9E3779B97F4A7C15ull) >> shift_;
    while (true) {
      const Slot& s = slots_[slot];
      if (s.key == k) {
        *rank = s.rank;
        *merged = s.merged;
        return true;
      }
      if (s.key == kEmpty) return false;
      slot = (slot + 1) & mask_;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
  int shift_ = 64;
};

struct BpeScratch {
  std::vector<int32_t> ids, ranks, merged;
  struct Sym {
    int32_t id, prev, next;
  };
  std::vector<Sym> syms;
  struct Entry {
    int32_t rank, pos, merged;
  };
  std::vector<Entry> heap;
};

class BpeModel {
 public:
  // byte_ids[b]: id of the single-byte token for byte b, or -1.
  BpeModel() {
    for (auto& v : byte_ids_) v = -1;
  }

  void set_byte_id(uint8_t b, int32_t id) { byte_ids_[b] = id; }
  MergeTable& merges() { return merges_; }
  const MergeTable& merges() const { return merges_; }
  void set_unk(int32_t unk, bool fuse) {
    unk_id_ = unk;
    fuse_unk_ = fuse;
  }
  // ignore_merges: a word that is a whole vocabulary entry (as bytes) maps to it directly.
  void set_ignore_merges(std::unordered_map<std::string, int32_t> bytes_to_id) {
    ignore_merges_ = true;
    whole_words_ = std::move(bytes_to_id);
  }

  // Appends the ids of `word` (raw bytes) to `out`.
  void encode_word(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;

  // The two merge loops, public for the tests that check they agree.
  void merge_small(BpeScratch& s, std::vector<int32_t>& out) const;
  void merge_heap(BpeScratch& s, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view word, BpeScratch& s) const;

 private:
  int32_t byte_ids_[256];
  MergeTable merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int32_t> whole_words_;
};

}  // namespace deepinfer::tokenizer
