// deepinfer::ModelSession: one model on one backend, driven directly, one sequence at a time,
// without the engine's scheduler or sampler. What `deepinfer generate --prompt-ids` (greedy ids,
// which the numerics tests compare) and `deepinfer perplexity` (validation NLL, top-1 accuracy,
// MTP draft quality) use. Requests are served by Engine (engine.h).
//
//   DI_ASSIGN_OR_RETURN(auto session, ModelSession::create(""));   // DEEPINFER_ACCELERATOR
//   DI_TRY(session->load("/models/v4"));
//   DI_ASSIGN_OR_RETURN(GreedyGeneration g, session->generate_greedy(prompt_ids, 16, false));
//
// Not thread-safe. Implemented in src/runtime/model_session.cc over model/model.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

struct GreedyGeneration {
  std::vector<int32_t> token_ids;
  std::string finish_reason;   // "eos" or "length"
  double prefill_seconds = 0;  // the first step: the whole prompt
  double decode_seconds = 0;   // every later one-token step
};

// Sums over scored windows (ModelSession::score_window).
struct PerplexityTotals {
  double nll = 0.0, mtp_nll = 0.0;  // natural-log negative log-likelihood, summed
  int64_t scored = 0;               // positions scored
  int64_t correct = 0;              // the argmax was the next token
  int64_t mtp_correct = 0;          // the MTP draft's argmax was the token after next
  int64_t mtp_accepted = 0;         // ... was the main model's own greedy choice there
};

class ModelSession {
 public:
  // backend: "opt" (threaded CPU; DEEPINFER_NUM_THREADS), "ref" (the FP32 oracle) or "cuda";
  // "" = DEEPINFER_ACCELERATOR. Errors name an unknown or unavailable backend.
  static Expected<std::unique_ptr<ModelSession>> create(const std::string& backend);
  ~ModelSession();
  ModelSession(const ModelSession&) = delete;
  ModelSession& operator=(const ModelSession&) = delete;

  std::string backend_name() const;  // "cpu-opt", "cpu-ref", "cuda"
  // Reads config.json and the weights of model_dir (DeepSeek-V4 or V4.1). Errors name the
  // directory, the tensor or the missing backend feature. load_format: as
  // EngineOptions::load_format ("auto", or "dummy": random weights from config.json alone).
  Status load(const std::string& model_dir, const std::string& load_format = "auto");

  // The loaded model's:
  int64_t vocab_size() const;
  int64_t bos_token_id() const;
  std::vector<int64_t> eos_token_ids() const;
  bool has_mtp() const;             // a DeepSeek-V4 MTP block
  bool official_semantics() const;  // quantized: the official quantisation-aware numerics

  // A fresh sequence: prefill `prompt`, then one decode step per token, each token the argmax
  // of the last row's logits (ties: the lowest id). Ends after max_tokens, or at an EOS id
  // unless ignore_eos. Prompt ids must lie in [0, vocab_size()).
  Expected<GreedyGeneration> generate_greedy(std::span<const int32_t> prompt, int max_tokens,
                                             bool ignore_eos);

  // One window on a fresh sequence: its first size - 1 tokens are prefilled with every row's
  // logits; positions 0 .. size - 3 are scored against the next token, and with_mtp the MTP
  // block's drafts (row p predicting token p + 2) against the real token and against the main
  // model's greedy choice at p + 1. Adds to `totals`.
  Status score_window(std::span<const int32_t> window, bool with_mtp, PerplexityTotals& totals);

 private:
  struct Impl;
  explicit ModelSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer
