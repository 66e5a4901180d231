// deepinfer::Engine: the public wrapper (include/deepinfer/engine.h) over runtime::EngineCore, or
// over runtime::DataParallelEngine when EngineOptions::data_parallel_size > 1, or
// runtime::TensorParallelEngine when tensor_parallel_size > 1.
#include "deepinfer/engine.h"

#include <algorithm>
#include <utility>

#include "runtime/data_parallel_engine.h"
#include "runtime/engine_core.h"
#include "runtime/tensor_parallel_engine.h"

namespace deepinfer {

Expected<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options) {
  DI_TRY(runtime::validate_parallel_options(options));
  std::unique_ptr<runtime::EngineDriver> core;
  if (options.data_parallel_size > 1) {
    // Tensor or context parallelism inside each data-parallel rank too.
    DI_ASSIGN_OR_RETURN(core, runtime::DataParallelEngine::create(options));
  } else if (options.tensor_parallel_size > 1 || options.context_parallel_size > 1) {
    DI_ASSIGN_OR_RETURN(core, runtime::TensorParallelEngine::create(options));
  } else {
    DI_ASSIGN_OR_RETURN(core, runtime::EngineCore::create(options));
  }
  return std::unique_ptr<Engine>(new Engine(std::move(core)));
}

Engine::Engine(std::unique_ptr<runtime::EngineDriver> core) : core_(std::move(core)) {}
Engine::~Engine() = default;

namespace {
// SamplingParams::truncate_prompt_tokens: the last k tokens (vLLM truncates from the left).
std::span<const int32_t> truncated(std::span<const int32_t> ids, const SamplingParams& params) {
  if (!params.truncate_prompt_tokens) return ids;
  const auto k = static_cast<size_t>(std::max<int32_t>(*params.truncate_prompt_tokens, 1));
  return ids.size() > k ? ids.subspan(ids.size() - k) : ids;
}
}  // namespace

Expected<RequestHandle> Engine::submit(std::span<const int32_t> prompt_ids,
                                       const SamplingParams& params, StreamCallback on_delta) {
  return core_->submit(truncated(prompt_ids, params), {}, params, std::move(on_delta));
}

Expected<RequestHandle> Engine::submit_text(std::string_view prompt, const SamplingParams& params,
                                            StreamCallback on_delta) {
  const tokenizer::Tokenizer* tok = core_->tokenizer();
  if (tok == nullptr) {
    return invalid_argument("text prompt given but " + core_->no_tokenizer_reason() +
                            ": pass token ids, or EngineOptions.tokenizer_path");
  }
  const std::vector<int32_t> ids = tok->encode(prompt);
  return core_->submit(truncated(ids, params), std::string(prompt), params, std::move(on_delta));
}

Status Engine::abort(RequestHandle id) { return core_->abort(id); }
std::vector<RequestOutput> Engine::step() { return core_->step(); }
Status Engine::reset_prefix_cache() { return core_->reset_prefix_cache(); }
Status Engine::rebalance_experts() { return core_->rebalance_experts(); }

std::vector<RequestOutput> Engine::run_until_done() {
  std::vector<RequestOutput> all;
  while (core_->has_unfinished()) {
    for (RequestOutput& o : core_->step()) all.push_back(std::move(o));
  }
  return all;
}

bool Engine::has_unfinished() const { return core_->has_unfinished(); }
int64_t Engine::vocab_size() const { return core_->vocab_size(); }
int64_t Engine::max_model_len() const { return core_->max_model_len(); }
bool Engine::has_tokenizer() const { return core_->tokenizer() != nullptr; }
std::string Engine::no_tokenizer_reason() const { return core_->no_tokenizer_reason(); }

std::vector<int32_t> Engine::encode(std::string_view text) const {
  const tokenizer::Tokenizer* tok = core_->tokenizer();
  return tok ? tok->encode(text) : std::vector<int32_t>{};
}

std::string Engine::decode(std::span<const int32_t> ids) const {
  const tokenizer::Tokenizer* tok = core_->tokenizer();
  return tok ? tok->decode(ids, /*skip_special=*/true) : std::string();
}

std::string Engine::decode(std::span<const int32_t> ids, bool skip_special) const {
  const tokenizer::Tokenizer* tok = core_->tokenizer();
  return tok ? tok->decode(ids, skip_special) : std::string();
}

std::string Engine::token_bytes(int32_t id) const {
  const tokenizer::Tokenizer* tok = core_->tokenizer();
  return tok ? std::string(tok->id_to_bytes(id)) : std::string();
}

const EngineStats& Engine::stats() const { return core_->stats(); }
std::string Engine::describe() const { return core_->describe(); }

}  // namespace deepinfer
