// EngineCore: the engine loop (see engine_core.h for the design choices).
#include "runtime/engine_core.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <filesystem>
#include <utility>

#include "backend/select.h"
#include "base/check.h"
#include "base/options.h"

namespace deepinfer::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string reason_text(const sched::FinishedRequest& f, const std::string& error) {
  if (!error.empty() || f.state == sched::RequestState::kFailed) return "error";
  switch (f.reason) {
    case sched::FinishReason::kStop:
      return "stop";
    case sched::FinishReason::kLength:
    case sched::FinishReason::kModelLength:
      return "length";
    case sched::FinishReason::kAborted:
      return "abort";
    default:
      return "error";
  }
}

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

Expected<std::unique_ptr<EngineCore>> EngineCore::create(const EngineOptions& options) {
  if (options.model_dir.empty()) {
    return invalid_argument("EngineOptions.model_dir is empty: give a model directory");
  }
  if (options.max_num_seqs < 1 || options.max_num_batched_tokens < 1) {
    return invalid_argument("EngineOptions: max_num_seqs and max_num_batched_tokens must be >= 1");
  }
  int threads = options.num_threads;
  if (threads < 0) {
    const auto& env = env_options();
    threads = env.ok() ? env->num_threads : 0;
  }
  // DEEPINFER_ACCELERATOR picks the backend (backend/select.h); tests may force the oracle.
  DI_ASSIGN_OR_RETURN(std::unique_ptr<backend::Ops> ops,
                      backend::make_ops(options.use_ref_backend ? "ref" : "", threads));
  DI_ASSIGN_OR_RETURN(model::deepseek_v4::Model model,
                      model::deepseek_v4::Model::load(options.model_dir, *ops));

  std::optional<tokenizer::Tokenizer> tok;
  std::string tok_path = options.tokenizer_path;
  if (tok_path.empty()) {
    const auto candidate = std::filesystem::path(options.model_dir) / "tokenizer.json";
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec)) tok_path = candidate.string();
  }
  if (!tok_path.empty()) {
    DI_ASSIGN_OR_RETURN(tokenizer::Tokenizer t, tokenizer::Tokenizer::from_file(tok_path));
    tok.emplace(std::move(t));
  }

  const io::ModelConfig& cfg = model.config();
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = options.max_num_batched_tokens;
  sc.max_num_seqs = options.max_num_seqs;
  sc.max_model_len = options.max_model_len > 0
                         ? options.max_model_len
                         : std::min<int64_t>(cfg.max_position_embeddings, 8192);
  kv::KvConfig kc;
  if (options.kv_block_size > 0) kc.block_size = options.kv_block_size;
  kc.enable_prefix_caching = false;  // the host SequenceCache cannot restore from blocks yet
  kc.max_rollback_tokens = model::deepseek_v4::CacheOptions{}.max_rollback;
  if (options.num_kv_blocks > 0) {
    kc.num_blocks = options.num_kv_blocks;
  } else {
    kc.num_blocks = 1;
    DI_ASSIGN_OR_RETURN(kv::KvCoordinator probe, kv::KvCoordinator::create(cfg, kc));
    const int64_t per_seq = probe.peak_blocks(sc.max_model_len, sc.max_num_batched_tokens);
    kc.num_blocks =
        static_cast<int32_t>(std::min<int64_t>(per_seq * options.max_num_seqs, int64_t{1} << 30));
  }
  DI_ASSIGN_OR_RETURN(sched::Scheduler sched, sched::Scheduler::create(cfg, kc, sc));
  return std::unique_ptr<EngineCore>(
      new EngineCore(std::move(ops), std::move(model), std::move(tok), std::move(sched), options));
}

EngineCore::EngineCore(std::unique_ptr<backend::Ops> ops, model::deepseek_v4::Model model,
                       std::optional<tokenizer::Tokenizer> tok, sched::Scheduler sched,
                       const EngineOptions& options)
    : ops_(std::move(ops)), model_(std::move(model)), tok_(std::move(tok)), options_(options) {
  sched_.emplace(std::move(sched));
  for (int64_t e : model_.config().eos_token_ids) eos_.push_back(static_cast<int32_t>(e));
  engine_seed_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

std::string EngineCore::describe() const {
  const auto& kv = sched_->kv();
  return "model " + options_.model_dir + " (vocab " + std::to_string(vocab_size()) + ", " +
         std::to_string(model_.config().num_layers) + " layers), backend " +
         (options_.use_ref_backend ? "cpu-ref" : "cpu-opt") + ", max_model_len " +
         std::to_string(max_model_len()) + ", max_num_seqs " +
         std::to_string(sched_->config().max_num_seqs) + ", token budget " +
         std::to_string(sched_->config().max_num_batched_tokens) + ", KV " +
         std::to_string(kv.pool().num_blocks()) + " blocks of " + std::to_string(kv.block_size()) +
         " tokens, prefix caching off";
}

Expected<std::shared_ptr<const structured::CompiledGrammar>> EngineCore::compile_structured(
    const SamplingParams& params) {
  const SamplingParams::StructuredOutput& so = *params.structured;
  if (!tok_) {
    return invalid_argument(
        "structured outputs need a tokenizer, and the model directory has no tokenizer.json "
        "(give EngineOptions.tokenizer_path)");
  }
  if (!grammar_compiler_) {
    grammar_compiler_ = std::make_unique<structured::GrammarCompiler>(
        structured::TokenizerInfo::from_tokenizer(*tok_));
  }
  auto cg = grammar_compiler_->compile(so.schema_type, so.schema);
  if (!cg.ok()) {
    return invalid_argument("structured output (schema_type '" + so.schema_type +
                            "'): " + cg.status().message());
  }
  return std::move(*cg);
}

void EngineCore::fill_mask(Seq& s) {
  const int32_t words = s.matcher->grammar().tokenizer().mask_words();
  // The tokenizer may know fewer ids than the model (extra ids stay disallowed) or more (ids
  // past the model's vocabulary cannot be sampled anyway).
  const size_t model_words = static_cast<size_t>((vocab_size() + 31) / 32);
  const size_t n = std::max(model_words, static_cast<size_t>(words));
  s.mask.assign(n, 0u);
  s.matcher->fill_next_token_bitmask(
      std::span<uint32_t>(s.mask.data(), static_cast<size_t>(words)));
  s.mask_ready = true;
}

Expected<RequestHandle> EngineCore::submit(std::span<const int32_t> prompt_ids,
                                           std::string prompt_text, const SamplingParams& params,
                                           Engine::StreamCallback on_delta) {
  DI_TRY(params.validate(vocab_size()));
  if (!params.stop.empty() && !tok_) {
    return invalid_argument(
        "stop strings need a tokenizer, and the model directory has no tokenizer.json (use "
        "stop_token_ids, or give a tokenizer path)");
  }
  std::shared_ptr<const structured::CompiledGrammar> grammar;
  if (params.structured) {
    DI_ASSIGN_OR_RETURN(grammar, compile_structured(params));
  }
  const RequestHandle handle = next_handle_++;
  Parent& p = parents_[handle];
  p.params = params;
  p.grammar = grammar;
  p.on_delta = std::move(on_delta);
  p.out.id = handle;
  p.out.prompt = std::move(prompt_text);
  p.out.prompt_token_ids.assign(prompt_ids.begin(), prompt_ids.end());
  p.out.outputs.resize(static_cast<size_t>(params.n));

  std::string bad;
  for (size_t i = 0; i < prompt_ids.size() && bad.empty(); ++i) {
    if (prompt_ids[i] < 0 || prompt_ids[i] >= vocab_size()) {
      bad = "prompt token " + std::to_string(i) + " is id " + std::to_string(prompt_ids[i]) +
            ", outside the model's vocabulary [0, " + std::to_string(vocab_size()) + ")";
    }
  }
  const uint64_t seed = params.seq_seed ? *params.seq_seed : splitmix64(engine_seed_ ^ handle);
  for (int32_t i = 0; i < params.n; ++i) {
    const sched::RequestId sid = next_seq_++;
    Seq& s = seqs_[sid];
    s.parent = handle;
    s.index = i;
    s.seed = seed;
    s.out.index = i;
    s.stop.emplace(p.params, eos_);
    if (tok_) s.detok.emplace(*tok_, /*skip_special=*/true);
    if (params.has_penalties()) s.history.add_prompt(prompt_ids);
    if (grammar) s.matcher.emplace(grammar);
    p.seqs.push_back(sid);
    if (!bad.empty()) {
      s.error = bad;
      sched::FinishedRequest f;
      f.id = sid;
      f.state = sched::RequestState::kFailed;
      f.reason = sched::FinishReason::kError;
      f.error = invalid_argument(bad);
      early_failures_.push_back(std::move(f));
      continue;
    }
    const Status st =
        sched_->submit(sid, std::vector<int32_t>(prompt_ids.begin(), prompt_ids.end()));
    DI_CHECK(st.ok());  // ids are fresh, so a duplicate is our bug
  }
  return handle;
}

Status EngineCore::abort(RequestHandle id) {
  const auto it = parents_.find(id);
  if (it == parents_.end()) {
    return not_found("abort: request " + std::to_string(id) + " is unknown or has already ended");
  }
  for (sched::RequestId sid : it->second.seqs) {
    (void)sched_->abort(sid);  // NotFound for samples that already ended: nothing to do
  }
  return Status::ok_status();
}

void EngineCore::fail_seq(sched::RequestId id, Seq& s, const std::string& message) {
  if (s.error.empty()) s.error = message;
  (void)sched_->abort(id);
}

void EngineCore::emit(Parent& p, Seq& s, std::string text, std::vector<int32_t> tokens,
                      bool finished) {
  if (!p.on_delta || (text.empty() && tokens.empty() && !finished)) return;
  StreamDelta d;
  d.id = p.out.id;
  d.index = s.index;
  d.text = std::move(text);
  d.token_ids = std::move(tokens);
  d.finished = finished;
  d.finish_reason = s.out.finish_reason;
  p.on_delta(d);
}

void EngineCore::sample_one(sched::RequestId id, Seq& s, std::span<const float> row,
                            sched::StepResult& result) {
  Parent& p = parents_.at(s.parent);
  sample::SampleContext ctx;
  ctx.params = &p.params;
  ctx.key.seed = s.seed;
  ctx.key.position = static_cast<uint64_t>(s.out.token_ids.size());
  ctx.key.sample_index = static_cast<uint32_t>(s.index);
  ctx.history = p.params.has_penalties() ? &s.history : nullptr;
  ctx.eos_token_ids = eos_;
  if (s.matcher) {
    if (!s.mask_ready) fill_mask(s);
    ctx.allowed_bitmask =
        std::span<const int32_t>(reinterpret_cast<const int32_t*>(s.mask.data()), s.mask.size());
  }
  auto r = sampler_.sample(row, ctx);
  if (!r.ok()) {
    fail_seq(id, s, "sampling failed: " + r.status().message());
    return;
  }
  const int32_t token = r->token;
  bool grammar_done = false;
  if (s.matcher) {
    s.mask_ready = false;
    if (!s.matcher->accept_token(token)) {
      // The sampler drew from the matcher's own mask, so a refusal is our bug.
      fail_seq(id, s,
               "internal: structured output refused token " + std::to_string(token) +
                   " that its mask allowed");
      return;
    }
    if (s.matcher->is_terminated()) {
      grammar_done = true;
    } else if (s.matcher->can_terminate()) {
      fill_mask(s);
      grammar_done = only_eos_allowed(s.mask, s.matcher->grammar().tokenizer().eos_ids());
    }
  }
  std::string delta = s.detok ? s.detok->add(token) : std::string();
  sample::StopUpdate up = s.stop->append(token, delta);
  s.out.token_ids.push_back(token);
  if (p.params.has_penalties()) s.history.add_output(token);
  if (r->has_logprobs) {
    TokenLogprobs lp;
    lp.token = token;
    lp.logprob = r->logprob;
    lp.rank = r->rank;
    for (const auto& t : r->top) lp.top.emplace_back(t.token, t.logprob);
    s.out.logprobs.push_back(std::move(lp));
  }
  s.out.text += up.text;
  if (up.stop_token) s.out.stop_reason = *up.stop_token;
  sched::RequestResult rr;
  rr.id = id;
  rr.tokens.push_back(token);
  if (up.finish == sample::FinishReason::kStop) rr.finish = sched::FinishReason::kStop;
  if (up.finish == sample::FinishReason::kLength) rr.finish = sched::FinishReason::kLength;
  // A complete grammar match is a stop even when it lands on the last allowed token.
  if (grammar_done) rr.finish = sched::FinishReason::kStop;
  result.requests.push_back(std::move(rr));
  ++stats_.generated_tokens;
  emit(p, s, std::move(up.text), {token}, false);
}

void EngineCore::run_plan(const sched::StepPlan& plan, sched::StepResult& result) {
  using model::deepseek_v4::LogitsWanted;
  spans_.clear();
  std::vector<sched::RequestId> order;
  for (const sched::ScheduledRequest& sr : plan.requests) {
    Seq& s = seqs_.at(sr.id);
    if (sr.first_chunk || !s.cache) {
      s.cache.emplace(model_.new_sequence());
    }
    if (s.cache->length() != sr.start_pos) {
      // Only possible with a prefix hit (disabled) or a bookkeeping bug: never feed the model
      // positions that do not continue its cache.
      fail_seq(sr.id, s,
               "internal: request cache holds " + std::to_string(s.cache->length()) +
                   " tokens but the plan starts at " + std::to_string(sr.start_pos));
      continue;
    }
    if (!sr.is_decode) stats_.prompt_tokens += sr.num_tokens;
    model::deepseek_v4::SequenceSpan span;
    span.cache = &*s.cache;
    span.begin = sr.token_offset;
    span.count = sr.num_tokens;
    span.logits = sr.needs_logits ? LogitsWanted::kLast : LogitsWanted::kNone;
    spans_.push_back(span);
    order.push_back(sr.id);
  }
  if (spans_.empty()) return;
  // A request dropped above leaves a gap in the rows; the model requires contiguous spans that
  // cover the step, so feed only the kept requests' rows (rare path: copy).
  std::vector<int32_t> ids, pos;
  std::span<const int32_t> ids_view = plan.token_ids, pos_view = plan.positions;
  if (order.size() != plan.requests.size()) {
    int64_t at = 0;
    for (auto& span : spans_) {
      ids.insert(ids.end(), plan.token_ids.begin() + span.begin,
                 plan.token_ids.begin() + span.begin + span.count);
      pos.insert(pos.end(), plan.positions.begin() + span.begin,
                 plan.positions.begin() + span.begin + span.count);
      span.begin = at;
      at += span.count;
    }
    ids_view = ids;
    pos_view = pos;
  }
  model::deepseek_v4::StepInputs in;
  in.token_ids = ids_view;
  in.positions = pos_view;
  in.sequences = spans_;
  const auto t0 = Clock::now();
  const Status st = model_.forward(in, step_out_);
  stats_.forward_seconds += seconds_since(t0);
  if (!st.ok()) {
    for (sched::RequestId id : order) {
      Seq& s = seqs_.at(id);
      s.cache.reset();
      fail_seq(id, s, "model forward failed: " + st.message());
    }
    return;
  }
  const int64_t V = model_.vocab_size();
  int64_t row = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (spans_[i].logits == LogitsWanted::kNone) continue;
    const std::span<const float> logits(step_out_.logits.data() + row * V, static_cast<size_t>(V));
    ++row;
    sample_one(order[i], seqs_.at(order[i]), logits, result);
  }
}

void EngineCore::end_seq(const sched::FinishedRequest& f, std::vector<RequestOutput>& done) {
  const auto sit = seqs_.find(f.id);
  DI_CHECK(sit != seqs_.end());
  Seq& s = sit->second;
  Parent& p = parents_.at(s.parent);
  if (f.state == sched::RequestState::kFailed && s.error.empty()) s.error = f.error.message();
  std::string tail;
  if (!s.stop->finished()) {
    // Ended for a reason the stop checker did not see (length limit of the model, abort,
    // failure): release what it held back, and any incomplete character.
    tail = s.stop->flush();
    if (s.detok) tail += s.detok->flush();
  }
  s.out.text += tail;
  s.out.finish_reason = reason_text(f, s.error);
  s.out.error = s.error;
  s.out.num_preemptions = f.num_preemptions;
  emit(p, s, std::move(tail), {}, true);
  p.out.outputs[static_cast<size_t>(s.index)] = std::move(s.out);
  seqs_.erase(sit);
  if (++p.num_ended < static_cast<int32_t>(p.seqs.size())) return;
  p.out.finished = true;
  for (const CompletionOutput& o : p.out.outputs) {
    if (!o.error.empty() && p.out.error.empty()) p.out.error = o.error;
  }
  done.push_back(std::move(p.out));
  parents_.erase(s.parent);
}

std::vector<RequestOutput> EngineCore::step() {
  std::vector<RequestOutput> done;
  const auto t0 = Clock::now();
  const double fwd0 = stats_.forward_seconds;
  for (const sched::FinishedRequest& f : std::exchange(early_failures_, {})) end_seq(f, done);

  const sched::StepPlan plan = sched_->schedule();
  for (sched::RequestId id : plan.preempted) {
    const auto it = seqs_.find(id);
    if (it != seqs_.end()) it->second.cache.reset();  // recomputed from prompt + outputs
  }
  sched::StepResult result;
  if (!plan.empty()) {
    run_plan(plan, result);
    ++stats_.steps;
  }
  const Status st = sched_->update(plan, result);
  DI_CHECK(st.ok());  // results are built from the plan; a mismatch is our bug
  for (const sched::FinishedRequest& f : sched_->take_finished()) end_seq(f, done);
  stats_.preemptions = sched_->stats().preemptions;
  stats_.host_seconds += seconds_since(t0) - (stats_.forward_seconds - fwd0);
  return done;
}

}  // namespace deepinfer::runtime
