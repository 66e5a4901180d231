// Rank placement for attention data parallelism: which rank a new request goes to
// (place_request: the longest cached prefix among ranks near the least load, else the least
// loaded rank).
//
// Each data-parallel rank owns whole requests (its own scheduler, KV pages and prefix cache), so
// a request stays on the rank it was given. The policy is the least loaded rank, where load is,
// in this order: the rank's live samples (waiting, running, or submitted and not yet scheduled;
// n > 1 counts n), then its KV blocks in use, then the rank index (ties go to the lowest rank).
// Deterministic: the same loads always give the same rank, so a replayed request stream lands
// the same way. Live samples come first because they are exact at submit time (several requests
// submitted between two steps each raise their rank's count at once), while KV use is only
// known after a step, and a queue that is long but not yet admitted holds no KV blocks.
#pragma once

#include <cstdint>
#include <span>

namespace deepinfer::sched {

struct RankLoad {
  int64_t live_samples = 0;
  int64_t kv_blocks_in_use = 0;
  // Tokens of the new request's prompt the rank's prefix cache holds (0: none, or unknown).
  int64_t prefix_hit_tokens = 0;
};

// The least loaded rank; `loads` is indexed by rank and not empty.
int least_loaded_rank(std::span<const RankLoad> loads);

// Prefix-aware placement (SGLang's router and vLLM's DP load balancing call it cache-aware): the
// rank whose prefix cache holds the longest part of the request's prompt, among the ranks whose
// live samples are at most the least loaded rank's + max(2, a quarter of it), so a prompt that
// shares a prefix with earlier ones (a system prompt, a conversation's earlier turns) reuses it
// instead of computing it again on another rank, without piling every such request on one
// rank. Ties, and no hit on any eligible rank, go by least_loaded_rank's order. Deterministic.
int place_request(std::span<const RankLoad> loads);

}  // namespace deepinfer::sched
