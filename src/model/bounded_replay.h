// SWA bounded replay (spec §6.3; docs/bounded_replay.md): what the runtime and the front ends
// need to know about it without naming a model family.
//
// DeepSeek-V4.1's layers above the last KV-source layer ("upper" layers: 21-39 of V4.1-Flash)
// own only a window; they read the compressed KV, index keys and picks of the sources below.
//   decoder side  a prefill runs the upper layers (and the DSpark drafter's context) only on the
//                 last `keep` tokens of the prompt (SequenceSpan::upper_skip); the lower layers
//                 run on every token, so the compressed KV is exact;
//   encoder side  a prefix hit whose snapshot kept only its compressed part
//                 (SequenceCache::compressed_part) recomputes only its last `keep` tokens
//                 (Model::window_replay_state) instead of the whole prefix.
// Both are approximations where a window would have reached before the replayed rows; exactness
// horizons: upper_exact_from() below.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "io/model_config.h"

namespace deepinfer::model {

// The first main layer above the last KV-source (Full) layer: layers.size() when the last layer
// is a source, 0 for families without shared compressed KV (V4).
size_t first_upper_layer(const io::ModelConfig& c);

// The smallest keep that covers the window plus the longest rollback a draft can cause:
// sliding_window + max_draft.
int64_t min_keep_tokens(const io::ModelConfig& c, int64_t max_draft);

// Whether the model can run bounded replay at all: V4.1 (InvalidArgument otherwise, naming the
// knob), with a KV source, every Engram layer at or below the last source (an Engram look-back
// would cross skipped rows).
Status bounded_replay_supported(const io::ModelConfig& c);
// ... and with `keep` kept tokens and drafts of up to max_draft tokens: keep >= min_keep_tokens
// (InvalidArgument naming DEEPINFER_YOCO_PREFILL_KEEP_TOKENS and the minimum).
Status check_bounded_replay(const io::ModelConfig& c, int64_t keep, int64_t max_draft);

// Decoder side: the first prompt position the upper layers run on when a prefill ends at
// prefill_end (max(0, prefill_end - keep)), and how many leading rows of a span of `count`
// rows from position `pos` skip them.
inline int64_t upper_kept_from(int64_t prefill_end, int64_t keep) {
  return prefill_end > keep ? prefill_end - keep : 0;
}
inline int64_t upper_skip_rows(int64_t pos, int64_t count, int64_t kept_from) {
  return kept_from <= pos ? 0 : (kept_from >= pos + count ? count : kept_from - pos);
}

// The encoder side replays a hit of h tokens from upper_kept_from(h, keep) too: the replay
// compresses nothing, so where it starts needs no alignment (only h must close every group).

// Receptive field: when the upper layers run only from position s, upper layer j (0 = the first)
// reads exact inputs from position s + j·(W − 1) on, so the final streams (and the logits) of
// positions >= s + n_upper·(W − 1) are bitwise those of the full prefill. A keep of at least
// n_upper·(W − 1) + 1 therefore changes nothing (V4.1-Flash: 19·127 + 1 = 2414 tokens).
int64_t upper_exact_keep(const io::ModelConfig& c);

}  // namespace deepinfer::model
