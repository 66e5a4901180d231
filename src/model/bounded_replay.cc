// Bounded replay's family-neutral rules (see bounded_replay.h).
#include "model/bounded_replay.h"

#include <algorithm>
#include <string>

namespace deepinfer::model {

size_t first_upper_layer(const io::ModelConfig& c) {
  if (c.family != io::ModelFamily::kDeepseekV41) return 0;
  size_t first = 0;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    if (c.layers[l].role == io::Csa2Role::kFull) first = l + 1;
  }
  return first;
}

int64_t min_keep_tokens(const io::ModelConfig& c, int64_t max_draft) {
  return c.sliding_window + std::max<int64_t>(0, max_draft);
}

Status bounded_replay_supported(const io::ModelConfig& c) {
  if (c.family != io::ModelFamily::kDeepseekV41) {
    // Every V4 compressed layer owns its compressor: there is no upper half that only keeps a
    // window, so the knob would silently do nothing.
    return invalid_argument(
        "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact (SWA bounded replay) applies to "
        "DeepSeek-V4.1 models only, and " + c.source +
        " is DeepSeek-V4: unset it (or EngineOptions::prefill_truncation_mode = \"none\")");
  }
  const size_t first = first_upper_layer(c);
  if (first == 0) {
    return unimplemented("SWA bounded replay: " + c.source +
                         " has no KV-source layer (nothing below the upper layers)");
  }
  for (int l : c.engram.layer_ids) {
    if (static_cast<size_t>(l) >= first) {
      return unimplemented("SWA bounded replay: Engram layer " + std::to_string(l) +
                           " lies above the last KV-source layer " + std::to_string(first - 1) +
                           " of " + c.source + " (its n-gram look-back would cross skipped rows)");
    }
  }
  return {};
}

Status check_bounded_replay(const io::ModelConfig& c, int64_t keep, int64_t max_draft) {
  DI_TRY(bounded_replay_supported(c));
  const int64_t need = min_keep_tokens(c, max_draft);
  if (keep < need) {
    return invalid_argument(
        "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS (EngineOptions::prefill_keep_tokens) is " +
        std::to_string(keep) + ", below the minimum " + std::to_string(need) + " for " +
        c.source + ": the sliding window (" + std::to_string(c.sliding_window) +
        ") plus the longest draft (" + std::to_string(std::max<int64_t>(0, max_draft)) +
        " speculative tokens) must be kept");
  }
  return {};
}

int64_t upper_exact_keep(const io::ModelConfig& c) {
  const size_t first = first_upper_layer(c);
  const int64_t n_upper = static_cast<int64_t>(c.layers.size() - std::min(first, c.layers.size()));
  return n_upper * (c.sliding_window - 1) + 1;
}

}  // namespace deepinfer::model
