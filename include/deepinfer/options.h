// Typed options: the ONLY place DeepInfer reads environment variables.
//
// Every knob is read once at start-up into EnvOptions, validated (a bad value is an error that
// names the variable and the accepted values), and printed by `deepinfer --print-options`.
// The seed's DEEPINFER_* names keep their meaning; docs/knobs.md lists them with defaults.
// Public (front ends print and use the effective options); src/base/options.cc implements it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

enum class Accelerator { kAuto, kCpu, kNvidia, kAscend };

struct EnvOptions {
  // DEEPINFER_ACCELERATOR: nvidia | ascend | cpu (ours); unset = auto (CPU until a GPU backend
  // exists).
  Accelerator accelerator = Accelerator::kAuto;
  // DEEPINFER_HF_MODEL_DIR: run from a local checkpoint directory instead of the HF cache.
  std::optional<std::string> hf_model_dir;
  // DEEPINFER_BATCH_INVARIANT=1: bitwise identical results whatever the batch.
  bool batch_invariant = false;
  // DEEPINFER_ENABLE_MTP_VARLEN=1: confidence-scheduled (varlen) speculative verification.
  bool enable_mtp_varlen = false;
  // DEEPINFER_USE_NEXTN_DECODE: maximum draft length; 0 disables drafting.
  int use_nextn_decode = 5;
  // DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE: "" (off) or "compact" (V4.1 SWA bounded replay).
  std::string yoco_prefill_truncation_mode;
  // DEEPINFER_YOCO_PREFILL_KEEP_TOKENS: suffix kept by bounded replay.
  int yoco_prefill_keep_tokens = 140;
  // DEEPINFER_NUM_THREADS: CPU worker threads; 0 = one per hardware thread.
  int num_threads = 0;
  // DEEPINFER_CUDA_GRAPH_MAX_ROWS: CUDA backend steps of at most this many tokens run their dense
  // parts as CUDA graphs (padded to a bucket); 0 = every step eager.
  int cuda_graph_max_rows = 256;
  // DEEPINFER_CUDA_PDL: CUDA kernels launched with programmatic dependent launch (sm_90+): each
  // kernel's launch overlaps the end of the one before it (on by default since 2026-12-06: 6-15%
  // off a decode step on an H100, docs/cuda_backend.md). 0 = plain stream order.
  bool cuda_pdl = true;
  // DEEPINFER_API_KEY: the key `deepinfer serve` requires when --api-key is not given.
  std::optional<std::string> api_key;
  // DEEPINFER_VARLEN_TRACE (ours): a CSV file that confidence-scheduled verification appends a
  // line to per engine step (its rows, times, tokens, drafts and what the controller decided),
  // for diagnosing varlen's decisions; unset = no trace.
  std::optional<std::string> varlen_trace;
};

// Parses from a getenv-like function so tests can pass their own environment.
using EnvLookup = std::optional<std::string> (*)(const char* name, void* ctx);
Expected<EnvOptions> parse_env_options(EnvLookup lookup, void* ctx);

// The process environment, parsed once and cached. Returns the same error on every call.
const Expected<EnvOptions>& env_options();

// Human-readable "NAME=value (default|set)" lines for start-up logs.
std::vector<std::string> describe_env_options(const EnvOptions& options);

const char* accelerator_name(Accelerator a);

}  // namespace deepinfer
