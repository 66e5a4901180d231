// Chained block hashes for prefix caching (vLLM v1 hash_block_tokens): the hash of block i
// covers block i's token ids and, through the parent hash, every token before it, so equal
// hashes mean equal prefixes (up to 64-bit collisions; see docs/engine.md). Only full blocks are
// hashed: a partial block is still being written and cannot be shared.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::kv {

inline constexpr uint64_t kRootBlockHash = 0x6a09e667f3bcc908ull;  // parent of block 0

uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens);

// Appends to `hashes` the hashes of every full block of tokens[0, n) not hashed yet.
void extend_block_hashes(std::vector<uint64_t>& hashes, std::span<const int32_t> tokens, int64_t n,
                         int32_t block_size);

}  // namespace deepinfer::kv
