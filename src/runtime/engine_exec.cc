// EngineCore, the executor's side: one step's model forward and sampling (a StepJob). Runs on
// the StepExecutor (a worker thread with asynchronous scheduling) and touches only the job,
// the SeqExec states it holds, the model, the sampler and the scratch below; never the
// scheduler, the tokenizer or engine-thread state (see engine_core.h).
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <optional>

#include "base/clock.h"
#include "kv/block_hash.h"
#include "model/bounded_replay.h"
#include "model/step_hidden.h"
#include "runtime/engine_core.h"

namespace deepinfer::runtime {
namespace {

using Clock = SteadyClock;

// True when the mask allows at least one token and every allowed token is an EOS id: the
// grammar is complete and cannot continue, so the sample ends here.
bool only_eos_allowed(std::span<const uint32_t> mask, const std::vector<int32_t>& eos) {
  bool any = false;
  for (size_t w = 0; w < mask.size(); ++w) {
    uint32_t word = mask[w];
    while (word != 0) {
      const int bit = std::countr_zero(word);
      word &= word - 1;
      const auto id = static_cast<int32_t>(w * 32 + static_cast<size_t>(bit));
      if (std::find(eos.begin(), eos.end(), id) == eos.end()) return false;
      any = true;
    }
  }
  return any;
}

}  // namespace

void EngineCore::fill_mask(SeqExec& e) {
  const int32_t words = e.matcher->grammar().tokenizer().mask_words();
  // The tokenizer may know fewer ids than the model (extra ids stay disallowed) or more (ids
  // past the model's vocabulary cannot be sampled anyway).
  const size_t model_words = static_cast<size_t>((vocab_size() + 31) / 32);
  const size_t n = std::max(model_words, static_cast<size_t>(words));
  e.mask.assign(n, 0u);
  e.matcher->fill_next_token_bitmask(
      std::span<uint32_t>(e.mask.data(), static_cast<size_t>(words)));
  e.mask_ready = true;
}

void EngineCore::sample_pending(StepJob& job) {
  const size_t n = pending_samples_.size(), base = job.sampled.size();
  job.sampled.resize(base + n);
  const auto draw = [&](int64_t b, int64_t end) {
    thread_local sample::Sampler sampler;  // scratch only: every call overwrites it
    for (int64_t i = b; i < end; ++i) {
      const PendingSample& p = pending_samples_[static_cast<size_t>(i)];
      Sampled& out = job.sampled[base + static_cast<size_t>(i)];
      if (p.e->residual && !p.e->draft.proposal.q.empty()) {
        verify_residual(p.id, *p.e, p.row, p.count, sampler, out);
      } else if (p.count > 1) {
        verify_rows(p.id, *p.e, p.row, p.count, sampler, out);
      } else {
        sample_one(p.id, *p.e, p.row, sampler, out);
      }
    }
  };
  if (n < 2 || sampling_pool_ == nullptr) {
    draw(0, static_cast<int64_t>(n));
  } else {
    sampling_pool_->parallel_for(static_cast<int64_t>(n), draw, 1);
  }
  pending_samples_.clear();
}

sample::SampleContext EngineCore::sample_context(SeqExec& e) {
  const SamplingParams& params = *e.params;
  sample::SampleContext ctx;
  ctx.params = &params;
  ctx.key.seed = e.seed;
  ctx.key.position = static_cast<uint64_t>(e.num_sampled);
  ctx.key.sample_index = static_cast<uint32_t>(e.index);
  ctx.history = params.has_penalties() ? &e.history : nullptr;
  ctx.eos_token_ids = eos_;
  if (e.matcher) {
    if (!e.mask_ready) fill_mask(e);
    ctx.allowed_bitmask =
        std::span<const int32_t>(reinterpret_cast<const int32_t*>(e.mask.data()), e.mask.size());
  }
  return ctx;
}

void EngineCore::sample_one(sched::RequestId id, SeqExec& e, std::span<const float> row,
                            sample::Sampler& sampler, Sampled& out) {
  out.id = id;
  if (e.grammar_done) return;  // ended by its grammar in the previous step: this one is wasted
  auto r = sampler.sample(row, sample_context(e));
  if (!r.ok()) {
    out.error = "sampling failed: " + r.status().message();
    return;
  }
  if (!accept_token(e, r->token, out)) return;
  if (r->has_logprobs) {
    TokenLogprobs& lp = out.logprobs.emplace_back();
    lp.token = r->token;
    lp.logprob = r->logprob;
    lp.rank = r->rank;
    for (const auto& t : r->top) lp.top.emplace_back(t.token, t.logprob);
  }
}

void EngineCore::backend_sample_specs(const StepJob& job) {
  sample_specs_.clear();
  if (!backend_sampling_ || stand_in_forward_) return;  // a stand-in forward returns logits
  for (size_t k = 0; k < spans_.size(); ++k) {
    if (spans_[k].logits == model::LogitsWanted::kNone) continue;
    const SeqExec& e = *job.seqs[order_[k]];
    // A verify span draws at every row, row i at output position num_sampled + i: the draw
    // plain decoding makes there once the tokens before it are accepted.
    const int64_t rows = spans_[k].logits == model::LogitsWanted::kAll ? spans_[k].count : 1;
    for (int64_t i = 0; i < rows; ++i) {
      const auto position = static_cast<uint64_t>(e.num_sampled + i);
      // Residual acceptance judges drafts with the full distributions, on the host.
      if (e.grammar_done || e.matcher || !sample::backend_samplable(*e.params, position, false) ||
          wants_prompt_logprobs(e) || (e.residual && !e.draft.proposal.q.empty())) {
        sample_specs_.clear();  // one row needs the host: the host draws the whole step
        return;
      }
      sample_specs_.push_back(
          sample::make_sample_spec(*e.params, {e.seed, position, static_cast<uint32_t>(e.index)}));
    }
  }
}

bool EngineCore::accept_token(SeqExec& e, int32_t token, Sampled& out) {
  const SamplingParams& params = *e.params;
  if (token == sample::kSampleNonFinite) {
    out.error = "sampling failed: the model produced a non-finite logits row (NaN or +inf)";
    return false;
  }
  if (token < 0) {
    out.error = "sampling failed: no token can be sampled: every logit is -inf";
    return false;
  }
  if (e.matcher) {
    e.mask_ready = false;
    if (!e.matcher->accept_token(token)) {
      // The sampler drew from the matcher's own mask, so a refusal is our bug.
      out.error = "internal: structured output refused token " + std::to_string(token) +
                  " that its mask allowed";
      return false;
    }
    if (e.matcher->is_terminated()) {
      e.grammar_done = true;
    } else if (e.matcher->can_terminate()) {
      fill_mask(e);
      e.grammar_done = only_eos_allowed(e.mask, e.matcher->grammar().tokenizer().eos_ids());
    }
  }
  if (params.has_penalties()) e.history.add_output(token);
  e.known.push_back(token);
  ++e.num_sampled;
  out.tokens.push_back(token);
  out.grammar_done = e.grammar_done;
  return true;
}

// Prefix caching, the executor's half (docs/engine.md "Prefix caching in the runtime"). The
// scheduler's KV coordinator decides hits at block granularity (B tokens) over chained block
// hashes; what a hit must restore is the model's whole sequence state at the boundary h = kB.
// The executor keeps that state as a SequenceCache clone per cached boundary, keyed by the
// window-group block that ends at h (group 0 is always the window, and the coordinator keeps
// that block resident for every hit): every request whose known tokens reach a boundary saves
// one, so every published block has its snapshot. A prefill chunk that crosses boundaries runs
// in pieces ending at them (the model's state is only observable between forwards); the pieces
// of all requests still share forwards. The store is LRU-bounded in bytes; a hit whose
// snapshot was evicted recomputes the prefix from the request's known tokens. A restored state
// is bitwise the state the prefix computes (prefill == chunked == decode bit for bit on the CPU,
// and on the GPU under DEEPINFER_BATCH_INVARIANT).
// A block id does not name tokens: the pool gives an evicted block to other tokens, and the
// coordinator publishes a block when it plans the step that computes it, so a request admitted
// in that same plan (a request's samples, or two requests on one system prompt) hits it before
// the step has saved its state, while the store may still hold the state of the block's
// previous owner at the same length. Each snapshot therefore carries the chain hash of its
// tokens (the coordinator's kv::hash_block chain over the request's known tokens), and a hit
// restores it only when the hashes agree; otherwise it recomputes.

void EngineCore::save_snapshot(kv::BlockId block, const model::SequenceCache& c,
                               uint64_t tokens_hash) {
  if (block == kv::kNullBlock) return;
  auto snap = std::make_shared<const model::SequenceCache>(c.clone());
  const int64_t bytes = snap->footprint_bytes();
  PrefixSnapshot& slot = snapshots_[block];
  snapshot_bytes_ += bytes - slot.bytes;
  slot = {std::move(snap), tokens_hash, bytes, ++snapshot_clock_};
  evict_snapshots();
}

void EngineCore::evict_snapshots() {
  while (snapshot_bytes_ > snapshot_cap_ && !snapshots_.empty()) {  // least recent first
    // Bounded replay recomputes a hit's windows from its compressed part, so the windows (the
    // bulk of a short prefix's snapshot) go first and the compressed part stays while it fits.
    auto victim = snapshots_.end();
    for (int pass = replay_keep_ > 0 ? 0 : 1; pass < 2 && victim == snapshots_.end(); ++pass) {
      for (auto it = snapshots_.begin(); it != snapshots_.end(); ++it) {
        if (pass == 0 && !it->second.cache->has_rings()) continue;
        if (victim == snapshots_.end() || it->second.used < victim->second.used) victim = it;
      }
    }
    PrefixSnapshot& v = victim->second;
    snapshot_bytes_ -= v.bytes;
    if (replay_keep_ > 0 && v.cache->has_rings()) {
      v.cache = std::make_shared<const model::SequenceCache>(v.cache->compressed_part());
      v.bytes = v.cache->footprint_bytes();
      snapshot_bytes_ += v.bytes;
    } else {
      snapshots_.erase(victim);
    }
  }
}

std::optional<uint64_t> EngineCore::prefix_hash(SeqExec& e, int64_t len) const {
  if (len < block_size_ || static_cast<int64_t>(e.known.size()) < len) return std::nullopt;
  kv::extend_block_hashes(e.block_hashes, e.known, len, static_cast<int32_t>(block_size_));
  return e.block_hashes[static_cast<size_t>(len / block_size_ - 1)];
}

void EngineCore::save_snapshot_at(const sched::ScheduledRequest& sr, SeqExec& e) {
  const model::SequenceCache& c = *e.cache;
  // A state whose windows a window replay rebuilt (bounded replay) holds that replay's
  // approximation in every layer, compressed rows included: it is not offered to others.
  if (c.window_from() > 0) return;
  // The state at a boundary, saved under the window block that ends there, with the hash of
  // the tokens it holds.
  const kv::BlockTable& win = sr.tables.groups.at(0);
  const int64_t j = c.length() / block_size_ - 1 - win.first_block;
  const std::optional<uint64_t> hash = prefix_hash(e, c.length());
  if (hash && j >= 0 && j < static_cast<int64_t>(win.ids.size())) {
    // A sleeping hidden-reading drafter (MTP) only holds its rows: run them first, so that the
    // snapshot carries its window (a restore then drafts at once, as from a never-slept block).
    if (drafter_ != nullptr && drafter_->wants_hidden() && !e.draft.pending.empty() &&
        drafter_asleep_.load(std::memory_order_relaxed)) {
      drafter_->catch_up(*e.cache, e.known, e.draft);
    }
    save_snapshot(win.ids[static_cast<size_t>(j)], c, *hash);
  }
}

Status EngineCore::restore_prefix(const sched::ScheduledRequest& sr, SeqExec& e, StepJob& job) {
  const int64_t h = sr.num_prefix_hit;
  const kv::BlockTable& win = sr.tables.groups.at(0);
  const int64_t j = h / block_size_ - 1 - win.first_block;
  const kv::BlockId key = j >= 0 && j < static_cast<int64_t>(win.ids.size())
                              ? win.ids[static_cast<size_t>(j)]
                              : kv::kNullBlock;
  // Prompt logprobs need the prefix's logits: recomputed, never restored.
  if (const auto it = snapshots_.find(key); it != snapshots_.end() && !wants_prompt_logprobs(e)) {
    PrefixSnapshot& snap = it->second;
    if (snap.cache != nullptr && snap.cache->length() == h &&
        snap.tokens_hash == prefix_hash(e, h)) {
      snap.used = ++snapshot_clock_;
      if (snap.cache->has_rings() && snapshot_serves(*snap.cache, e)) {
        e.cache.emplace(snap.cache->clone());
        ++job.prefix_restores;
        return {};
      }
      // Bounded replay: the windows were evicted (or hold rows this request's prefill would not
      // have skipped): the compressed part is exact, the last window is recomputed.
      if (replay_keep_ > 0) {
        if (static_cast<int64_t>(e.known.size()) < h) {
          return internal_error("prefix hit of " + std::to_string(h) +
                                " tokens but the request knows " + std::to_string(e.known.size()));
        }
        return replay_window(*snap.cache, e, h, job);
      }
    }
  }
  // Evicted from the store (or never saved): recompute the prefix from the known tokens.
  if (static_cast<int64_t>(e.known.size()) < h) {
    return internal_error("prefix hit of " + std::to_string(h) + " tokens but the request knows " +
                          std::to_string(e.known.size()));
  }
  e.cache.emplace(model_->new_sequence());
  if (wants_prompt_logprobs(e)) {  // front-end: score the prefix in chunks of its logits
    for (int64_t at = 0; at < h; at += 256) {
      const int64_t n = std::min<int64_t>(256, h - at);
      auto out = extend_model(*e.cache, {e.known.data() + at, static_cast<size_t>(n)},
                              model::LogitsWanted::kAll);
      if (!out.ok()) return out.status();
      score_prompt_rows(e, at, n, out->logits.data(), 0, false);
    }
    ++job.prefix_recomputes;
    return {};
  }
  const bool hidden = drafter_ != nullptr && drafter_->wants_hidden();
  // Bounded replay: the prefix's rows before the kept suffix skip the upper layers, as the
  // request's prefill would have (so the state equals that of no hit).
  const int64_t skip = hidden ? 0 : model::upper_skip_rows(0, h, e.upper_from);
  // A drafter whose state reaches back a window (MTP) gets only the prefix's last rows, as
  // from a prefill (Drafter::hidden_tail): the rows before would be copied out and run through
  // its block for nothing (on a long recomputed prefix that cost more than the prefix's hit).
  const int64_t tail = hidden && drafter_->hidden_tail() >= 0
                           ? std::min<int64_t>(drafter_->hidden_tail(), h)
                           : -1;
  auto out = extend_model(*e.cache, {e.known.data(), static_cast<size_t>(h)},
                          model::LogitsWanted::kNone, hidden, skip, tail);
  if (!out.ok()) return out.status();
  job.replay_skipped_rows += skip;
  if (hidden) observe_hidden(e, tail >= 0 ? h - tail : 0, out->hidden);
  ++job.prefix_recomputes;
  return {};
}

Status EngineCore::forward_model(const model::StepInputs& in, model::StepOutputs& out) {
  if (stand_in_forward_) return stand_in_forward_(in, out);
  if (lockstep_) DI_TRY(lockstep_->before_forward());
  return model_->forward(in, out);
}

Expected<model::StepOutputs> EngineCore::extend_model(model::SequenceCache& cache,
                                                      std::span<const int32_t> ids,
                                                      model::LogitsWanted logits, bool keep_hidden,
                                                      int64_t upper_skip, int64_t hidden_tail) {
  if (lockstep_) DI_TRY(lockstep_->before_forward());
  return model_->extend(cache, ids, logits, keep_hidden, upper_skip, hidden_tail);
}

void EngineCore::execute(StepJob& job) {
  try {
    execute_unguarded(job);
  } catch (const backend::OutOfMemory& e) {
    // Out of the backend's memory outside a forward (a new sequence's rings, a prefix snapshot
    // or its restore; forward itself returns a status): every request of the step without an
    // answer yet fails with the message, its state is dropped, and the engine keeps serving.
    std::vector<sched::RequestId> answered;
    for (const Sampled& s : job.sampled) answered.push_back(s.id);
    for (size_t i = 0; i < job.plan.requests.size(); ++i) {
      const sched::RequestId id = job.plan.requests[i].id;
      if (std::find(answered.begin(), answered.end(), id) != answered.end()) continue;
      if (job.seqs[i] != nullptr) job.seqs[i]->cache.reset();
      Sampled& s = job.sampled.emplace_back();
      s.id = id;
      s.error = std::string("out of memory: ") + e.what() +
                ". Fewer concurrent sequences (max_num_seqs) or a smaller prefix cache "
                "(prefix_cache_bytes) need less memory.";
    }
    job.finished = Clock::now();
  }
  // Read here, on the executor that owns the store, for the engine thread's gauges.
  job.snapshots = static_cast<int64_t>(snapshots_.size());
  job.snapshot_bytes = snapshot_bytes_;
}

void EngineCore::execute_unguarded(StepJob& job) {
  job.started = Clock::now();
  // A sleeping drafter that reads the model's drafter context (DSpark) stops it too: every
  // forward's share of drafting then costs nothing (the sequences restart it when it wakes).
  // Not with lockstep ranks, whose forwards must stay the same on every rank.
  const bool reads_context = drafter_ != nullptr && drafter_->reads_draft_context();
  job.draft_context = reads_context;
  if (reads_context && !lockstep_ && !stand_in_forward_) {
    job.draft_context = !drafter_asleep_.load(std::memory_order_relaxed);
    model_->set_draft_context(job.draft_context);
  }
  const int64_t setups = ops_->recording_setups();
  deferred_snapshots_.clear();  // (a step cut short by running out of memory left some)
  for (const auto& e : job.drop_caches) e->cache.reset();  // recomputed from prompt + outputs
  const sched::StepPlan& plan = job.plan;
  std::vector<Piece> left = start_pieces(job);
  Round r;
  r.snapshots = block_size_ > 0 && !stand_in_forward_;
  // Asleep, a hidden-reading drafter still takes the rows it would need on waking (it holds a
  // window's worth without running: Drafter::hold), so that it wakes with a whole window.
  r.keep_hidden = drafter_ != nullptr && drafter_->wants_hidden() && !stand_in_forward_;
  r.hidden_width = static_cast<size_t>(model_->config().hc_mult) *
                   static_cast<size_t>(model_->config().hidden_size);
  if (r.keep_hidden && drafter_->hidden_tail() >= 0) {
    // A verify span's rows all go to the drafter after the draw: never fewer than those.
    r.hidden_tail = std::max<int64_t>(drafter_->hidden_tail(), spec_tokens_ + 1);
  }
  while (!left.empty()) {
    const model::StepInputs in = round_inputs(job, left, r);
    const auto t0 = Clock::now();
    const Status st = forward_model(in, step_out_);
    job.forward_seconds += seconds_since(t0);
    job.fed_tokens += static_cast<int64_t>(r.ids.size());
    ++job.forwards;
    if (!st.ok()) {
      for (const Piece& p : left) {
        job.seqs[p.i]->cache.reset();
        Sampled& s = job.sampled.emplace_back();
        s.id = plan.requests[p.i].id;
        s.error = "model forward failed: " + st.message();
      }
      break;
    }
    const auto t1 = Clock::now();
    std::vector<Piece> next = take_round_outputs(job, left, r);
    sample_pending(job);
    job.sample_seconds += seconds_since(t1);
    const auto t2 = Clock::now();
    for (const Drawn& d : r.drawn) {
      finish_spec_step(plan.requests[d.i], *job.seqs[d.i], d.start, d.fed, d.hidden,
                       job.sampled[d.sampled]);
    }
    draft_all();
    job.draft_seconds += seconds_since(t2);
    left = std::move(next);
  }
  hand_over_prompt_logprobs(job);
  job.recording_setup = ops_->recording_setups() != setups;
  job.finished = Clock::now();
}

std::vector<EngineCore::Piece> EngineCore::start_pieces(StepJob& job) {
  const sched::StepPlan& plan = job.plan;
  std::vector<Piece> left;
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const sched::ScheduledRequest& sr = plan.requests[i];
    SeqExec* e = job.seqs[i].get();
    if (e == nullptr) continue;
    if (!stand_in_forward_ && (sr.first_chunk || !e->cache)) {
      e->upper_from = replay_upper_from(*e, drafter_ != nullptr && drafter_->wants_hidden());
      if (sr.first_chunk && sr.num_prefix_hit > 0 && sr.num_prefix_hit == sr.start_pos &&
          block_size_ > 0) {
        if (const Status st = restore_prefix(sr, *e, job); !st.ok()) {
          e->cache.reset();
          Sampled& s = job.sampled.emplace_back();
          s.id = sr.id;
          s.error = "prefix cache restore failed: " + st.message();
          continue;
        }
      } else {
        e->cache.emplace(model_->new_sequence());
      }
    }
    int64_t start = sr.start_pos;
    // Planned before the previous verify step's update: the plan assumed every draft slot of
    // that step accepted; the cache knows how many were.
    if (!stand_in_forward_ && sr.is_decode && e->cache->length() != start &&
        start == e->spec_planned_end && e->cache->length() == e->spec_kept_end) {
      start = e->spec_kept_end;
    }
    if (!stand_in_forward_ && e->cache->length() != start) {
      // A bookkeeping bug: never feed the model positions that do not continue its cache.
      Sampled& s = job.sampled.emplace_back();
      s.id = sr.id;
      s.error = "internal: request cache holds " + std::to_string(e->cache->length()) +
                " tokens but the plan starts at " + std::to_string(sr.start_pos);
      continue;
    }
    if (sr.num_drafts > 0) {
      prepare_verify(sr, *e, start, plan.token_ids[static_cast<size_t>(sr.token_offset)]);
      left.push_back({i, start, start + static_cast<int64_t>(e->fed.size()), start, e->fed.data()});
    } else {
      e->grammar_cut = 0;  // no drafts judged: the proposal's first one was not refused either
      left.push_back(
          {i, start, start + sr.num_tokens, start, plan.token_ids.data() + sr.token_offset});
    }
  }
  return left;
}

model::StepInputs EngineCore::round_inputs(StepJob& job, const std::vector<Piece>& left, Round& r) {
  using model::LogitsWanted;
  const sched::StepPlan& plan = job.plan;
  // One forward over every request's next piece: up to its next block boundary when it
  // crosses one, else to the end of its span (the usual case: one round). Verify spans never
  // cross one (prepare_verify).
  spans_.clear();
  order_.clear();
  r.ids.clear();
  r.pos.clear();
  r.piece_end.clear();
  r.drawn.clear();
  for (const Piece& p : left) {
    const sched::ScheduledRequest& sr = plan.requests[p.i];
    int64_t end = p.end;
    if (r.snapshots) end = std::min(end, (p.pos / block_size_ + 1) * block_size_);
    model::SequenceSpan span;
    span.cache = job.seqs[p.i]->cache ? &*job.seqs[p.i]->cache : nullptr;
    span.begin = static_cast<int64_t>(r.ids.size());
    span.count = end - p.pos;
    span.logits = end == p.end && sr.needs_logits ? LogitsWanted::kLast : LogitsWanted::kNone;
    span.hidden_tail = r.hidden_tail;
    if (sr.num_drafts > 0 && span.count > 1) span.logits = LogitsWanted::kAll;    // verified
    if (wants_prompt_logprobs(*job.seqs[p.i])) span.logits = LogitsWanted::kAll;  // scored
    // Bounded replay: rows before the prompt's kept suffix skip the upper layers (never a row
    // whose logits are asked: the suffix ends at the prompt's last token).
    if (span.cache != nullptr && span.logits != LogitsWanted::kAll &&
        truncates(*job.seqs[p.i], r.keep_hidden)) {
      span.upper_skip = model::upper_skip_rows(p.pos, span.count, job.seqs[p.i]->upper_from);
      if (span.logits == LogitsWanted::kLast && span.upper_skip == span.count) {
        span.upper_skip = span.count - 1;  // (a safeguard: keep >= 1 covers the last token)
      }
      job.replay_skipped_rows += span.upper_skip;
    }
    const int32_t* from = p.src + (p.pos - p.begin);
    r.ids.insert(r.ids.end(), from, from + span.count);
    for (int64_t k = 0; k < span.count; ++k) r.pos.push_back(static_cast<int32_t>(p.pos + k));
    spans_.push_back(span);
    order_.push_back(p.i);
    r.piece_end.push_back(end);
  }
  model::StepInputs in;
  in.token_ids = r.ids;
  in.positions = r.pos;
  in.sequences = spans_;
  in.keep_hidden = r.keep_hidden;
  backend_sample_specs(job);
  in.sample_specs = sample_specs_;
  return in;
}

std::vector<EngineCore::Piece> EngineCore::take_round_outputs(StepJob& job,
                                                              const std::vector<Piece>& left,
                                                              Round& r) {
  using model::LogitsWanted;
  const sched::StepPlan& plan = job.plan;
  const int64_t V = model_->vocab_size();
  int64_t row = 0;
  size_t hidden_at = 0;  // the span's first kept hidden row in step_out_.hidden
  std::vector<Piece> next;
  for (size_t k = 0; k < order_.size(); ++k) {
    const size_t i = order_[k];
    const sched::ScheduledRequest& sr = plan.requests[i];
    SeqExec& e = *job.seqs[i];
    Piece p = left[k];
    p.pos = r.piece_end[k];
    const bool verify = sr.num_drafts > 0;
    bool sample = spans_[k].logits != LogitsWanted::kNone;
    // The span's kept rows (its last hidden_tail): positions [hidden_first, piece end).
    const int64_t kept = r.keep_hidden ? model::hidden_rows_kept(spans_[k]) : 0;
    const int64_t hidden_first = left[k].pos + spans_[k].count - kept;
    const std::span<const float> hidden =
        step_out_.hidden.empty()
            ? std::span<const float>()
            : std::span<const float>(step_out_.hidden)
                  .subspan(hidden_at, static_cast<size_t>(kept) * r.hidden_width);
    hidden_at += hidden.size();
    // Rows with no draw after them go to a hidden-reading drafter now (their next tokens are
    // known prompt tokens), before a snapshot at their end is taken.
    if (!sample && !hidden.empty()) observe_hidden(e, hidden_first, hidden);
    if (r.snapshots && !verify && p.pos % block_size_ == 0) {
      // A row drawn now reaches a hidden-reading drafter only when it drafts (draft_all).
      if (sample) {
        snapshot_after_drafting(sr, e);
      } else {
        save_snapshot_at(sr, e);
      }
    }
    const int64_t rows = verify ? spans_[k].count : 1;
    if (!verify && spans_[k].logits == LogitsWanted::kAll) {      // prompt logprobs: score all
      sample = r.piece_end[k] == left[k].end && sr.needs_logits;  // but the last
      row =
          score_prompt_rows(e, left[k].pos, spans_[k].count, step_out_.logits.data(), row, sample);
    }
    if (sample && hidden.size() > r.hidden_width && !verify) {
      // A prefill piece ending in a draw: its rows but the last go to the drafter now.
      observe_hidden(e, hidden_first, hidden.first(hidden.size() - r.hidden_width));
    }
    const std::span<const float> drawn_hidden =
        hidden.empty() ? hidden : hidden.last(static_cast<size_t>(rows) * r.hidden_width);
    if (sample && !sample_specs_.empty()) {
      r.drawn.push_back(
          {i, left[k].pos + spans_[k].count - rows, rows, job.sampled.size(), drawn_hidden});
      Sampled& s = job.sampled.emplace_back();  // drawn by the backend with the forward
      s.id = sr.id;
      verify_drawn(e, {step_out_.sampled.data() + row, static_cast<size_t>(rows)}, s);
      row += rows;
    } else if (sample) {
      r.drawn.push_back({i, left[k].pos + spans_[k].count - rows, rows,
                         job.sampled.size() + pending_samples_.size(), drawn_hidden});
      const std::span<const float> logits(step_out_.logits.data() + row * V,
                                          static_cast<size_t>(rows * V));
      row += rows;
      pending_samples_.push_back({sr.id, &e, logits, rows});
    }
    if (p.pos < p.end) next.push_back(p);
  }
  return next;
}

}  // namespace deepinfer::runtime
