// EngineDriver: what deepinfer::Engine (include/deepinfer/engine.h) drives. Two implementations:
// EngineCore (one model, one scheduler: engine_core.h) and DataParallelEngine (several ranks,
// each an EngineCore, behind a front scheduler: data_parallel_engine.h). The contract is
// Engine's: one thread calls it, stream callbacks run on that thread, every submitted request
// ends exactly once as an output of step().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::runtime {

class EngineDriver {
 public:
  virtual ~EngineDriver() = default;

  // prompt_ids already truncated (SamplingParams::truncate_prompt_tokens); prompt_text is what
  // RequestOutput::prompt echoes (empty for token-id prompts).
  virtual Expected<RequestHandle> submit(std::span<const int32_t> prompt_ids,
                                         std::string prompt_text, const SamplingParams& params,
                                         Engine::StreamCallback on_delta) = 0;
  virtual Status abort(RequestHandle id) = 0;
  virtual std::vector<RequestOutput> step() = 0;
  virtual bool has_unfinished() const = 0;
  virtual Status reset_prefix_cache() = 0;
  // Engine::rebalance_experts; only the data-parallel engine with EPLB has experts to move.
  virtual Status rebalance_experts() {
    return failed_precondition(
        "rebalance_experts: EPLB is off; start the engine with enable_eplb (--enable-eplb), "
        "enable_expert_parallel (--enable-expert-parallel) and data_parallel_size "
        "(--data-parallel-size) > 1");
  }

  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_model_len() const = 0;
  virtual const tokenizer::Tokenizer* tokenizer() const = 0;  // null without one
  virtual const std::string& no_tokenizer_reason() const = 0;
  virtual const EngineStats& stats() const = 0;
  virtual std::string describe() const = 0;
};

}  // namespace deepinfer::runtime
