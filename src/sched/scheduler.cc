// Scheduler implementation: see scheduler.h for the policy.
#include "sched/scheduler.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace deepinfer::sched {

Expected<Scheduler> Scheduler::create(const io::ModelConfig& model, const kv::KvConfig& kv_config,
                                      const SchedulerConfig& config) {
  if (config.max_num_batched_tokens < 1) {
    return invalid_argument("SchedulerConfig.max_num_batched_tokens is " +
                            std::to_string(config.max_num_batched_tokens) +
                            "; expected at least 1 token per step");
  }
  if (config.max_num_seqs < 1) {
    return invalid_argument("SchedulerConfig.max_num_seqs is " +
                            std::to_string(config.max_num_seqs) + "; expected at least 1");
  }
  if (config.max_model_len < 0 || config.max_prefill_chunk < 0) {
    return invalid_argument("SchedulerConfig.max_model_len and max_prefill_chunk must be >= 0");
  }
  SchedulerConfig c = config;
  if (c.max_model_len == 0) c.max_model_len = model.max_position_embeddings;
  if (c.max_model_len < 2) {
    return invalid_argument("max_model_len is " + std::to_string(c.max_model_len) +
                            " (from SchedulerConfig or the model's max_position_embeddings); "
                            "expected at least 2 tokens");
  }
  DI_ASSIGN_OR_RETURN(kv::KvCoordinator kv, kv::KvCoordinator::create(model, kv_config));
  return Scheduler(std::move(kv), c);
}

Scheduler::Scheduler(kv::KvCoordinator kv, const SchedulerConfig& config)
    : kv_(std::move(kv)), config_(config) {}

const Request* Scheduler::find(RequestId id) const {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

Status Scheduler::submit(RequestId id, std::vector<int32_t> prompt, int64_t max_output) {
  if (requests_.count(id) != 0) {
    return invalid_argument("request id " + std::to_string(id) +
                            " is already in use by a live request; ids must be unique");
  }
  Request fresh;
  fresh.id = id;
  fresh.num_prompt = static_cast<int64_t>(prompt.size());
  fresh.tokens = std::move(prompt);
  fresh.arrival = next_arrival_++;
  fresh.max_output = std::max<int64_t>(0, max_output);
  Request& r = requests_.emplace(id, std::move(fresh)).first->second;
  const std::string who = "request " + std::to_string(id) + ": ";
  if (r.tokens.empty()) {
    end(r, RequestState::kFailed, FinishReason::kError,
        invalid_argument(who + "empty prompt; a request needs at least one token"));
    return Status::ok_status();
  }
  if (r.num_prompt >= config_.max_model_len) {
    end(r, RequestState::kFailed, FinishReason::kError,
        invalid_argument(who + "prompt of " + std::to_string(r.num_prompt) +
                         " tokens leaves no room for output under max_model_len " +
                         std::to_string(config_.max_model_len) +
                         "; shorten the prompt to at most " +
                         std::to_string(config_.max_model_len - 1) + " tokens"));
    return Status::ok_status();
  }
  const int64_t need = kv_.peak_blocks(r.num_prompt + 1, 1);
  if (need > kv_.pool().num_blocks()) {
    end(r, RequestState::kFailed, FinishReason::kError,
        resource_exhausted(who + "prompt of " + std::to_string(r.num_prompt) +
                           " tokens needs at least " + std::to_string(need) + " KV blocks of " +
                           std::to_string(kv_.block_size()) + " tokens, the pool holds " +
                           std::to_string(kv_.pool().num_blocks()) +
                           "; raise KvConfig.num_blocks or shorten the prompt"));
    return Status::ok_status();
  }
  waiting_.push_back(id);
  return Status::ok_status();
}

int64_t Scheduler::chunk_for(const Request& r, int64_t budget) const {
  int64_t n = std::min(r.num_planned() - r.num_computed, budget);
  if (config_.max_prefill_chunk > 0) n = std::min(n, config_.max_prefill_chunk);
  return n;
}

void Scheduler::remove_running(RequestId id) {
  const auto it = std::find(running_.begin(), running_.end(), id);
  if (it != running_.end()) running_.erase(it);
}

void Scheduler::end(Request& r, RequestState state, FinishReason reason, Status error) {
  FinishedRequest f;
  f.id = r.id;
  f.state = state;
  f.reason = reason;
  f.output.assign(r.tokens.begin() + r.num_prompt, r.tokens.end());
  f.error = std::move(error);
  f.num_prompt = r.num_prompt;
  f.num_preemptions = r.num_preemptions;
  if (r.state == RequestState::kRunning) remove_running(r.id);
  if (r.state == RequestState::kWaiting || r.state == RequestState::kPreempted) {
    const auto w = std::find(waiting_.begin(), waiting_.end(), r.id);
    if (w != waiting_.end()) waiting_.erase(w);
  }
  kv_.free(r.id, r.tokens);
  r.transition(state);
  if (state == RequestState::kFailed) ++stats_.failed;
  const RequestId id = r.id;
  finished_.push_back(std::move(f));
  ended_since_plan_.push_back(id);
  requests_.erase(id);
}

void Scheduler::preempt_newest(std::vector<Pick>& picks, int64_t& budget, StepPlan& plan) {
  const RequestId victim = running_.back();
  running_.pop_back();
  Request& r = requests_.at(victim);
  kv_.free(victim, r.tokens);
  for (auto it = picks.begin(); it != picks.end(); ++it) {
    if (it->id == victim) {
      budget += it->num_tokens;
      picks.erase(it);
      break;
    }
  }
  r.num_computed = 0;
  r.num_prefix_hit = 0;
  r.transition(RequestState::kPreempted);
  ++r.num_preemptions;
  ++stats_.preemptions;
  waiting_.push_front(victim);
  plan.preempted.push_back(victim);
}

StepPlan Scheduler::schedule() {
  // Synchronous loops update before scheduling again; asynchronous ones plan one step ahead.
  DI_CHECK(awaiting_.size() <= 1);
  StepPlan plan;
  plan.step = next_step_++;
  plan.ended = std::move(ended_since_plan_);
  ended_since_plan_.clear();
  ++stats_.steps;
  int64_t budget = config_.max_num_batched_tokens;
  std::vector<Pick> picks;
  picks.reserve(running_.size() + 8);
  const bool preempted = schedule_running(picks, budget, plan);
  // Waiting requests, unless this step had to preempt (admitting now would only take the
  // blocks back from the requests that were just squeezed).
  if (!preempted) admit_waiting(picks, budget);
  build(plan, picks);
  return plan;
}

bool Scheduler::plannable(const Request& r) const {
  if (r.abort_requested) return false;
  if (r.num_placeholders == 0) return true;
  if (r.num_planned() >= config_.max_model_len) return false;
  return r.max_output == 0 || r.num_planned() - r.num_prompt < r.max_output;
}

std::vector<RequestId> Scheduler::running_order(size_t& num_decodes) const {
  std::vector<RequestId> order;
  order.reserve(running_.size());
  for (const RequestId id : running_) {
    const Request& r = requests_.at(id);
    if (r.num_planned() - r.num_computed == 1 && plannable(r)) order.push_back(id);
  }
  num_decodes = order.size();  // order[0, num_decodes) are the decodes
  for (const RequestId id : running_) {
    const Request& r = requests_.at(id);
    if (r.num_planned() - r.num_computed > 1 && plannable(r)) order.push_back(id);
  }
  return order;
}

bool Scheduler::schedule_running(std::vector<Pick>& picks, int64_t& budget, StepPlan& plan) {
  size_t num_decodes = 0;
  const std::vector<RequestId> order = running_order(num_decodes);
  // Speculative decoding: the draft slots of the decodes.
  const std::vector<int32_t> slots =
      draft_slots(std::span<const RequestId>(order.data(), num_decodes), budget);
  bool preempted = false;
  for (size_t oi = 0; oi < order.size(); ++oi) {
    const RequestId id = order[oi];
    if (budget == 0) break;
    const auto it = requests_.find(id);
    if (it == requests_.end() || it->second.state != RequestState::kRunning) continue;
    Request& r = it->second;
    int64_t n = chunk_for(r, budget);
    const int32_t drafts =
        oi < num_decodes ? static_cast<int32_t>(std::min<int64_t>(slots[oi], budget - 1)) : 0;
    n += drafts;
    while (true) {
      if (kv_.grow(id, r.tokens, n)) {
        r.num_computed += n;
        picks.push_back({id, n, false, drafts});
        budget -= n;
        break;
      }
      if (running_.size() == 1) {
        // Alone and still no room: the pool is smaller than this sequence. Waiting cannot help.
        end(r, RequestState::kFailed, FinishReason::kError,
            resource_exhausted("request " + std::to_string(id) + ": " +
                               std::to_string(r.num_tokens()) + " tokens need more KV blocks " +
                               "than the pool's " + std::to_string(kv_.pool().num_blocks()) +
                               "; raise KvConfig.num_blocks or lower max_tokens"));
        break;
      }
      const RequestId victim = running_.back();
      preempt_newest(picks, budget, plan);
      preempted = true;
      if (victim == id) break;
    }
  }
  return preempted;
}

void Scheduler::admit_waiting(std::vector<Pick>& picks, int64_t& budget) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    const RequestId id = waiting_.front();
    Request& r = requests_.at(id);
    // A request preempted while its step was in flight restarts once that step's token is
    // known (FCFS: the queue waits behind it; that is at most one step).
    if (r.in_flight > 0) break;
    const int64_t hit = kv_.find_prefix_hit(r.tokens);
    int64_t n = std::min(r.num_tokens() - hit, budget);
    if (config_.max_prefill_chunk > 0) n = std::min(n, config_.max_prefill_chunk);
    bool ok = kv_.start(id, r.tokens, hit, n);
    if (!ok && running_.empty()) {
      // Nobody else holds blocks: only the chunk can be too big. Halve it until it fits.
      while (!ok && n > 1) {
        n /= 2;
        ok = kv_.start(id, r.tokens, hit, n);
      }
      if (!ok) {
        waiting_.pop_front();
        end(r, RequestState::kFailed, FinishReason::kError,
            resource_exhausted(
                "request " + std::to_string(id) + ": " + std::to_string(r.num_tokens()) +
                " tokens do not fit an empty pool of " + std::to_string(kv_.pool().num_blocks()) +
                " KV blocks; raise KvConfig.num_blocks"));
        continue;
      }
    }
    if (!ok) break;  // FCFS: later requests wait behind the head
    waiting_.pop_front();
    running_.push_back(id);
    r.transition(RequestState::kRunning);
    r.num_prefix_hit = hit;
    r.num_computed = hit + n;
    picks.push_back({id, n, true});
    budget -= n;
  }
}

void Scheduler::set_max_drafts(RequestId id, int32_t max_drafts) {
  const auto it = requests_.find(id);
  if (it != requests_.end()) it->second.max_drafts = max_drafts;
}

std::vector<int32_t> Scheduler::draft_slots(std::span<const RequestId> decodes,
                                            int64_t budget) const {
  std::vector<int32_t> slots(decodes.size(), 0);
  if (config_.num_speculative_tokens <= 0 || decodes.empty()) return slots;
  std::vector<DraftCandidate> cands(decodes.size());
  for (size_t i = 0; i < decodes.size(); ++i) {
    const Request& r = requests_.at(decodes[i]);
    int64_t cap = config_.num_speculative_tokens;
    if (r.max_drafts >= 0) cap = std::min<int64_t>(cap, r.max_drafts);
    if (r.num_computed < r.num_prompt) cap = 0;  // the prompt's last token: nothing drafted yet
    // Optimistic planning never passes the known end: the step's 1 + slots tokens all fit under
    // max_model_len and the caller's output limit.
    cap = std::min(cap, config_.max_model_len - 1 - r.num_planned());
    if (r.max_output > 0) cap = std::min(cap, r.max_output - 1 - (r.num_planned() - r.num_prompt));
    cands[i] = {r.id, static_cast<int32_t>(std::max<int64_t>(0, cap))};
  }
  const int64_t spare = budget - static_cast<int64_t>(decodes.size());
  if (draft_budget_) {
    draft_budget_(cands, std::max<int64_t>(0, spare), slots);
    for (size_t i = 0; i < slots.size(); ++i) {
      slots[i] = std::clamp(slots[i], 0, cands[i].max_slots);
    }
    return slots;
  }
  int64_t left = spare;  // default: every candidate its maximum while the budget lasts
  for (size_t i = 0; i < slots.size() && left > 0; ++i) {
    slots[i] = static_cast<int32_t>(std::min<int64_t>(cands[i].max_slots, left));
    left -= slots[i];
  }
  return slots;
}

void Scheduler::build(StepPlan& plan, const std::vector<Pick>& picks) {
  auto is_decode = [&](const Pick& p) {
    const Request& r = requests_.at(p.id);
    const int64_t start = r.num_computed - p.num_tokens;
    return !p.first_chunk && p.num_tokens == 1 + p.num_drafts && start == r.num_planned() - 1 &&
           start >= r.num_prompt;
  };
  std::vector<Pick> sorted = picks;
  std::stable_partition(sorted.begin(), sorted.end(), is_decode);
  plan.requests.resize(sorted.size());
  int64_t total = 0;
  for (const Pick& p : sorted) total += p.num_tokens;
  plan.token_ids.reserve(static_cast<size_t>(total));
  plan.positions.reserve(static_cast<size_t>(total));
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Pick& p = sorted[i];
    Request& r = requests_.at(p.id);
    ScheduledRequest& sr = plan.requests[i];
    sr.id = p.id;
    sr.start_pos = r.num_computed - p.num_tokens;
    sr.num_tokens = static_cast<int32_t>(p.num_tokens);
    sr.token_offset = static_cast<int32_t>(plan.token_ids.size());
    sr.is_decode = is_decode(p);
    sr.needs_logits = r.num_computed - p.num_drafts == r.num_planned();
    // Fed positions at or past the known tokens are placeholders (at most the last one before
    // the draft slots). With draft slots in flight, optimistic planning may start past the known
    // tokens: the accepted drafts of the step in flight were fed by that step, its last token is
    // fed here.
    const int64_t fed_end = sr.start_pos + p.num_tokens - p.num_drafts;
    const int64_t known_end = std::clamp<int64_t>(r.num_tokens(), sr.start_pos, fed_end);
    sr.num_placeholders = static_cast<int32_t>(fed_end - known_end);
    DI_CHECK(sr.num_placeholders <= 1 && known_end >= sr.start_pos);
    sr.num_drafts = p.num_drafts;
    sr.first_chunk = p.first_chunk;
    if (p.first_chunk) {
      sr.num_prefix_hit = r.num_prefix_hit;
      sr.state_restore = kv_.state_restore_block(p.id);
    }
    kv_.append_tables(p.id, sr.tables);
    const auto begin = r.tokens.begin() + sr.start_pos;
    plan.token_ids.insert(plan.token_ids.end(), begin, r.tokens.begin() + known_end);
    plan.token_ids.insert(plan.token_ids.end(), static_cast<size_t>(sr.num_placeholders),
                          kPlaceholderToken);
    plan.token_ids.insert(plan.token_ids.end(), static_cast<size_t>(p.num_drafts), kDraftSlot);
    for (int64_t k = 0; k < p.num_tokens; ++k) {
      plan.positions.push_back(static_cast<int32_t>(sr.start_pos + k));
    }
    if (sr.is_decode) {
      ++plan.num_decodes;
      ++stats_.decode_tokens;
      stats_.draft_slots += p.num_drafts;
    } else {
      stats_.prefill_tokens += p.num_tokens;
    }
    ++r.in_flight;
    // This step samples one more token, and with draft slots, optimistically, one per slot.
    if (sr.needs_logits) r.num_placeholders += 1 + p.num_drafts;
  }
  if (!plan.empty()) awaiting_.push_back(plan.step);
}

Status Scheduler::update(const StepPlan& plan, const StepResult& result) {
  if (plan.empty()) return Status::ok_status();  // never awaited
  if (awaiting_.empty() || plan.step != awaiting_.front()) {
    return failed_precondition("update: step " + std::to_string(plan.step) +
                               " is not the oldest plan awaiting its " + "result (" +
                               (awaiting_.empty()
                                    ? std::string("none is")
                                    : "step " + std::to_string(awaiting_.front()) + " is") +
                               ")");
  }
  std::unordered_map<RequestId, const RequestResult*> by_id;
  for (const RequestResult& rr : result.requests) {
    if (!by_id.emplace(rr.id, &rr).second) {
      return invalid_argument("update: two results for request " + std::to_string(rr.id));
    }
  }
  size_t matched = 0;
  for (const ScheduledRequest& sr : plan.requests) {
    const auto it = by_id.find(sr.id);
    const size_t got = it == by_id.end() ? 0 : it->second->tokens.size();
    matched += it == by_id.end() ? 0 : 1;
    const Request* r = find(sr.id);
    // Ended since it was planned, or aborted: whatever came back is dropped.
    if (r == nullptr || r->abort_requested) continue;
    const size_t want = sr.needs_logits ? 1 : 0;
    const size_t want_max = want + static_cast<size_t>(sr.num_drafts);
    if (got < want || got > want_max) {
      return invalid_argument("update: request " + std::to_string(sr.id) + " in step " +
                              std::to_string(plan.step) + " expects " + std::to_string(want) +
                              (want_max > want ? ".." + std::to_string(want_max) : "") +
                              " sampled token(s), got " + std::to_string(got));
    }
  }
  if (matched != by_id.size()) {
    return invalid_argument("update: results name requests that are not in step " +
                            std::to_string(plan.step));
  }

  awaiting_.pop_front();
  for (const ScheduledRequest& sr : plan.requests) {
    const auto it = requests_.find(sr.id);
    if (it == requests_.end()) continue;
    Request& r = it->second;
    --r.in_flight;
    if (sr.needs_logits) r.num_placeholders -= 1 + sr.num_drafts;
    DI_CHECK(r.in_flight >= 0 && r.num_placeholders >= 0);
    if (r.abort_requested) {
      end(r, RequestState::kAborted, FinishReason::kAborted);
      continue;
    }
    const auto rit = by_id.find(sr.id);
    const RequestResult* rr = rit == by_id.end() ? nullptr : rit->second;
    if (sr.needs_logits && rr != nullptr) {
      r.tokens.insert(r.tokens.end(), rr->tokens.begin(), rr->tokens.end());
    }
    // Draft slots that brought no accepted token: their KV (and the optimistic positions of a
    // later plan made before this update) rolls back. Only a running request still holds it (a
    // preempted one was freed), and one that ends here frees it anyway.
    const int64_t unaccepted =
        sr.num_drafts == 0 ? 0
                           : 1 + sr.num_drafts - (rr == nullptr ? 0 : static_cast<int64_t>(
                                                                           rr->tokens.size()));
    const FinishReason fin = rr == nullptr ? FinishReason::kNone : rr->finish;
    if (unaccepted > 0 && r.state == RequestState::kRunning && fin == FinishReason::kNone) {
      const Status st = kv_.rollback(r.id, unaccepted);
      DI_CHECK(st.ok());  // within max_rollback_tokens and above the published prefix
      r.num_computed -= unaccepted;
      stats_.rolled_back += unaccepted;
    }
    const FinishReason f = rr == nullptr ? FinishReason::kNone : rr->finish;
    if (f == FinishReason::kAborted) {
      end(r, RequestState::kAborted, f);
    } else if (f != FinishReason::kNone) {
      end(r, RequestState::kFinished, f);
    } else if (sr.needs_logits && r.num_tokens() >= config_.max_model_len) {
      end(r, RequestState::kFinished, FinishReason::kModelLength);
    }
  }
  return Status::ok_status();
}

Status Scheduler::abort(RequestId id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return not_found("abort: request " + std::to_string(id) + " is unknown or has already ended");
  }
  Request& r = it->second;
  if (r.in_flight > 0) {
    r.abort_requested = true;
    return Status::ok_status();
  }
  end(r, RequestState::kAborted, FinishReason::kAborted);
  return Status::ok_status();
}

std::vector<RequestId> fill_placeholders(StepPlan& next, const StepResult& prev) {
  std::vector<RequestId> unfilled;
  std::unordered_map<RequestId, int32_t> sampled;
  sampled.reserve(prev.requests.size());
  for (const RequestResult& rr : prev.requests) {
    if (!rr.tokens.empty()) sampled.emplace(rr.id, rr.tokens.back());
  }
  for (const ScheduledRequest& sr : next.requests) {
    if (sr.num_placeholders == 0) continue;
    const auto it = sampled.find(sr.id);
    if (it == sampled.end()) {
      unfilled.push_back(sr.id);
      continue;
    }
    next.token_ids[static_cast<size_t>(sr.token_offset + sr.num_tokens - sr.num_drafts - 1)] =
        it->second;
  }
  return unfilled;
}

std::vector<FinishedRequest> Scheduler::take_finished() {
  std::vector<FinishedRequest> out = std::move(finished_);
  finished_.clear();
  return out;
}

Status Scheduler::reset_prefix_cache() {
  if (!requests_.empty() || !awaiting_.empty()) {
    return failed_precondition("reset_prefix_cache: " + std::to_string(requests_.size()) +
                               " requests live, " + std::to_string(awaiting_.size()) +
                               " plans awaiting their update");
  }
  return kv_.reset_prefix_cache();
}

}  // namespace deepinfer::sched
