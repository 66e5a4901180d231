// Model: the DeepSeek-V4 forward pass on a backend::Ops, composed from the layer pieces.
//
//   auto ops = backend::cpu::make_opt_ops();
//   DI_ASSIGN_OR_RETURN(auto model, Model::load("/models/v4", *ops));
//   auto seq = model->new_sequence();
//   DI_ASSIGN_OR_RETURN(auto out, model->extend(seq, prompt_ids));   // prefill: last-row logits
//   DI_ASSIGN_OR_RETURN(auto next, model->extend(seq, {{token}}));   // decode = extend by one
//
// Every step shape (prefill, chunked prefill, decode, a verify block, several sequences at once
// through forward()) goes through the same code, so they agree by construction up to FP32
// summation order; tests/numerics checks that they agree with each other and with the goldens.
// The numeric semantics (HF vs official, numerics.h) come from the checkpoint. A Model is not
// thread-safe (it owns the step scratch); the ops object must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "io/model_config.h"
#include "model/deepseek_v4/cache.h"
#include "model/deepseek_v4/step.h"

namespace deepinfer::model::deepseek_v4 {

class Model {
 public:
  // Opens and validates the checkpoint, binds the weights and checks that `ops` supports every
  // feature the checkpoint needs. Errors name the directory / tensor / missing backend feature.
  static Expected<Model> load(const std::string& model_dir, backend::Ops& ops);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const io::ModelConfig& config() const;
  // True for a quantized checkpoint (official quantisation-aware semantics), false for HF.
  bool official_semantics() const;
  bool has_mtp() const;
  int64_t vocab_size() const;

  // Takes the sequence's fixed rings from the model's page pools (backend memory): throws
  // backend::OutOfMemory when they do not fit (the engine turns it into the request's error).
  SequenceCache new_sequence(const CacheOptions& options = {}) const;
  // Pages of KV memory the model's pools reserved from the backend, and those in use now by
  // sequences and snapshots (cache.h).
  backend::PagePool::Stats cache_memory() const;

  // One step over any mix of sequences (see step.h). Advances every sequence's cache. When the
  // backend runs out of memory mid-step (backend::OutOfMemory), the result is a
  // ResourceExhausted status that says what to change; the model stays usable, but the caches of
  // that step's sequences are then invalid and must be discarded (as after any error).
  Status forward(const StepInputs& in, StepOutputs& out);

  // Single-sequence conveniences over forward(): the tokens continue the cache. Logits are
  // [rows, vocab] for the last row (kLast) or every row (kAll).
  Expected<StepOutputs> extend(SequenceCache& cache, std::span<const int32_t> ids,
                               LogitsWanted logits = LogitsWanted::kLast, bool keep_hidden = false);

  // One decode step: extend by one token, logits of that token [1, vocab].
  Expected<StepOutputs> decode(SequenceCache& cache, int32_t token);

  // MTP draft logits (spec §2.8), block 0. Row i combines the main streams of position
  // p = cache.mtp_length() + i (hidden row i, as returned by extend(keep_hidden)) with the
  // embedding of token p + 1 (next_ids[i]) and predicts token p + 2. Advances the MTP state.
  Expected<std::vector<float>> mtp_draft(SequenceCache& cache, std::span<const float> hidden,
                                         std::span<const int32_t> next_ids);

 private:
  struct State;
  explicit Model(std::unique_ptr<State> s);
  // The bodies of load / forward / mtp_draft; the public functions turn an OutOfMemory thrown
  // inside an op into a status.
  static Expected<Model> load_unguarded(const std::string& model_dir, backend::Ops& ops);
  Status forward_unguarded(const StepInputs& in, StepOutputs& out);
  Expected<std::vector<float>> mtp_draft_unguarded(SequenceCache& cache,
                                                   std::span<const float> hidden,
                                                   std::span<const int32_t> next_ids);
  std::unique_ptr<State> s_;
};

}  // namespace deepinfer::model::deepseek_v4
