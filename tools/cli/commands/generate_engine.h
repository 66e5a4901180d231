// The engine path of `deepinfer generate` (text prompts, sampling, batching); see
// generate_engine.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands.h"

namespace deepinfer::cli {

struct GenerateEngineArgs {
  std::string model_dir;
  std::vector<std::string> prompts;  // "-" = read stdin
  std::vector<int> prompt_ids;       // instead of text prompts (one request)
  std::string prompts_file;
  int max_tokens = 16;
  double temperature = 0.0;
  double top_p = 1.0;
  int top_k = 0;
  double min_p = 0.0;
  long long seed = -1;  // < 0: drawn by the engine
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json_output = false;
  bool stream = true;
  bool stats = false;
  bool sync_scheduling = false;      // every step start to end on one thread (to measure the gap)
  bool warmup = false;               // run the requests once untimed before the timed run
  std::string backend;               // "" = DEEPINFER_ACCELERATOR
  std::string load_format = "auto";  // EngineOptions::load_format
  std::string speculative_method = "off";            // EngineOptions::speculative_method
  int num_speculative_tokens = -1;                   // -1: DEEPINFER_USE_NEXTN_DECODE
  std::string speculative_acceptance = "identical";  // EngineOptions::speculative_acceptance
  ParallelArgs parallel;  // EngineOptions::data_parallel_size, enable_expert_parallel, ...
};

int run_generate_with_engine(const GenerateEngineArgs& args);

}  // namespace deepinfer::cli
