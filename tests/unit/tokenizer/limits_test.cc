// The tokenizer.json limits (src/tokenizer/tokenizer_limits.h, docs/limits.md): a file just over
// each limit gives an error naming the limit, the value found and the fix; a normal file loads.
// The counts are reached cheaply through the reader with lowered limits; an oversized file is
// sparse (resize_file), so nothing large is written or read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_limits.h"

namespace deepinfer::tokenizer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kHead = R"({
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "decoder": {"type": "ByteLevel"},
)";

// A tiny valid tokenizer.json with `added` as its added_tokens array and `vocab_extra` added to
// the vocabulary.
std::string tiny(const std::string& added = "[]", const std::string& vocab_extra = "") {
  return std::string(kHead) + R"(  "added_tokens": )" + added + R"(,
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4)" +
         vocab_extra +
         R"(}, "merges": ["a b", ["Ġ", "ab"]]}
})";
}

class TokenizerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("di_tok_limits_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text) {
    const auto p = dir_ / "tokenizer.json";
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  Status load(const std::string& text) { return Tokenizer::from_file(write(text)).status(); }
  fs::path dir_;
};

Status read_with(const std::string& text, const TokenizerLimits& limits) {
  detail::TokenizerJson tj;
  return detail::parse_tokenizer_json(text, "t.json", tj, limits);
}

TEST_F(TokenizerLimitsTest, NormalFileLoads) {
  EXPECT_TRUE(load(tiny()).ok()) << load(tiny()).message();
}

TEST_F(TokenizerLimitsTest, FileSize) {
  const std::string path = write(tiny());
  fs::resize_file(path, kMaxTokenizerFileBytes + 1);  // sparse
  Status s = Tokenizer::from_file(path).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.json: a file of 268,435,457 bytes exceeds the "
                                     "limit of 268,435,456 (kMaxTokenizerFileBytes in "
                                     "src/tokenizer/tokenizer_limits.h)"));
}

TEST_F(TokenizerLimitsTest, JsonDepth) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = tiny();
  text.insert(1, R"("x": )" + deep + ",");
  Status s = load(text);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.json: JSON nesting depth 65 exceeds the limit of "
                                     "64 (kMaxTokenizerJsonDepth in "
                                     "src/tokenizer/tokenizer_limits.h)"));
  // 63 levels under the root still load (the unknown key is ignored).
  text = tiny();
  text.insert(1, R"("x": )" + std::string(63, '[') + std::string(63, ']') + ",");
  EXPECT_TRUE(load(text).ok()) << load(text).message();
  // Nesting inside model.vocab (skipped, not stored) counts too.
  TokenizerLimits limits;
  EXPECT_THAT(read_with(tiny("[]", R"(, "z": )" + deep), limits).message(),
              HasSubstr("JSON nesting depth 65"));
}

TEST(TokenizerLimits, VocabCount) {
  TokenizerLimits limits;
  limits.max_vocab = 5;  // the default, kMaxVocab (2,097,152), is reached the same way
  EXPECT_TRUE(read_with(tiny(), limits).ok());
  limits.max_vocab = 4;
  Status s = read_with(tiny(), limits);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "t.json: model.vocab's entry 5 exceeds the limit of 4 (kMaxVocab in "
            "src/tokenizer/tokenizer_limits.h); no supported model has a vocabulary this large");
}

TEST(TokenizerLimits, MergesCount) {
  TokenizerLimits limits;
  limits.max_merges = 2;  // the default, kMaxMerges (2,097,152), is reached the same way
  EXPECT_TRUE(read_with(tiny(), limits).ok());
  limits.max_merges = 1;  // the second merge is in the ["a", "b"] form
  EXPECT_EQ(read_with(tiny(), limits).message(),
            "t.json: model.merges' entry 2 exceeds the limit of 1 (kMaxMerges in "
            "src/tokenizer/tokenizer_limits.h); no supported model has this many merges");
}

TEST_F(TokenizerLimitsTest, TokenBytes) {
  const std::string at(kMaxTokenBytes, 'a');
  EXPECT_TRUE(load(tiny("[]", ", \"" + at + "\": 5")).ok());
  Status vocab = load(tiny("[]", ", \"" + at + "a\": 5"));
  EXPECT_EQ(vocab.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(vocab.message(), HasSubstr("a token of 4,097 bytes in model.vocab exceeds the limit "
                                         "of 4,096 (kMaxTokenBytes in "
                                         "src/tokenizer/tokenizer_limits.h)"));
  TokenizerLimits limits;
  limits.max_token_bytes = 3;
  EXPECT_TRUE(read_with(R"({"model": {"merges": ["abc def", ["abc", "def"]]}})", limits).ok());
  EXPECT_THAT(read_with(R"({"model": {"merges": ["abc defg"]}})", limits).message(),
              HasSubstr("a merge of 8 bytes in model.merges exceeds the limit of 7 (2 x "
                        "kMaxTokenBytes + 1 in src/tokenizer/tokenizer_limits.h)"));
  EXPECT_THAT(read_with(R"({"model": {"merges": [["abc", "defg"]]}})", limits).message(),
              HasSubstr("a token of 4 bytes in model.merges exceeds the limit of 3"));
  Status added = load(tiny(R"([{"id": 5, "content": ")" + at + "a\"}]"));
  EXPECT_THAT(added.message(), HasSubstr("an added token of 4,097 bytes exceeds the limit of "
                                         "4,096 (kMaxTokenBytes"));
}

TEST_F(TokenizerLimitsTest, LargestId) {
  Status vocab = load(tiny("[]", ", \"b\": 2097152"));
  EXPECT_EQ(vocab.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(vocab.message(),
              HasSubstr("model.vocab entry \"b\": id 2,097,152 exceeds the limit of 2,097,151 "
                        "(kMaxVocab - 1 in src/tokenizer/tokenizer_limits.h)"));
  Status added = load(tiny(R"([{"id": 1073741824, "content": "<s>"}])"));
  EXPECT_THAT(added.message(), HasSubstr("added_tokens entry \"<s>\": id 1,073,741,824 exceeds"));
  EXPECT_TRUE(load(tiny(R"([{"id": 1000, "content": "<s>"}])")).ok());
}

TEST_F(TokenizerLimitsTest, AddedTokenCount) {
  auto added = [](size_t n) {
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) {
      s += i ? ",{\"id\":" : "{\"id\":";
      s += std::to_string(5 + i);
      s += ",\"content\":\"<t";
      s += std::to_string(i);
      s += ">\"}";
    }
    return s + "]";
  };
  EXPECT_TRUE(load(tiny(added(100))).ok());
  Status s = load(tiny(added(kMaxAddedTokens + 1)));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("65,537 added_tokens exceeds the limit of 65,536 "
                                     "(kMaxAddedTokens in src/tokenizer/tokenizer_limits.h)"));
}

}  // namespace
}  // namespace deepinfer::tokenizer
