// EngineCore and SWA bounded replay (docs/bounded_replay.md; model/bounded_replay.h): resolving
// the knobs against the model, which requests skip rows in the upper layers, and serving a
// prefix hit whose snapshot kept only its compressed part by recomputing its last window.
//
// Exactness, by construction (tests/unit/runtime/replay_engine_test.cc):
//   * a prefill of at most `keep` tokens skips nothing, and a hit of at most `keep` tokens is
//     replayed from position 0: both equal the engine without bounded replay, bit for bit;
//   * a snapshot whose upper layers skipped rows (SequenceCache::upper_from) restores its
//     windows only for a request that skips at least as many (snapshot_serves); otherwise only
//     its compressed part (exact: the lower layers always run every token) is used, with a
//     window replay;
//   * prompt logprobs (every row's logits) and hidden-reading drafters never skip.
// Beyond that the skipped rows are an approximation (the first kept rows see a truncated window,
// compounding over the layers; model/bounded_replay.h upper_exact_keep has the horizon).
#include <string>

#include "base/options.h"
#include "model/bounded_replay.h"
#include "runtime/engine_core.h"

namespace deepinfer::runtime {

Status EngineCore::configure_replay(const EngineOptions& options) {
  const auto& env = env_options();
  std::string mode;
  if (options.prefill_truncation_mode) {
    mode = *options.prefill_truncation_mode;
  } else if (env.ok()) {
    mode = env->yoco_prefill_truncation_mode;
  }
  if (mode.empty() || mode == "none") return {};
  if (mode != "compact") {
    return invalid_argument("EngineOptions.prefill_truncation_mode is '" + mode +
                            "': give compact, none or leave it unset");
  }
  int64_t keep = options.prefill_keep_tokens;
  if (keep <= 0) keep = env.ok() ? env->yoco_prefill_keep_tokens : 140;
  // Drafts of up to spec_tokens_ tokens may be rolled back: the kept suffix must still hold a
  // whole window behind the position decoding resumes at.
  DI_TRY(model::check_bounded_replay(model_->config(), keep, spec_tokens_));
  replay_keep_ = keep;
  return {};
}

bool EngineCore::truncates(const SeqExec& e, bool keep_hidden) const {
  return replay_keep_ > 0 && !keep_hidden && !wants_prompt_logprobs(e);
}

int64_t EngineCore::replay_upper_from(const SeqExec& e, bool keep_hidden) const {
  if (!truncates(e, keep_hidden)) return 0;
  return model::upper_kept_from(static_cast<int64_t>(e.known.size()), replay_keep_);
}

bool EngineCore::snapshot_serves(const model::SequenceCache& snap, const SeqExec& e) {
  // The snapshot's upper layers ran every row this request's own prefill runs before the
  // boundary (an exact snapshot, upper_from 0, serves anyone), or the request skips them past
  // the boundary anyway (its first step then forgets those rows). Either way every row the
  // request reads is at least as exact as the one its own prefill would compute, and equal to
  // it wherever that one is exact (the receptive field only shrinks), so a keep at or past the
  // exactness horizon still gives exactly the full prefill's outputs. (States rebuilt by a
  // window replay are never saved: save_snapshot_at.)
  return snap.window_from() == 0 &&
         (snap.upper_from() <= e.upper_from || e.upper_from > snap.length());
}

Status EngineCore::replay_window(const model::SequenceCache& part, SeqExec& e, int64_t h,
                                 StepJob& job) {
  const int64_t from = model::upper_kept_from(h, replay_keep_);
  DI_ASSIGN_OR_RETURN(
      model::SequenceCache c,
      model_->window_replay_state(part, {e.known.data(), static_cast<size_t>(h)}, from));
  e.cache.emplace(std::move(c));
  // The replayed rows may lie before the request's own kept suffix: those skip the upper layers
  // as its prefill does. (Hidden-reading drafters belong to V4, which has no replay.)
  const int64_t skip = model::upper_skip_rows(from, h - from, e.upper_from);
  auto out = extend_model(*e.cache, {e.known.data() + from, static_cast<size_t>(h - from)},
                          model::LogitsWanted::kNone, false, skip);
  if (!out.ok()) return out.status();
  ++job.prefix_window_replays;
  job.prefix_window_replay_tokens += h - from;
  job.replay_skipped_rows += skip;
  return {};
}

}  // namespace deepinfer::runtime
