// The two BPE merge loops (array scan for short words, heap for long ones) give the same ids.
#include "tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "tokenizer/tokenizer_data.h"

namespace deepinfer::tokenizer::testing {
namespace {

TEST(Bpe, SmallAndHeapMergeLoopsAgree) {
  const BpeModel& bpe = v4().data()->bpe;
  std::mt19937 rng(1234);
  const std::vector<std::string> alphabet = {
      "a", "b", "e", "t",  "h",   " ",    "in",      "the", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
      "=", "-", "0", "\n", "ing", "tion", "\xc3\xa9"};
  BpeScratch s1, s2;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string word;
    int n = 1 + static_cast<int>(rng() % 60);
    if (iter % 100 == 0) n = 400;
    for (int k = 0; k < n; ++k) word += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> a, b;
    bpe.initial_symbols(word, s1);
    bpe.merge_small(s1, a);
    bpe.initial_symbols(word, s2);
    bpe.merge_heap(s2, b);
    ASSERT_EQ(a, b) << escape(word);
  }
}

TEST(Bpe, LongRepeatedWords) {
  const Tokenizer& tok = v4();
  // Long single pieces go through the heap loop; decode gives the text back.
  for (const std::string unit : {"a", "ab", "\xe4\xb8\xad", "="}) {
    std::string s;
    for (int k = 0; k < 3000; ++k) s += unit;
    auto ids = tok.encode(s);
    EXPECT_LT(ids.size(), 3000u * unit.size());
    EXPECT_EQ(tok.decode(ids), s);
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
