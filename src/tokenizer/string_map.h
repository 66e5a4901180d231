// StringIdMap: string_view -> int32 id, open addressing (the keys live elsewhere and must
// outlive the map). Used for the vocabulary while loading and for token_to_id.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer::detail {

inline uint64_t hash_bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  if (n) std::memcpy(&w, p, n);
  h = (h ^ w) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

class StringIdMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = 0;
  }
  // Inserts or replaces.
  void set(std::string_view key, int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot& s = locate(key, hash_bytes(key));
    if (s.id < 0) ++size_;
    s = Slot{key.data(), static_cast<uint32_t>(key.size()), id,
             static_cast<uint32_t>(hash_bytes(key))};
  }
  // Inserts only when absent.
  void insert(std::string_view key, int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const uint64_t h = hash_bytes(key);
    Slot& s = locate(key, h);
    if (s.id >= 0) return;
    ++size_;
    s = Slot{key.data(), static_cast<uint32_t>(key.size()), id, static_cast<uint32_t>(h)};
  }
  // -1 when absent.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    return const_cast<StringIdMap*>(this)->locate(key, hash_bytes(key)).id;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    const char* data = nullptr;
    uint32_t len = 0;
    int32_t id = -1;
    uint32_t hash = 0;
  };
  Slot& locate(std::string_view key, uint64_t h) {
    size_t i = h & mask_;
    const uint32_t h32 = static_cast<uint32_t>(h);
    while (true) {
      Slot& s = slots_[i];
      if (s.id < 0) return s;
      if (s.hash == h32 && s.len == key.size() && std::memcmp(s.data, key.data(), key.size()) == 0)
        return s;
      i = (i + 1) & mask_;
    }
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    reserve(old.empty() ? 8 : old.size());
    for (const Slot& s : old) {
      if (s.id >= 0) set(std::string_view(s.data, s.len), s.id);
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

}  // namespace deepinfer::tokenizer::detail
