// Block hashes: a 64-bit multiply-xorshift mix per token (splitmix64 finaliser), seeded by the
// parent. Fast enough that hashing a long prompt is noise next to scheduling it.
#include "kv/block_hash.h"

#include <algorithm>

namespace deepinfer::kv {
namespace {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent ^ (0x9e3779b97f4a7c15ull * (tokens.size() + 1)));
  for (const int32_t t : tokens) {
    h = mix64(h + 0x9e3779b97f4a7c15ull + static_cast<uint32_t>(t));
  }
  return h;
}

void extend_block_hashes(std::vector<uint64_t>& hashes, std::span<const int32_t> tokens, int64_t n,
                         int32_t block_size) {
  n = std::min<int64_t>(n, static_cast<int64_t>(tokens.size()));
  const int64_t full = n / block_size;
  for (auto i = static_cast<int64_t>(hashes.size()); i < full; ++i) {
    const uint64_t parent = i == 0 ? kRootBlockHash : hashes[static_cast<size_t>(i - 1)];
    hashes.push_back(hash_block(parent, tokens.subspan(static_cast<size_t>(i * block_size),
                                                       static_cast<size_t>(block_size))));
  }
}

}  // namespace deepinfer::kv
