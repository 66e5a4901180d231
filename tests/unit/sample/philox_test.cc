// Philox4x32 against Random123's known-answer vectors (Random123 distribution, file
// tests/kat_vectors; the "philox4x32 7" and "philox4x32 10" lines: counter[4] key[2] ->
// output[4]), plus the properties the sampler relies on.
#include "sample/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace deepinfer::sample {
namespace {

struct Kat {
  PhiloxCounter ctr;
  PhiloxKey key;
  PhiloxCounter expected;
};

TEST(PhiloxTest, Random123KnownAnswers10Rounds) {
  const Kat kats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
       {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) EXPECT_EQ(philox4x32<10>(k.ctr, k.key), k.expected);
}

TEST(PhiloxTest, Random123KnownAnswers7Rounds) {
  const Kat kats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
       {0x00000000, 0x00000000},
       {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
  };
  for (const Kat& k : kats) EXPECT_EQ(philox4x32<7>(k.ctr, k.key), k.expected);
}

TEST(PhiloxTest, UsableAtCompileTime) {
  static_assert(philox4x32<10>({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
  SUCCEED();
}

TEST(PhiloxTest, UniformFromWordsCoversZeroToOne) {
  EXPECT_EQ(uniform_from_words(0, 0), 0.0);
  const double top = uniform_from_words(0xffffffffu, 0xffffffffu);
  EXPECT_LT(top, 1.0);
  EXPECT_GT(top, 1.0 - 1e-15);
  EXPECT_EQ(uniform_from_words(0x80000000u, 0), 0.5);
}

TEST(PhiloxTest, EveryKeyFieldChangesTheDraw) {
  const SampleKey base{42, 7, 0};
  const double u = sample_uniform(base);
  EXPECT_EQ(u, sample_uniform(base));  // pure function
  std::set<double> seen{u};
  seen.insert(sample_uniform({43, 7, 0}));
  seen.insert(sample_uniform({42, 8, 0}));
  seen.insert(sample_uniform({42, 7, 1}));
  seen.insert(sample_uniform({42 + (uint64_t{1} << 32), 7, 0}));  // high seed word counts
  seen.insert(sample_uniform({42, 7 + (uint64_t{1} << 32), 0}));  // high position word too
  EXPECT_EQ(seen.size(), 6u);
}

TEST(PhiloxTest, UniformsLookUniform) {
  // Mean and variance of 100000 draws (U(0,1): 1/2, 1/12); 6-sigma bands, fixed keys.
  const int n = 100000;
  double sum = 0.0, sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const double u = sample_uniform({2026, static_cast<uint64_t>(i), 0});
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
  }
  const double mean = sum / n;
  const double var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 6.0 * std::sqrt(1.0 / 12.0 / n));
  EXPECT_NEAR(var, 1.0 / 12.0, 0.002);
}

}  // namespace
}  // namespace deepinfer::sample
