// Helpers of the whole-model numerics tests (see model_test_util.h).
#include "model_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backend/cpu/cpu_ops.h"
#include "base/numeric_types.h"
#include "derived_checkpoint.h"

namespace deepinfer::model::testing {

std::string source_dir() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return d ? d : ".";
}

std::string model_dir(const std::string& config, const std::string& variant) {
  return deepinfer::testing::checkpoint_dir(source_dir() + "/tests/data/model/" + config + "/" +
                                            variant);
}

backend::Ops& opt_ops() {
  // Two threads: the CI machine has two cores, and results do not depend on the count.
  static std::unique_ptr<backend::Ops> ops = backend::cpu::make_opt_ops(2);
  return *ops;
}

backend::Ops& ref_ops() {
  static std::unique_ptr<backend::Ops> ops = backend::cpu::make_ref_ops();
  return *ops;
}

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, false);
}

}  // namespace

std::unique_ptr<Model> load_test_model(const std::string& config, const std::string& variant,
                                       backend::Ops& ops) {
  auto m = load_model(model_dir(config, variant), ops);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

Goldens::Goldens(const std::string& config) {
  const std::string dir = source_dir() + "/tests/data/model/" + config;
  auto f = io::SafetensorsFile::open(dir + "/goldens.safetensors");
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  if (!f.ok()) return;
  json_ = read_json(dir + "/goldens.json");
  EXPECT_FALSE(json_.is_discarded()) << dir << "/goldens.json";
  if (json_.is_discarded()) return;
  vocab_ = json_.value("vocab_size", 0);
  file_ = std::move(f).value();
}

std::vector<int32_t> Goldens::prompt(const std::string& name) const {
  std::vector<int32_t> ids;
  for (const auto& v : json_.at("prompts").at(name)) ids.push_back(v.get<int32_t>());
  return ids;
}

bool Goldens::has(const std::string& key) const { return file_ && file_->find(key) != nullptr; }

std::vector<float> Goldens::logits(const std::string& key, int64_t* rows) const {
  const io::SafetensorsEntry* e = file_->find(key);
  EXPECT_NE(e, nullptr) << "golden key " << key;
  if (e == nullptr) return {};
  const TensorView v = file_->view(*e);
  EXPECT_EQ(v.dtype, DType::kF32);
  EXPECT_EQ(v.rank(), 2);
  *rows = v.dim(0);
  return {v.ptr<float>(), v.ptr<float>() + v.numel()};
}

std::vector<float> Goldens::floats(const std::string& key, std::vector<int64_t>* shape) const {
  const io::SafetensorsEntry* e = file_->find(key);
  EXPECT_NE(e, nullptr) << "golden key " << key;
  if (e == nullptr) return {};
  const TensorView v = file_->view(*e);
  EXPECT_EQ(v.dtype, DType::kF32) << key;
  if (shape != nullptr) *shape = v.shape;
  return {v.ptr<float>(), v.ptr<float>() + v.numel()};
}

std::vector<int64_t> Goldens::ints(const std::string& key, std::vector<int64_t>* shape) const {
  const io::SafetensorsEntry* e = file_->find(key);
  EXPECT_NE(e, nullptr) << "golden key " << key;
  if (e == nullptr) return {};
  const TensorView v = file_->view(*e);
  EXPECT_EQ(v.dtype, DType::kI64) << key;
  if (shape != nullptr) *shape = v.shape;
  return {v.ptr<int64_t>(), v.ptr<int64_t>() + v.numel()};
}

Diff compare_logits(std::span<const float> got, std::span<const float> want, int64_t vocab) {
  Diff d;
  EXPECT_EQ(got.size(), want.size());
  const int64_t rows = static_cast<int64_t>(std::min(got.size(), want.size())) / vocab;
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = got.data() + r * vocab;
    const float* w = want.data() + r * vocab;
    double amax = 1.0, row_max = 0.0;
    for (int64_t c = 0; c < vocab; ++c) amax = std::max(amax, std::fabs(static_cast<double>(w[c])));
    for (int64_t c = 0; c < vocab; ++c)
      row_max = std::max(row_max, std::fabs(static_cast<double>(g[c]) - w[c]));
    if (row_max > d.max_abs) {
      d.max_abs = row_max;
      d.worst_row = r;
    }
    d.max_rel = std::max(d.max_rel, row_max / amax);
    if (std::max_element(g, g + vocab) - g != std::max_element(w, w + vocab) - w)
      ++d.argmax_mismatch;
  }
  return d;
}

std::vector<float> prefill_all(Model& m, std::span<const int32_t> ids) {
  SequenceCache seq = m.new_sequence();
  auto out = m.extend(seq, ids, LogitsWanted::kAll);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  return deepinfer::backend::to_vector(out->logits);
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace deepinfer::model::testing
