// The pre-tokenizer scanners on tricky strings (expected pieces from HF's
// `tokenizer.pre_tokenizer.pre_tokenize_str`), and the Unicode class table against the classes
// HF's Oniguruma reports for every code point (tests/data/tokenizer/onig_classes.txt).
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"
#include "tokenizer/unicode_classes.h"

namespace deepinfer::tokenizer::testing {
namespace {

struct Case {
  const char* text;
  std::vector<std::string> pieces;
};

TEST(PreTokenizer, DeepSeekPiecesMatchHf) {
  const std::vector<Case> cases = {
      {"Hello world", {"Hello", " world"}},
      {"  hello", {" ", " hello"}},
      {"a  b", {"a", " ", " b"}},
      {"x \n y", {"x", " \n", " y"}},
      {"a\n\n b", {"a", "\n\n", " b"}},
      {"a \t\n\t b", {"a", " \t\n", "\t", " b"}},
      {"   ", {"   "}},
      {" \u00a0x", {" ", "\u00a0x"}},
      {"...abc", {"...", "abc"}},
      {".abc", {".abc"}},
      {" .abc", {" .", "abc"}},
      {"12345678", {"123", "456", "78"}},
      {"abc123def", {"abc", "123", "def"}},
      {"x1234", {"x", "123", "4"}},
      {" \u4e2d\u6587 \u30c6\u30b9\u30c8", {" ", "\u4e2d\u6587", " ", "\u30c6\u30b9\u30c8"}},
      {"\u4e2d\u6587abc", {"\u4e2d\u6587", "abc"}},
      {"hello, world!\n\n", {"hello", ",", " world", "!\n\n"}},
      {"a\r\n\r\nb", {"a", "\r\n\r\n", "b"}},
      {"\u200b\u200bx", {"\u200b", "\u200bx"}},
      {"e\u0301\u0301", {"e\u0301\u0301"}},
      {"\u0301\u0301a", {"\u0301\u0301a"}},
      {"1\u0301", {"1", "\u0301"}},
      {"don't", {"don", "'t"}},
      {"$100", {"$", "100"}},
      {" (a)", {" (", "a", ")"}},
      {"x\u3000y", {"x", "\u3000y"}},
      {"a\u2028b", {"a", "\u2028b"}},
      {"\U0001F600\U0001F600 x", {"\U0001F600\U0001F600", " x"}},
      {"a \u00a0 b", {"a", " \u00a0", " b"}},
      {"a_b", {"a", "_b"}},
      {"__init__", {"__", "init", "__"}},
      {"<\xef\xbd\x9cUser\xef\xbd\x9c>hi",
       {"<\xef\xbd\x9cUser\xef\xbd\x9c>", "hi"}},  // an added token
  };
  const Tokenizer& tok = v4();
  for (const auto& c : cases) {
    EXPECT_EQ(tok.pieces(c.text), c.pieces) << "text: " << escape(c.text);
  }
}

TEST(PreTokenizer, RecognisesOnlyKnownPatterns) {
  EXPECT_EQ(split_kind_for_regex("\\p{N}{1,3}"), SplitKind::kDigits);
  EXPECT_EQ(split_kind_for_regex(kGpt2Pattern), SplitKind::kGpt2);
  EXPECT_EQ(split_kind_for_regex("\\p{N}{1,4}"), std::nullopt);
}

TEST(PreTokenizer, Gpt2Pattern) {
  PreTokenizer pre({SplitKind::kGpt2});
  PreTokenizerScratch scratch;
  auto split = [&](std::string_view s) {
    std::vector<ByteRange> r;
    pre.split(s, scratch, r);
    std::vector<std::string> out;
    for (auto x : r) out.emplace_back(s.substr(x.begin, x.end - x.begin));
    return out;
  };
  // From HF: pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(...), mapped back.
  EXPECT_EQ(split("Hello world's  end!!\n\n x12 3"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " end", "!!", "\n\n", " x",
                                      "12", " 3"}));
}

TEST(UnicodeClasses, MatchOnigurumaForEveryCodePoint) {
  // Expected bits per code point from the file; CJK and CR/LF bits are ours, masked off.
  std::vector<uint8_t> want(0x110000, 0);
  std::istringstream in(read_file(source_dir() + "/tests/data/tokenizer/onig_classes.txt"));
  std::string line;
  size_t ranges = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    unsigned first, last, bits;
    ASSERT_EQ(std::sscanf(line.c_str(), "%x %x %u", &first, &last, &bits), 3) << line;
    for (unsigned c = first; c <= last; ++c) want[c] = static_cast<uint8_t>(bits);
    ++ranges;
  }
  ASSERT_GT(ranges, 1000u);
  const auto& table = UnicodeClasses::get();
  size_t bad = 0;
  for (uint32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    uint8_t got = table.of(c) & 63;
    if (got != want[c] && ++bad <= 20) {
      ADD_FAILURE() << "U+" << std::hex << c << ": ours " << int(got) << ", Oniguruma "
                    << int(want[c]);
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(table.of(0x4E00) & kClassCjk);
  EXPECT_TRUE(table.of(0x9FA5) & kClassCjk);
  EXPECT_FALSE(table.of(0x9FA6) & kClassCjk);
  EXPECT_TRUE(table.of(0x30FB) & kClassCjk);
  EXPECT_TRUE(table.of('\n') & kClassCrLf);
  EXPECT_FALSE(table.of(0x200B) & kClassSpace);
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
