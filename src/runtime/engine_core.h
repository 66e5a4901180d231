// EngineCore: the synchronous engine loop behind deepinfer::Engine (include/deepinfer/engine.h).
//
// One step: Scheduler::schedule() -> one Model::forward over every scheduled request (decodes
// and prefill chunks together, each request continuing its own host SequenceCache) -> the
// Sampler for the requests whose step reached their last known token -> StopChecker fed with
// the IncrementalDetokenizer's delta -> Scheduler::update() -> outputs of the ended requests.
//
// Choices, and why:
//   * n > 1 runs n scheduler requests over the same prompt, sample i drawing from RNG stream i
//     (SampleKey::sample_index). Forking a prefilled cache would save n - 1 prefills, but the
//     host cache has no copy-on-write and prefix caching is off (below), so n requests is the
//     simple correct form; the KV accounting then sees each sample's real cost.
//   * Prefix caching is OFF: the model's host caches cannot yet be restored from shared KV
//     blocks, so a hit would skip tokens the model never saw. KvConfig::enable_prefix_caching
//     is forced false until the paged cache lands.
//   * Preemption by recompute: the scheduler frees a preempted request's blocks; we drop its
//     SequenceCache and rebuild it from prompt + outputs when the request's first chunk is
//     planned again. Sampling stays deterministic because the RNG is keyed by (seq_seed,
//     output position, sample index) and the stop checker / detokenizer state is kept.
//   * Structured outputs: the engine owns one GrammarCompiler (built on first use from its
//     tokenizer; it caches compiled grammars by schema), a request's grammar is compiled at
//     submit (an error refuses that request only), and each sample keeps its own
//     GrammarMatcher. The matcher advances exactly when a token is appended to the sample's
//     outputs, which preemption keeps, so after recompute it still matches the outputs. The
//     next mask is filled right after accepting a token, both to end the sample ("stop") as soon
//     as the grammar allows nothing but EOS and to be reused by the next step.
//   * Failures are per request: bad sampling values are refused at submit; a bad prompt or a
//     sampling error ends only that request (scheduler abort + an error message); a failed
//     forward ends the requests of that step with its message and the engine keeps serving.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/ops.h"
#include "deepinfer/engine.h"
#include "model/deepseek_v4/model.h"
#include "sample/sampler.h"
#include "sample/stop_checker.h"
#include "sample/token_counts.h"
#include "sched/scheduler.h"
#include "structured/compiler.h"
#include "structured/matcher.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::runtime {

class EngineCore {
 public:
  static Expected<std::unique_ptr<EngineCore>> create(const EngineOptions& options);

  Expected<RequestHandle> submit(std::span<const int32_t> prompt_ids, std::string prompt_text,
                                 const SamplingParams& params, Engine::StreamCallback on_delta);
  Status abort(RequestHandle id);
  std::vector<RequestOutput> step();
  bool has_unfinished() const { return !parents_.empty(); }

  int64_t vocab_size() const { return model_.vocab_size(); }
  int64_t max_model_len() const { return sched_->config().max_model_len; }
  const tokenizer::Tokenizer* tokenizer() const { return tok_ ? &*tok_ : nullptr; }
  const EngineStats& stats() const { return stats_; }
  std::string describe() const;

 private:
  // One sample of one request = one scheduler request.
  struct Seq {
    RequestHandle parent = 0;
    int32_t index = 0;
    uint64_t seed = 0;
    std::optional<model::deepseek_v4::SequenceCache> cache;
    std::optional<sample::StopChecker> stop;
    std::optional<tokenizer::IncrementalDetokenizer> detok;
    sample::TokenCounts history;  // only filled when the params have penalties
    std::optional<structured::GrammarMatcher> matcher;  // structured outputs only
    std::vector<uint32_t> mask;  // the matcher's next-token mask, model-vocabulary sized
    bool mask_ready = false;     // `mask` is already filled for the matcher's current state
    CompletionOutput out;
    std::string error;  // set when this sample failed (ends as finish_reason "error")
  };
  struct Parent {
    SamplingParams params;
    std::shared_ptr<const structured::CompiledGrammar> grammar;  // structured outputs only
    Engine::StreamCallback on_delta;
    RequestOutput out;
    std::vector<sched::RequestId> seqs;
    int32_t num_ended = 0;
  };

  EngineCore(std::unique_ptr<backend::Ops> ops, model::deepseek_v4::Model model,
             std::optional<tokenizer::Tokenizer> tok, sched::Scheduler sched,
             const EngineOptions& options);

  // Runs the model over the plan and samples; fills `result`. Per-request failures abort.
  void run_plan(const sched::StepPlan& plan, sched::StepResult& result);
  void sample_one(sched::RequestId id, Seq& s, std::span<const float> row,
                  sched::StepResult& result);
  void fail_seq(sched::RequestId id, Seq& s, const std::string& message);
  // Compiles params.structured (cached); InvalidArgument with the compiler's message.
  Expected<std::shared_ptr<const structured::CompiledGrammar>> compile_structured(
      const SamplingParams& params);
  // Fills s.mask from s.matcher for the matcher's current state.
  void fill_mask(Seq& s);
  // A scheduler request ended: finalize its sample, and its parent when every sample ended.
  void end_seq(const sched::FinishedRequest& f, std::vector<RequestOutput>& done);
  void emit(Parent& p, Seq& s, std::string text, std::vector<int32_t> tokens, bool finished);

  std::unique_ptr<backend::Ops> ops_;  // outlives model_ (declared first, destroyed last)
  model::deepseek_v4::Model model_;
  std::optional<tokenizer::Tokenizer> tok_;
  std::optional<sched::Scheduler> sched_;
  sample::Sampler sampler_;
  std::unique_ptr<structured::GrammarCompiler> grammar_compiler_;  // made on first use
  std::vector<int32_t> eos_;
  EngineOptions options_;
  EngineStats stats_;

  std::unordered_map<RequestHandle, Parent> parents_;
  std::unordered_map<sched::RequestId, Seq> seqs_;
  std::vector<sched::FinishedRequest> early_failures_;  // refused before reaching the scheduler
  RequestHandle next_handle_ = 1;
  sched::RequestId next_seq_ = 1;
  uint64_t engine_seed_ = 0;

  // Step scratch, reused.
  std::vector<model::deepseek_v4::SequenceSpan> spans_;
  model::deepseek_v4::StepOutputs step_out_;
};

}  // namespace deepinfer::runtime
