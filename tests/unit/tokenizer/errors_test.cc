// from_file errors: missing file, truncated JSON, unsupported model/pre-tokenizer, bad merges;
// from_json_text (the in-memory entry the fuzzer uses) loads and fails the same way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace deepinfer::tokenizer::testing {
namespace {

namespace fs = std::filesystem;

class TokenizerErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("di_tok_err_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir_;
};

constexpr const char* kTiny = R"({
  "added_tokens": [{"id": 5, "content": "<s>", "special": true, "normalized": false,
                    "lstrip": false, "rstrip": false, "single_word": false}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4}, "merges": ["a b", "Ġ ab"]}
})";

TEST_F(TokenizerErrors, MissingFileNamesThePath) {
  auto t = Tokenizer::from_file((dir_ / "nope.json").string());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("nope.json"), std::string::npos);
  auto d = Tokenizer::from_file(dir_.string());  // a directory without tokenizer.json
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("no tokenizer.json"), std::string::npos);
}

TEST_F(TokenizerErrors, TruncatedJson) {
  std::string text = read_file(v4_tokenizer_path());
  auto path = write("tokenizer.json", text.substr(0, text.size() / 2));
  auto t = Tokenizer::from_file(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(t.status().message().find("malformed JSON"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(path), std::string::npos);
}

TEST_F(TokenizerErrors, NonBpeModel) {
  auto path = write("wp.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  auto t = Tokenizer::from_file(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(t.status().message().find("model type 'WordPiece'"), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("wp.json"), std::string::npos);
}

TEST_F(TokenizerErrors, UnsupportedPreTokenizerAndNormalizer) {
  std::string s = kTiny;
  auto bad_regex = s;
  bad_regex.replace(
      bad_regex.find("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"),
      strlen("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"),
      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\d+"},
                        "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})");
  auto t = Tokenizer::from_file(write("a.json", bad_regex));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(t.status().message().find("\\\\d+"), std::string::npos) << t.status().message();

  auto bad_norm = s;
  bad_norm.replace(bad_norm.find("\"normalizer\": null"), strlen("\"normalizer\": null"),
                   R"("normalizer": {"type": "NFKC"})");
  auto n = Tokenizer::from_file(write("b.json", bad_norm));
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("normalizer 'NFKC'"), std::string::npos)
      << n.status().message();
}

TEST_F(TokenizerErrors, MergeWithUnknownToken) {
  std::string s = kTiny;
  s.replace(s.find("\"Ġ ab\""), strlen("\"Ġ ab\""), "\"Ġ zz\"");
  auto t = Tokenizer::from_file(write("c.json", s));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("model.merges[1]"), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("\"zz\""), std::string::npos) << t.status().message();
}

TEST_F(TokenizerErrors, TinyTokenizerWorksFromDirectory) {
  write("tokenizer.json", kTiny);
  auto t = Tokenizer::from_file(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->encode("ab ab<s>"), (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(t->encode("ab ab<s>", false),
            (std::vector<int32_t>{2, 4}));  // '<', 's', '>' are unknown: dropped
  EXPECT_EQ(t->decode(std::vector<int32_t>{2, 4, 5}), "ab ab<s>");
  EXPECT_EQ(t->vocab_size(), 6);
  EXPECT_EQ(t->bos_id(), 5);
}

TEST_F(TokenizerErrors, FromJsonTextMatchesFromFile) {
  auto t = Tokenizer::from_json_text(kTiny, "inline.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto f = Tokenizer::from_file(write("tokenizer.json", kTiny));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(t->encode("ab ab<s>"), f->encode("ab ab<s>"));
  EXPECT_EQ(t->vocab_size(), 6);
  EXPECT_EQ(t->bos_id(), 5);  // "<s>", a well-known name: no tokenizer_config.json is read
  EXPECT_EQ(t->path(), "inline.json");

  std::string text = kTiny;
  auto cut = Tokenizer::from_json_text(std::string_view(text).substr(0, text.size() / 2), "x.json");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(cut.status().message().find("x.json: malformed JSON"), std::string::npos)
      << cut.status().message();
  auto wp = Tokenizer::from_json_text(R"({"model": {"type": "WordPiece", "vocab": {}}})", "w.json");
  ASSERT_FALSE(wp.ok());
  EXPECT_EQ(wp.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
