// Ops::sample's default (the host processors over each row) draws exactly sample::Sampler's
// token for samplable requests (sample/sample_spec.h): the oracle the CUDA kernel is checked
// against (tests/ops/cuda), on the same cases.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_ops.h"
#include "sample/sampler.h"
#include "sample_cases.h"

namespace deepinfer::backend::testing {
namespace {

TEST(OpsSample, DefaultEqualsTheSampler) {
  std::mt19937 rng(5);
  for (int64_t vocab : {1000, 129280}) {
    const int64_t rows = vocab > 100000 ? 20 : 47;
    const std::vector<float> logits = sample_rows(rng, rows, vocab);
    const std::vector<SampleCase> cases = sample_cases(rows);
    const auto ops = cpu::make_opt_ops(1);
    std::vector<int32_t> got(static_cast<size_t>(rows), -7);
    ops->sample(CMat{logits.data(), rows, vocab}, sample_specs(cases), got.data());
    sample::Sampler sampler;
    for (int64_t r = 0; r < rows; ++r) {
      sample::SampleContext ctx;
      ctx.params = &cases[static_cast<size_t>(r)].params;
      ctx.key = cases[static_cast<size_t>(r)].key;
      ASSERT_TRUE(sample::backend_samplable(*ctx.params, ctx.key.position, false));
      const auto want = sampler.sample(
          std::span<const float>(logits).subspan(static_cast<size_t>(r * vocab),
                                                 static_cast<size_t>(vocab)),
          ctx);
      const int32_t g = got[static_cast<size_t>(r)];
      if (r == rows - 1) {
        EXPECT_FALSE(want.ok());
        EXPECT_EQ(g, sample::kSampleNonFinite);
      } else if (r == rows - 2) {
        EXPECT_FALSE(want.ok());
        EXPECT_EQ(g, sample::kSampleNoToken);
      } else {
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        EXPECT_EQ(g, want->token) << "vocab " << vocab << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::backend::testing
