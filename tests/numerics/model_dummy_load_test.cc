// Load format "dummy" on the CPU backends: a directory with config.json alone (tokenizer.json
// too for a V4.1 model with Engram layers, whose hash needs the vocabulary) loads with random
// weights, prefills and decodes with finite logits, and the same seed gives the same logits bit
// for bit (another seed others). The distributions themselves: tests/unit/io/dummy_weights_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "config_only_dir.h"
#include "model_test_util.h"

namespace deepinfer::model::testing {
namespace {

struct Case {
  const char* config;
  const char* variant;
  bool tokenizer;
};
const Case kCases[] = {{"v4_tiny_a", "official_quant", false},
                       {"v4_tiny_a", "official_fp32", false},
                       {"v41_tiny_a", "official_quant", true},
                       {"v41_tiny_a", "official_bf16", true}};

std::unique_ptr<Model> load_dummy(const std::string& dir, backend::Ops& ops, uint64_t seed) {
  auto m = load_model(dir, ops, {io::LoadFormat::kDummy, seed});
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Prefill logits of a fixed prompt, then those of four greedy decode steps, all in one vector.
std::vector<float> run(Model& m) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<int32_t>(3 + (i * 37) % 200));
  SequenceCache seq = m.new_sequence();
  auto out = m.extend(seq, prompt, LogitsWanted::kAll);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  std::vector<float> all = deepinfer::backend::to_vector(out->logits);
  const int64_t V = m.vocab_size();
  for (int step = 0; step < 4; ++step) {
    const float* last = all.data() + all.size() - static_cast<size_t>(V);
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + V) - last);
    auto d = m.decode(seq, next);
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    if (!d.ok()) return {};
    all.insert(all.end(), d->logits.begin(), d->logits.end());
  }
  return all;
}

TEST(ModelDummyLoad, ConfigOnlyDirectoryRunsWithFiniteLogits) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(c.config) + "/" + c.variant);
    const deepinfer::testing::ConfigOnlyDir dir(
        source_dir() + "/tests/data/model/" + c.config + "/" + c.variant, c.tokenizer);
    // The usual load needs the safetensors this directory does not have.
    EXPECT_FALSE(load_model(dir.path(), opt_ops()).ok());
    for (backend::Ops* ops : {&opt_ops(), &ref_ops()}) {
      auto m = load_dummy(dir.path(), *ops, 7);
      ASSERT_NE(m, nullptr);
      EXPECT_FALSE(m->has_mtp());  // no drafter in a dummy model
      const std::vector<float> logits = run(*m);
      ASSERT_EQ(logits.size(), static_cast<size_t>(16 * m->vocab_size()));
      float lo = logits[0], hi = logits[0];
      for (float v : logits) {
        ASSERT_TRUE(std::isfinite(v)) << ops->name();
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      EXPECT_GT(hi - lo, 1e-3f) << ops->name() << ": logits do not depend on the token";
    }
  }
}

TEST(ModelDummyLoad, SameSeedSameLogitsBitForBit) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(c.config) + "/" + c.variant);
    const deepinfer::testing::ConfigOnlyDir dir(
        source_dir() + "/tests/data/model/" + c.config + "/" + c.variant, c.tokenizer);
    auto a = load_dummy(dir.path(), opt_ops(), 11);
    auto b = load_dummy(dir.path(), opt_ops(), 11);
    auto other = load_dummy(dir.path(), opt_ops(), 12);
    ASSERT_TRUE(a && b && other);
    const std::vector<float> la = run(*a), lb = run(*b);
    ASSERT_EQ(la.size(), lb.size());
    ASSERT_FALSE(la.empty());
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
    EXPECT_NE(la, run(*other));
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
