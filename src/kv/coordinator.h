// KvCoordinator: the one entry point to KV bookkeeping (vLLM v1 kv_cache_coordinator.py +
// kv_cache_manager.py). It owns the pool, one manager per cache group, and each sequence's
// blocks in every group; it answers "how many blocks does growing this sequence by N tokens
// cost", grows all groups or none, publishes full blocks to the prefix cache, rolls back, frees,
// and hands out plain block tables.
//
// Token accounting: a sequence's length is the number of source tokens whose KV the runner has
// written or will write in steps already planned. Prefix hashes cover only tokens the caller
// passes as known (prompt and accepted outputs, never speculative drafts), so a rollback never
// needs to un-publish a block: rolling back below the published length is refused.
//
// Not thread-safe: the engine loop owns it and calls it between steps.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"
#include "kv/block_pool.h"
#include "kv/cache_layout.h"
#include "kv/group_manager.h"
#include "kv/types.h"

namespace deepinfer::kv {

struct PrefixCacheStats {
  int64_t queries = 0;        // sequences started
  int64_t query_tokens = 0;   // their known tokens at start
  int64_t hit_tokens = 0;     // tokens taken from the cache = prefill tokens saved
  int64_t hit_sequences = 0;  // starts with a non-empty hit
  double hit_rate() const {
    return query_tokens == 0 ? 0.0
                             : static_cast<double>(hit_tokens) / static_cast<double>(query_tokens);
  }
};

class KvCoordinator {
 public:
  static Expected<KvCoordinator> create(const io::ModelConfig& model, const KvConfig& config);
  KvCoordinator(CacheLayout layout, const KvConfig& config);
  KvCoordinator(KvCoordinator&&) noexcept = default;
  KvCoordinator& operator=(KvCoordinator&&) noexcept = default;

  const CacheLayout& layout() const { return layout_; }
  const KvConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  const BlockPool& pool() const { return *pool_; }
  int32_t num_free_blocks() const { return pool_->num_free(); }
  const PrefixCacheStats& prefix_stats() const { return stats_; }

  // Longest reusable prefix of `tokens`, in tokens: a multiple of the block size, below
  // tokens.size() (the last token is always computed, its logits are needed), and such that
  // every group finds what resuming there needs. 0 without prefix caching. No side effects.
  int64_t find_prefix_hit(std::span<const int32_t> tokens) const;
  // The same in two halves, for callers that ask several coordinators of one block size about
  // one prompt (data-parallel placement): the block hashes find_prefix_hit looks up (none
  // without prefix caching), made once, and the hit they give here.
  std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens) const;
  int64_t find_prefix_hit(std::span<const uint64_t> hashes) const;

  // Upper bound on the blocks one sequence of `len` tokens holds at its peak when computed in
  // chunks of at most `chunk` tokens, without any prefix hit. A sequence needing more than the
  // pool holds can never run.
  int64_t peak_blocks(int64_t len, int64_t chunk) const;

  // Starts sequence `id`: takes tokens [0, num_hit) from the prefix cache (num_hit from
  // find_prefix_hit, or 0) and room for num_new more tokens. All-or-nothing: false, with nothing
  // changed, when the pool lacks blocks. `tokens` are the known tokens (prompt, plus outputs
  // kept across a preemption).
  bool start(SeqId id, std::span<const int32_t> tokens, int64_t num_hit, int64_t num_new);
  // Grows a started sequence by num_new tokens. All-or-nothing like start (blocks the window or
  // state no longer needs are released either way; that never hurts).
  bool grow(SeqId id, std::span<const int32_t> known_tokens, int64_t num_new);
  // Undoes the last k tokens (rejected speculative tokens) in every group.
  Status rollback(SeqId id, int64_t k);
  // Finish, abort or preemption: every block goes back; published ones stay in the prefix cache.
  // `known`: the sequence's known tokens (prompt and accepted outputs), whose full blocks are
  // published first: the last blocks of a request are known only once it ends, and a
  // follow-up request (a chat's next turn) resumes from them.
  void free(SeqId id, std::span<const int32_t> known = {});

  bool contains(SeqId id) const { return seqs_.count(id) != 0; }
  int64_t num_tokens(SeqId id) const;
  SeqTables tables(SeqId id) const;
  // Appends to `out` instead of returning, so a planner can reuse its buffers.
  void append_tables(SeqId id, SeqTables& out) const;
  // After a start with a hit, until the next grow: the snapshot block the runner copies into
  // the live compressor-state slot before computing. kNullBlock otherwise.
  BlockId state_restore_block(SeqId id) const;

  // Empties the prefix cache (vLLM's reset_prefix_cache): every cached block forgets its
  // hash, so no later sequence hits it. FailedPrecondition while a sequence holds blocks. The
  // hit counters (prefix_stats) are kept.
  Status reset_prefix_cache();

  // Recounts every reference held by every sequence against the pool (tests).
  Status check_consistency() const;

 private:
  struct Seq {
    int64_t len = 0;
    std::vector<SeqBlocks> groups;
    std::vector<uint64_t> hashes;  // chain hashes of known full blocks
    BlockId restore = kNullBlock;
  };
  void publish(Seq& s, std::span<const int32_t> known);

  CacheLayout layout_;
  KvConfig config_;
  std::unique_ptr<BlockPool> pool_;  // heap: managers keep a pointer across moves
  std::vector<std::unique_ptr<GroupManager>> managers_;
  std::unordered_map<SeqId, Seq> seqs_;
  PrefixCacheStats stats_;
};

}  // namespace deepinfer::kv
