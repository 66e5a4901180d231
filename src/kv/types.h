// Plain ids and tables shared by the KV bookkeeping and its users (scheduler, model runner).
//
// A block id names one page of the engine's single KV pool; what a page holds (window rows,
// compressed rows, indexer keys or a compressor-state snapshot) depends on which group's table
// lists it. Tables are plain vectors so a step plan can be copied to another thread or device
// without touching the bookkeeping that produced it.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::kv {

using BlockId = int32_t;
using SeqId = int64_t;
inline constexpr BlockId kNullBlock = -1;

// The live blocks of one sequence in one group. ids[j] covers logical block first_block + j,
// i.e. source tokens [(first_block + j) * B, (first_block + j + 1) * B). Logical blocks below
// first_block have been released (they fell out of the sliding window, or a state snapshot was
// handed to the prefix cache) and must not be read.
struct BlockTable {
  int64_t first_block = 0;
  std::vector<BlockId> ids;
  bool operator==(const BlockTable&) const = default;
};

// Every group's table for one sequence, in CacheLayout::groups order, plus the sequence's live
// compressor-state slot (kNullBlock when the model has no compressed layer).
struct SeqTables {
  std::vector<BlockTable> groups;
  BlockId state_slot = kNullBlock;
};

}  // namespace deepinfer::kv
