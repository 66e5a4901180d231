// Shared helpers of the whole-model numerics tests: where the committed tiny checkpoints and
// goldens live (tests/data/model/, made by tests/reference/model/make_goldens.py), loading them,
// and comparing logits.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "io/safetensors.h"
#include "model/model.h"

namespace deepinfer::model::testing {

std::string source_dir();  // $DEEPINFER_SOURCE_DIR, the repository root
// tests/data/model/<config>/<variant>, e.g. ("v4_tiny_a", "hf_fp32"), or the temporary folder
// materialized from its derive.json (tests/support/derived_checkpoint.h).
std::string model_dir(const std::string& config, const std::string& variant);

// The two CPU backends, created once per process.
backend::Ops& opt_ops();
backend::Ops& ref_ops();

// Loads or fails the test (returns nullptr and records a failure).
std::unique_ptr<Model> load_test_model(const std::string& config, const std::string& variant,
                                       backend::Ops& ops);

// goldens.safetensors + goldens.json of one config.
class Goldens {
 public:
  explicit Goldens(const std::string& config);
  bool ok() const { return file_ != nullptr; }
  const nlohmann::json& json() const { return json_; }
  std::vector<int32_t> prompt(const std::string& name) const;  // "len40"
  bool has(const std::string& key) const;
  // Logits [rows, vocab] as FP32 plus their row count.
  std::vector<float> logits(const std::string& key, int64_t* rows) const;
  // Any F32 / I64 golden, flat, with its shape.
  std::vector<float> floats(const std::string& key, std::vector<int64_t>* shape = nullptr) const;
  std::vector<int64_t> ints(const std::string& key, std::vector<int64_t>* shape = nullptr) const;
  int64_t vocab() const { return vocab_; }

 private:
  std::unique_ptr<io::SafetensorsFile> file_;
  nlohmann::json json_;
  int64_t vocab_ = 0;
};

struct Diff {
  double max_abs = 0;  // max |a - b|
  double max_rel = 0;  // max |a - b| / max(|b|_inf over the row, 1)
  int64_t worst_row = -1;
  int64_t argmax_mismatch = 0;
};
// Row-wise comparison of two [rows, vocab] logit blocks.
Diff compare_logits(std::span<const float> got, std::span<const float> want, int64_t vocab);
// The same floats bit for bit (memcmp: -0 and NaN payloads count), as the rank tests require.
bool same_bits(std::span<const float> a, std::span<const float> b);

// Runs a whole prompt as one prefill and returns logits of every position [T, V].
std::vector<float> prefill_all(Model& m, std::span<const int32_t> ids);

}  // namespace deepinfer::model::testing
