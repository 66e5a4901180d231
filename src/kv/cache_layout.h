// CacheLayout: which KV cache groups a model needs, derived once from its ModelConfig.
//
// A group is a set of layers whose per-token data grows the same way, so one block table per
// sequence serves all of them (vLLM v1's "KV cache group"). DeepSeek-V4 (spec §3) needs:
//   window       every layer (main and MTP): the last W K=V rows, one row per source token;
//   compressed/m one group per compress ratio m: one row per m source tokens;
//   indexer/m    CSA layers: the lightning indexer's key rows, one per m source tokens;
//   state        every compressed layer: the compressor's running FP32 state, one live slot per
//                sequence, plus snapshots at block boundaries for prefix caching.
// Every group's block covers the same B source tokens (B = KvConfig::block_size, a multiple of
// every ratio), so the scheduler reasons in one token granularity and one prefix hash per block
// serves all groups. A compressed block therefore holds B/m rows per layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"

namespace deepinfer::kv {

enum class CacheKind : uint8_t { kWindow, kCompressed, kIndexer, kCompressorState };
std::string_view cache_kind_name(CacheKind kind);  // "window", "compressed", ...

struct KvConfig {
  int32_t block_size = 256;  // source tokens per block, every group; multiple of every ratio
  int32_t num_blocks = 0;    // pages in the one pool
  bool enable_prefix_caching = true;
  // Tokens that KvCoordinator::rollback may undo (speculative decoding): window blocks are kept
  // this many tokens longer than the window needs. Matches the CPU model's CacheOptions.
  int32_t max_rollback_tokens = 16;
};

struct GroupSpec {
  CacheKind kind = CacheKind::kWindow;
  int32_t ratio = 1;           // source tokens per row (window 1, compressed/indexer m, state 0)
  int32_t window = 0;          // kWindow: W rows needed behind the next token
  std::vector<int> layers;     // main layers 0..n-1, MTP blocks n+i
  int32_t rows_per_block = 0;  // per layer (state: 1 slot)
  int64_t row_elements = 0;    // per layer and row (state: FP32 floats of one slot, all layers)
  std::string name;            // "window", "compressed/4", "indexer/4", "state"
};

struct CacheLayout {
  int32_t block_size = 0;
  std::vector<GroupSpec> groups;
  int32_t state_group = -1;  // index of the kCompressorState group, -1 when none

  // One-line summary for logs: "B=256: window(44 layers) compressed/4(21) ...".
  std::string describe() const;
};

// Errors name the KvConfig field (block_size must be a positive multiple of every ratio,
// num_blocks positive, ...) or the config file when the model has no layers.
Expected<CacheLayout> make_cache_layout(const io::ModelConfig& model, const KvConfig& config);

}  // namespace deepinfer::kv
