// Shared pieces of the engine tests: run a list of requests through a fresh Engine step by step
// (aborts between steps, as a server would), and compare two runs on everything a client
// observes (tokens, text, finish reasons, logprobs bit for bit), every request ending once.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::engine_test {

std::string source_dir();
// tests/data/model/v4_tiny_a/hf_fp32 (no tokenizer), materialized from its derive.json once per
// process (tests/support/derived_checkpoint.h)
std::string tiny_dir();
std::string default_dir();  // models/v4-small (the trained V4 default of the engine tests)

struct Req {
  std::vector<int32_t> ids;  // token prompt, or
  std::string text;          // text prompt (default model)
  SamplingParams params;
  int abort_after = -1;  // abort once this many tokens were streamed (-1: never)
};

struct EngineRun {
  std::vector<RequestHandle> handles;  // submit order
  std::map<RequestHandle, RequestOutput> outputs;
  EngineStats stats;
  std::string describe;
};

EngineRun run_requests(EngineOptions o, const std::vector<Req>& reqs);
void expect_same(const EngineRun& a, const EngineRun& b);

SamplingParams greedy(int max_tokens);
SamplingParams seeded(uint64_t seed, int max_tokens);  // top-p 0.9, logprobs 2
std::vector<int32_t> prompt(int n, int seed);          // ids in [3, 253)

// The greedy continuation of `prompt` by Model::extend driven by hand (one sequence, a prefill
// then decodes, no engine): the reference the engine's greedy output must equal.
std::vector<int32_t> greedy_by_extend(const std::string& model_dir,
                                      const std::vector<int32_t>& prompt, int n);

}  // namespace deepinfer::engine_test
