// EngineCore, the engine thread's side: create, submit, abort, and step() = plan, launch on
// the executor, process the finished step (see engine_core.h for the design; the executor's
// side, forward + sampling, is engine_exec.cc).
#include "runtime/engine_core.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <utility>

#include "backend/select.h"
#include "base/check.h"
#include "base/clock.h"
#include "base/options.h"

namespace deepinfer::runtime {
namespace {

using Clock = SteadyClock;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string reason_text(const sched::FinishedRequest& f, const std::string& error) {
  if (!error.empty() || f.state == sched::RequestState::kFailed) return "error";
  return std::string(api_finish_reason(f.reason));
}

// The drafter EngineOptions::speculative_method names (null: none).
Expected<std::unique_ptr<spec::Drafter>> make_drafter(const EngineOptions& options,
                                                      model::Model& model) {
  const std::string& m = options.speculative_method;
  if (m == "off" || options.num_speculative_tokens == 0) return std::unique_ptr<spec::Drafter>();
  if (m == "ngram") return spec::make_ngram_drafter();
  if (m == "dspark") return spec::make_dspark_drafter(model);
  if (m == "mtp") return spec::make_mtp_drafter(model);
  if (m == "auto") {
    if (model.drafter() == model::DrafterKind::kDSpark) return spec::make_dspark_drafter(model);
    if (model.drafter() == model::DrafterKind::kMtp) return spec::make_mtp_drafter(model);
    return std::unique_ptr<spec::Drafter>();
  }
  return invalid_argument("EngineOptions.speculative_method is '" + m +
                          "': give auto, dspark, mtp, ngram or off");
}

}  // namespace

Expected<std::unique_ptr<EngineCore>> EngineCore::create(
    const EngineOptions& options, const model::ExpertParallel& ep, const model::TensorParallel& tp,
    const model::ContextParallel& cp, bool gpu_shared, const OpsDecorator& decorate) {
  if ((ep.enabled() || tp.enabled() || cp.enabled()) && options.async_scheduling) {
    // Lockstep runs each step's forwards and its serving of peers on the thread that steps the
    // rank (data_parallel_engine.cc); a step left in flight between step() calls would hold the
    // peers waiting in the middle of a collective.
    return invalid_argument(
        "expert parallelism needs synchronous scheduling on each rank "
        "(EngineOptions.async_scheduling off)");
  }
  if (options.model_dir.empty()) {
    return invalid_argument("EngineOptions.model_dir is empty: give a model directory");
  }
  if (options.sampling_threads < 0) {
    return invalid_argument("EngineOptions.sampling_threads is " +
                            std::to_string(options.sampling_threads) +
                            ": give 0 (automatic) or a thread count");
  }
  const std::string& acceptance = options.speculative_acceptance;
  if (acceptance != "identical" && acceptance != "residual" && acceptance != "residual-always") {
    return invalid_argument("EngineOptions.speculative_acceptance is '" + acceptance +
                            "': give identical, residual or residual-always");
  }
  if (options.sample_on != "auto" && options.sample_on != "backend" &&
      options.sample_on != "host") {
    return invalid_argument("EngineOptions.sample_on is '" + options.sample_on +
                            "': give auto, backend or host");
  }
  DI_ASSIGN_OR_RETURN(const io::LoadFormat load_format,
                      io::parse_load_format(options.load_format, "EngineOptions.load_format"));
  if (options.max_num_seqs < 1 || options.max_num_batched_tokens < 1) {
    return invalid_argument("EngineOptions: max_num_seqs and max_num_batched_tokens must be >= 1");
  }
  int threads = options.num_threads;
  if (threads < 0) {
    const auto& env = env_options();
    threads = env.ok() ? env->num_threads : 0;
  }
  // EngineOptions::backend, else DEEPINFER_ACCELERATOR, picks the backend (backend/select.h).
  // The batch-invariance option reaches the backend, which picks its kernels by it.
  DI_ASSIGN_OR_RETURN(std::unique_ptr<backend::Ops> ops,
                      backend::make_ops(options.backend, threads, options.batch_invariant,
                                        options.cuda_devices.empty() ? 0 : options.cuda_devices[0],
                                        /*record_graphs=*/!gpu_shared));
  if (decorate) ops = decorate(std::move(ops));
  DI_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model,
                      model::load_model(options.model_dir, *ops, {load_format, 0}, ep, tp, cp));

  std::optional<tokenizer::Tokenizer> tok;
  std::string tok_path = options.tokenizer_path;
  std::string no_tokenizer = "the model directory has no tokenizer.json";
  if (tok_path.empty()) {
    const auto candidate = std::filesystem::path(options.model_dir) / "tokenizer.json";
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec)) tok_path = candidate.string();
  }
  if (!tok_path.empty()) {
    auto t = tokenizer::Tokenizer::from_file(tok_path);
    if (t.ok()) {
      tok.emplace(std::move(t).value());
    } else if (t.status().code() == StatusCode::kUnimplemented && options.tokenizer_path.empty()) {
      // The model directory's own tokenizer.json is of a kind the text path does not run (the
      // tiny V4.1 checkpoints carry a WordLevel vocabulary, which the model reads only for its
      // Engram token map): the engine serves token-id prompts, and every text feature says why.
      no_tokenizer =
          "the model's tokenizer.json cannot be used for text (" + t.status().message() + ")";
    } else {
      return t.status();
    }
  }

  const io::ModelConfig& cfg = model->config();
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = options.max_num_batched_tokens;
  sc.max_num_seqs = options.max_num_seqs;
  sc.max_model_len = options.max_model_len > 0
                         ? options.max_model_len
                         : std::min<int64_t>(cfg.max_position_embeddings, 8192);
  kv::KvConfig kc;
  if (options.kv_block_size > 0) kc.block_size = options.kv_block_size;
  kc.enable_prefix_caching = options.enable_prefix_caching;
  kc.max_rollback_tokens = model::CacheOptions{}.max_rollback;
  if (options.num_kv_blocks > 0) {
    kc.num_blocks = options.num_kv_blocks;
  } else {
    kc.num_blocks = 1;
    DI_ASSIGN_OR_RETURN(kv::KvCoordinator probe, kv::KvCoordinator::create(cfg, kc));
    const int64_t per_seq = probe.peak_blocks(sc.max_model_len, sc.max_num_batched_tokens);
    kc.num_blocks =
        static_cast<int32_t>(std::min<int64_t>(per_seq * options.max_num_seqs, int64_t{1} << 30));
  }
  DI_ASSIGN_OR_RETURN(std::unique_ptr<spec::Drafter> drafter, make_drafter(options, *model));
  int32_t spec_tokens = options.num_speculative_tokens;
  if (spec_tokens < 0) {
    const auto& env = env_options();
    spec_tokens = env.ok() ? env->use_nextn_decode : 5;
  }
  if (spec_tokens > kc.max_rollback_tokens) {
    return invalid_argument(
        "EngineOptions.num_speculative_tokens is " + std::to_string(spec_tokens) + "; at most " +
        std::to_string(kc.max_rollback_tokens) + " draft tokens per step can be rolled back");
  }
  if (drafter == nullptr) spec_tokens = 0;
  if (spec_tokens == 0) drafter.reset();
  sc.num_speculative_tokens = spec_tokens;
  DI_ASSIGN_OR_RETURN(sched::Scheduler sched, sched::Scheduler::create(cfg, kc, sc));
  auto core = std::unique_ptr<EngineCore>(
      new EngineCore(std::move(ops), std::move(model), std::move(tok), std::move(sched), options));
  if (!core->tok_) core->no_tokenizer_reason_ = std::move(no_tokenizer);
  if (ep.enabled()) core->lockstep_ = std::make_unique<Lockstep>(*ep.comm, *core->model_);
  // Context parallelism, like tensor parallelism: every rank runs every forward (a grid of both:
  // the lockstep runs inside the tensor-parallel group). Expert parallelism over more cores than
  // the group (inside data-parallel ranks) keeps the expert-parallel lockstep: other groups run
  // other batches, each group's cores the same.
  parallel::Communicator* group = tp.enabled() ? tp.comm : cp.comm;
  const bool experts_span_groups =
      ep.enabled() && group != nullptr && ep.comm->size() > group->size();
  if (group != nullptr && !experts_span_groups) {
    core->lockstep_ =
        std::make_unique<Lockstep>(*group, *core->model_, Lockstep::Mode::kTensorParallel);
  }
  core->spec_tokens_ = spec_tokens;
  core->draft_depth_ = spec_tokens;
  core->drafter_ = std::move(drafter);
  // The checkpoint's DSpark context is work in every forward: kept only for a drafter reading it.
  core->model_->set_draft_context(core->drafter_ != nullptr &&
                                  core->drafter_->reads_draft_context());
  if (options.speculative_varlen) {
    core->spec_varlen_ = *options.speculative_varlen;
  } else {
    const auto& env = env_options();
    core->spec_varlen_ = env.ok() && env->enable_mtp_varlen;
  }
  if (core->drafter_ == nullptr) core->spec_varlen_ = false;
  if (core->spec_varlen_) {
    const auto& env = env_options();
    const std::string trace = options.speculative_trace.value_or(
        env.ok() ? env->varlen_trace.value_or("") : std::string());
    if (!trace.empty()) {
      static std::atomic<int> engines{0};
      DI_ASSIGN_OR_RETURN(core->varlen_trace_, VarlenTrace::open(trace, engines++));
    }
  }
  if (core->drafter_ != nullptr) core->drafter_->set_want_confidence(core->spec_varlen_);
  if (core->drafter_ != nullptr && core->drafter_->proposes_distributions()) {
    core->residual_unseeded_ = acceptance != "identical";
    core->residual_seeded_ = acceptance == "residual-always";
  }
  DI_TRY(core->configure_replay(options));
  if (cp.enabled() && core->replay_keep_ > 0) {
    return unimplemented(
        "prefill_truncation_mode compact (DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE, bounded "
        "replay) with context_parallel_size (--context-parallel-size) > 1: the upper layers would "
        "run a subset of the ranks' rows; turn one of them off");
  }
  core->capture_graphs();
  if (core->spec_varlen_) {
    core->profile_step_cost();
    EngineCore* c = core.get();
    core->sched_->set_draft_budget(
        [c](std::span<const sched::DraftCandidate> cands, int64_t spare, std::span<int32_t> slots) {
          c->choose_draft_slots(cands, spare, slots);
        });
  }
  core->finish_lockstep_step();  // the profile's forwards were a step of their own
  return core;
}

EngineCore::EngineCore(std::unique_ptr<backend::Ops> ops, std::unique_ptr<model::Model> model,
                       std::optional<tokenizer::Tokenizer> tok, sched::Scheduler sched,
                       const EngineOptions& options)
    : ops_(std::move(ops)), model_(std::move(model)), tok_(std::move(tok)), options_(options) {
  sched_.emplace(std::move(sched));
  for (int64_t e : model_->config().eos_token_ids) eos_.push_back(static_cast<int32_t>(e));
  engine_seed_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  if (options.batch_invariant) {
    batch_invariant_ = *options.batch_invariant;
  } else {
    const auto& env = env_options();
    batch_invariant_ = env.ok() && env->batch_invariant;
  }
  if (sched_->kv().config().enable_prefix_caching) {
    block_size_ = sched_->kv().block_size();
    snapshot_cap_ = options.prefix_cache_bytes > 0 ? options.prefix_cache_bytes : int64_t{1} << 30;
  }
  const int sampling_threads =
      options.sampling_threads > 0
          ? options.sampling_threads
          : std::min(8, std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  if (sampling_threads > 1) sampling_pool_ = std::make_unique<ThreadPool>(sampling_threads);
  backend_sampling_ = options.sample_on == "backend" ||
                      (options.sample_on == "auto" && ops_ != nullptr && !ops_->host_memory());
  executor_ = std::make_unique<StepExecutor>(options.async_scheduling);
}

EngineCore::~EngineCore() {
  executor_->wait();  // the outstanding job uses the model and the sequences' states
  ops_->bind_thread();  // the members below free their memory on the backend's own device
}

std::string EngineCore::describe() const {
  const auto& kv = sched_->kv();
  return "model " + options_.model_dir + " (vocab " + std::to_string(vocab_size()) + ", " +
         std::to_string(model_->config().num_layers) + " layers" +
         (options_.load_format == "dummy" ? ", random weights: load format dummy" : "") +
         "), backend " + ops_->name() + ", max_model_len " + std::to_string(max_model_len()) +
         ", max_num_seqs " + std::to_string(sched_->config().max_num_seqs) + ", token budget " +
         std::to_string(sched_->config().max_num_batched_tokens) + ", KV " +
         std::to_string(kv.pool().num_blocks()) + " blocks of " + std::to_string(kv.block_size()) +
         " tokens, prefix caching " + (block_size_ > 0 ? "on" : "off") + ", scheduling " +
         (async_scheduling() ? "async" : "sync") + ", batch-invariant " +
         (batch_invariant_ ? "on" : "off") + ", sampling on " +
         (backend_sampling_ ? "the backend" : "the host") + ", speculative " +
         (drafter_ ? drafter_->name() + " k=" + std::to_string(spec_tokens_) +
                         (spec_varlen_ ? " varlen" : "")
                   : std::string("off")) +
         ", bounded replay " +
         (replay_keep_ > 0 ? "compact keep " + std::to_string(replay_keep_) : std::string("off"));
}

Expected<std::shared_ptr<const structured::CompiledGrammar>> EngineCore::compile_structured(
    const SamplingParams& params) {
  const SamplingParams::StructuredOutput& so = *params.structured;
  if (!tok_) {
    return invalid_argument("structured outputs need a tokenizer, and " + no_tokenizer_reason_ +
                            " (give EngineOptions.tokenizer_path)");
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

Expected<RequestHandle> EngineCore::submit(std::span<const int32_t> prompt_ids,
                                           std::string prompt_text, const SamplingParams& params,
                                           Engine::StreamCallback on_delta) {
  return submit_as(0, prompt_ids, std::move(prompt_text), params, std::move(on_delta));
}

Expected<RequestHandle> EngineCore::submit_as(RequestHandle chosen,
                                              std::span<const int32_t> prompt_ids,
                                              std::string prompt_text, const SamplingParams& params,
                                              Engine::StreamCallback on_delta) {
  ops_->bind_thread();  // a new sequence may take KV pages from the backend
  DI_TRY(params.validate(vocab_size()));
  if (!params.stop.empty() && !tok_) {
    return invalid_argument("stop strings need a tokenizer, and " + no_tokenizer_reason_ +
                            " (use stop_token_ids, or give a tokenizer path)");
  }
  std::shared_ptr<const structured::CompiledGrammar> grammar;
  if (params.structured) {
    DI_ASSIGN_OR_RETURN(grammar, compile_structured(params));
  }
  // 0: the core numbers its own requests; a chosen handle (data-parallel ranks) is new here.
  const RequestHandle handle = chosen != 0 ? chosen : next_handle_++;
  DI_CHECK(!parents_.contains(handle));
  Parent& p = parents_[handle];
  p.params = std::make_shared<const SamplingParams>(params);
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
    s.out.index = i;
    s.stop.emplace(*p.params, eos_);
    if (tok_ && params.detokenize) s.detok.emplace(*tok_, params.skip_special_tokens);
    s.exec = std::make_shared<SeqExec>();
    SeqExec& e = *s.exec;
    e.params = p.params;
    e.seed = seed;
    e.index = i;
    if (params.has_penalties()) e.history.add_prompt(prompt_ids);
    e.known.assign(prompt_ids.begin(), prompt_ids.end());
    e.prompt_len = static_cast<int64_t>(prompt_ids.size());
    if (grammar) e.matcher.emplace(grammar);
    // Greedy requests gain nothing from it (q would be the drafter's argmax, as now); logprobs
    // come from the plain draw's pipeline.
    e.residual = !params.is_greedy() && !params.logprobs &&
                 (params.seq_seed ? residual_seeded_ : residual_unseeded_);
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
    // max_tokens lets the scheduler skip planning past a request's last token.
    const Status st =
        sched_->submit(sid, std::vector<int32_t>(prompt_ids.begin(), prompt_ids.end()),
                       params.max_tokens.value_or(0));
    DI_CHECK(st.ok());  // ids are fresh, so a duplicate is our bug
  }
  return handle;
}

Status EngineCore::abort(RequestHandle id) {
  ops_->bind_thread();
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
  // Front-end fields (server, streaming API): the new token's logprobs, why it ended.
  if (!d.token_ids.empty() && p.params->logprobs && !s.out.logprobs.empty()) {
    d.logprobs.push_back(s.out.logprobs.back());
  }
  if (finished) {
    d.stop_reason = s.out.stop_reason;
    d.error = s.error;
  }
  p.on_delta(d);
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
  draft_confidence_.erase(f.id);
  const RequestHandle handle = s.parent;  // read before the erase below frees `s`
  seqs_.erase(sit);                       // a job still holding its SeqExec keeps that alive
  if (++p.num_ended < static_cast<int32_t>(p.seqs.size())) return;
  p.out.finished = true;
  for (const CompletionOutput& o : p.out.outputs) {
    if (!o.error.empty() && p.out.error.empty()) p.out.error = o.error;
  }
  done.push_back(std::move(p.out));
  parents_.erase(handle);
}

std::unique_ptr<EngineCore::StepJob> EngineCore::plan_job() {
  auto job = std::make_unique<StepJob>();
  job->plan = sched_->schedule();
  // Preempted caches are dropped by the next job to run, after the outstanding one is done.
  for (sched::RequestId id : job->plan.preempted) {
    const auto it = seqs_.find(id);
    if (it != seqs_.end()) pending_drops_.push_back(it->second.exec);
  }
  if (job->plan.empty()) return nullptr;
  job->seqs.reserve(job->plan.requests.size());
  for (const sched::ScheduledRequest& sr : job->plan.requests) {
    job->seqs.push_back(seqs_.at(sr.id).exec);
    if (!sr.is_decode) stats_.prompt_tokens += sr.num_tokens;
  }
  return job;
}

void EngineCore::launch(StepJob& job) {
  job.drop_caches = std::exchange(pending_drops_, {});
  ++stats_.steps;
  StepJob* j = &job;
  executor_->launch([this, j] {
    ops_->bind_thread();  // the step worker's thread (asynchronous scheduling) or the caller's
    execute(*j);
    finish_lockstep_step();
  });
}

void EngineCore::finish_lockstep_step() {
  if (!lockstep_) return;
  // A failure here leaves the group failed: the next forward of any rank returns it as its
  // requests' error, so it is not lost; this step's results are already complete.
  (void)lockstep_->finish_step();
}

void EngineCore::process(StepJob& job) {
  stats_.forward_seconds += job.forward_seconds;
  stats_.sample_seconds += job.sample_seconds;
  stats_.draft_seconds += job.draft_seconds;
  if (drafter_ != nullptr) stats_.spec_draft_window_restarts = drafter_->window_restarts();
  if (job.recording_setup) {
    ++stats_.graph_setup_steps;
    stats_.graph_setup_seconds += job.forward_seconds + job.sample_seconds + job.draft_seconds;
  }
  stats_.prefix_restores += job.prefix_restores;
  stats_.prefix_recomputes += job.prefix_recomputes;
  stats_.replay_skipped_rows += job.replay_skipped_rows;
  stats_.prefix_window_replays += job.prefix_window_replays;
  stats_.prefix_window_replay_tokens += job.prefix_window_replay_tokens;
  stats_.prefix_snapshots = job.snapshots;
  stats_.prefix_snapshot_bytes = job.snapshot_bytes;
  const backend::PagePool::Stats kv = model_->cache_memory();
  stats_.kv_bytes_reserved = kv.bytes_reserved;
  stats_.kv_bytes_in_use_peak = std::max(stats_.kv_bytes_in_use_peak, kv.bytes_in_use);
  for (const sched::ScheduledRequest& sr : job.plan.requests) {
    if (sr.first_chunk) stats_.prefix_hit_tokens += sr.num_prefix_hit;
    note_cached_tokens(sr);  // front-end usage (cached_tokens); engine_core.h
  }
  if (last_finished_) {
    stats_.gap_seconds +=
        std::max(0.0, std::chrono::duration<double>(job.started - *last_finished_).count());
  }
  last_finished_ = job.finished;
  sched::StepResult result;
  result.requests.reserve(job.sampled.size());
  for (Sampled& sm : job.sampled) {
    const auto it = seqs_.find(sm.id);
    if (it == seqs_.end()) continue;  // ended while this step ran: its work is dropped
    Seq& s = it->second;
    const sched::Request* r = sched_->find(sm.id);
    // Aborted while in flight: the output stays what had been streamed (as when synchronous).
    if (r == nullptr || r->abort_requested) continue;
    if (!sm.error.empty()) {
      fail_seq(sm.id, s, sm.error);
      continue;
    }
    if (!sm.prompt_logprobs.empty() && s.index == 0) {  // front-end: prompt logprobs
      auto& lps = parents_.at(s.parent).out.prompt_logprobs;
      lps.insert(lps.end(), sm.prompt_logprobs.begin(), sm.prompt_logprobs.end());
    }
    if (sm.tokens.empty()) continue;
    Parent& p = parents_.at(s.parent);
    sched::RequestResult& rr = result.requests.emplace_back();
    rr.id = sm.id;
    // The run goes through the stop checker token by token: a stop inside it ends the request
    // there, and the tokens after it are never emitted (nor counted by the scheduler).
    for (size_t t = 0; t < sm.tokens.size() && rr.finish == sched::FinishReason::kNone; ++t) {
      const int32_t token = sm.tokens[t];
      std::string delta = s.detok ? s.detok->add(token) : std::string();
      sample::StopUpdate up = s.stop->append(token, delta);
      s.out.token_ids.push_back(token);
      if (t < sm.logprobs.size()) s.out.logprobs.push_back(std::move(sm.logprobs[t]));
      s.out.text += up.text;
      if (up.stop_token) s.out.stop_reason = *up.stop_token;
      rr.tokens.push_back(token);
      rr.finish = up.finish;
      // A complete grammar match is a stop even when it lands on the last allowed token.
      if (sm.grammar_done && t + 1 == sm.tokens.size()) rr.finish = sched::FinishReason::kStop;
      ++stats_.generated_tokens;
      emit(p, s, std::move(up.text), {token}, false);
    }
    stats_.spec_grammar_cut_tokens += sm.drafts_grammar_cut;
    if (sm.drafts_verified > 0) {
      stats_.spec_verify_steps += 1;
      stats_.spec_draft_tokens += sm.drafts_verified;
      stats_.spec_accepted_tokens += static_cast<int64_t>(sm.tokens.size()) - 1;
    }
    // The draft-slot cap of its next plans: what its drafter has to offer now.
    if (spec_tokens_ > 0) sched_->set_max_drafts(sm.id, sm.drafts_proposed);
  }
  if (spec_varlen_) note_spec_results(job);  // what the varlen budget decides from
  const Status st = sched_->update(job.plan, result);
  DI_CHECK(st.ok());  // results are built from the plan; a mismatch is our bug
}

std::vector<RequestOutput> EngineCore::step() {
  ops_->bind_thread();  // ranks on several GPUs: each step runs on its rank's thread
  std::vector<RequestOutput> done;
  const auto t0 = Clock::now();
  double waited = 0;
  for (const sched::FinishedRequest& f : std::exchange(early_failures_, {})) end_seq(f, done);

  if (!executor_->threaded()) {
    // Synchronous: plan, run inline, process.
    if (std::unique_ptr<StepJob> job = plan_job()) {
      launch(*job);
      waited = job->forward_seconds + job->sample_seconds;
      process(*job);
    } else {
      finish_lockstep_step();  // expert parallelism: nothing of our own, serve the peers
    }
  } else {
    if (!in_flight_) {
      // Nothing outstanding (start, or the previous plan was empty): prime the pipeline.
      in_flight_ = plan_job();
      if (in_flight_) launch(*in_flight_);
    }
    if (in_flight_) {
      // Plan N+1 while N runs; then N's tokens go into N+1's placeholders and N+1 starts
      // before N's outputs are processed.
      std::unique_ptr<StepJob> next = plan_job();
      const auto w0 = Clock::now();
      executor_->wait();
      waited = seconds_since(w0);
      if (next) {
        sched::StepResult sampled;
        sampled.requests.reserve(in_flight_->sampled.size());
        for (const Sampled& sm : in_flight_->sampled) {
          if (sm.tokens.empty()) continue;
          sched::RequestResult& rr = sampled.requests.emplace_back();
          rr.id = sm.id;
          rr.tokens.push_back(sm.tokens.back());  // what the next step's placeholder needs
        }
        // Requests without a token (their sampling failed, or they were not run) and those
        // aborted meanwhile are ending: not run.
        for (sched::RequestId id : sched::fill_placeholders(next->plan, sampled)) {
          for (size_t i = 0; i < next->plan.requests.size(); ++i) {
            if (next->plan.requests[i].id == id) next->seqs[i].reset();
          }
        }
        for (size_t i = 0; i < next->plan.requests.size(); ++i) {
          const sched::Request* r = sched_->find(next->plan.requests[i].id);
          if (r == nullptr || r->abort_requested) next->seqs[i].reset();
        }
        launch(*next);
      }
      process(*in_flight_);
      in_flight_ = std::move(next);
    }
  }
  for (const sched::FinishedRequest& f : sched_->take_finished()) end_seq(f, done);
  stats_.preemptions = sched_->stats().preemptions;
  update_gauges();  // front-end gauges (/metrics); engine_core.h
  stats_.host_seconds += std::max(0.0, seconds_since(t0) - waited);
  return done;
}

// Front-end bookkeeping (the server's usage and /metrics), kept apart from the step logic.
void EngineCore::note_cached_tokens(const sched::ScheduledRequest& sr) {
  if (!sr.first_chunk) return;
  const auto it = seqs_.find(sr.id);
  if (it == seqs_.end() || it->second.index != 0) return;
  const auto pit = parents_.find(it->second.parent);
  if (pit == parents_.end() || pit->second.cached_noted) return;
  pit->second.cached_noted = true;
  pit->second.out.num_cached_tokens = sr.num_prefix_hit;
}

void EngineCore::update_gauges() {
  const sched::SpeculationGain::Counts& varlen = gain_.counts();
  stats_.spec_varlen_probes_passed = varlen.probes_passed;
  stats_.spec_varlen_probes_failed = varlen.probes_failed;
  stats_.spec_varlen_paused_plans = varlen.paused_plans;
  stats_.spec_varlen_recent_probes.clear();
  for (const sched::SpeculationGain::Probe& p : gain_.recent_probes()) {
    stats_.spec_varlen_recent_probes.push_back({p.plan_step, p.decodes, p.steps, p.ratio, p.passed,
                                                p.tokens, p.spent_seconds, p.plain_seconds,
                                                /*rank=*/0, p.draft_cost_seconds,
                                                p.draft_spent_seconds, p.plain_sample_seconds});
  }
  if (spec_varlen_ && !step_cost_.empty()) {
    stats_.spec_step_cost_seconds.clear();
    for (int64_t t = 1; t <= 512; t *= 2) {
      stats_.spec_step_cost_seconds.emplace_back(t, step_cost_.seconds(t));
    }
  }
  if (stats_.spec_draft_context_share.size() != draft_context_share_.size()) {
    stats_.spec_draft_context_share.assign(draft_context_share_.begin(),
                                           draft_context_share_.end());
  }
  const backend::Ops::RecordingCounts graphs = ops_->recording_counts();
  stats_.graph_captures = graphs.captured;
  stats_.graph_replays = graphs.replayed;
  stats_.graph_drops = graphs.drops;
  const kv::KvCoordinator& kv = sched_->kv();
  stats_.num_running = static_cast<int64_t>(sched_->num_running());
  stats_.num_waiting = static_cast<int64_t>(sched_->num_waiting());
  stats_.kv_blocks_total = kv.pool().num_blocks();
  stats_.kv_blocks_in_use = kv.pool().num_blocks() - kv.num_free_blocks();
  stats_.kv_bytes_in_use = model_->cache_memory().bytes_in_use;
  const kv::PrefixCacheStats& ps = kv.prefix_stats();
  stats_.prefix_queries = ps.queries;
  stats_.prefix_query_tokens = ps.query_tokens;
  stats_.prefix_hit_sequences = ps.hit_sequences;
  stats_.prefix_cache_hit_tokens = ps.hit_tokens;
  stats_.kv_blocks_cached = kv.pool().num_cached();
}

Expected<model::ExpertMoves> EngineCore::set_expert_placements(
    std::vector<parallel::ExpertPlacement> placements) {
  DI_CHECK(in_flight_ == nullptr);
  ops_->bind_thread();
  return model_->set_expert_placements(std::move(placements));
}

Status EngineCore::reset_prefix_cache() {
  ops_->bind_thread();
  if (!parents_.empty()) {
    return failed_precondition("reset_prefix_cache: " + std::to_string(parents_.size()) +
                               " requests have not ended");
  }
  // Asynchronous scheduling leaves the last (wasted) step in flight after its requests ended:
  // complete it, since it may still save snapshots. It ends nothing (every request has ended).
  while (in_flight_) {
    const std::vector<RequestOutput> late = step();
    DI_CHECK(late.empty());
  }
  executor_->wait();  // nothing outstanding now: the executor's store is ours to clear
  snapshots_.clear();
  snapshot_bytes_ = 0;
  DI_TRY(sched_->reset_prefix_cache());
  stats_.prefix_snapshots = 0;
  stats_.prefix_snapshot_bytes = 0;
  update_gauges();
  return Status::ok_status();
}

}  // namespace deepinfer::runtime
