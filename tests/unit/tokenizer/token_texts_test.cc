// TokenTexts against Hugging Face `tokenizers`: decode([id]) and id_to_token(id) for every id
// of the real DeepSeek-V4 tokenizer and of small tokenizers with other models and decoders
// (tests/reference/engram/make_engram_vectors.py), plus the error paths.
#include "tokenizer/token_texts.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engram_test_util.h"
#include "test_util.h"

namespace deepinfer::tokenizer::testing {
namespace {

using json = nlohmann::json;

TEST(TokenTexts, SmallTokenizersMatchHf) {
  for (const char* name : kSmallTokenizers) {
    SCOPED_TRACE(name);
    const std::string dir = engram_data_dir() + "/tokenizers/" + name;
    const json want = json::parse(read_file(dir + "/expected.json"));
    auto texts = TokenTexts::from_file(dir);  // a directory holding tokenizer.json
    ASSERT_TRUE(texts.ok()) << texts.status().to_string();
    ASSERT_EQ(texts->size(), want["size"].get<int32_t>());
    for (int32_t id = 0; id < texts->size(); ++id) {
      EXPECT_EQ(texts->text(id), want["texts"][id].get<std::string>()) << "id " << id;
      const json& tok = want["tokens"][id];
      if (tok.is_null()) {
        EXPECT_FALSE(texts->token(id).has_value()) << "id " << id;
      } else {
        ASSERT_TRUE(texts->token(id).has_value()) << "id " << id;
        EXPECT_EQ(*texts->token(id), tok.get<std::string>()) << "id " << id;
      }
    }
  }
}

TEST(TokenTexts, EdgeTokenizerReportsReassignedAddedIds) {
  auto texts = TokenTexts::from_file(engram_data_dir() + "/tokenizers/edge_bytelevel");
  ASSERT_TRUE(texts.ok()) << texts.status().to_string();
  // The file says 20, 21, 2, 20, 30, 31, 32; the library gives 7, 8, 2, -, 9, -, 10.
  EXPECT_EQ(texts->reassigned_added_tokens().size(), 4u);
  EXPECT_TRUE(texts->is_added(9));  // "KEEP" takes the id of the model's "Ã©"
}

TEST(TokenTexts, V4MatchesHfForEveryId) {
  const V4MapGolden& g = v4_golden();
  const TokenTexts& t = v4_texts();
  ASSERT_EQ(t.size(), g.size);
  uint64_t all = kFnvOffset;
  for (int32_t b = 0; b * kBlockIds < t.size(); ++b) {
    uint64_t h = kFnvOffset;
    for (int32_t id = b * kBlockIds; id < std::min(t.size(), (b + 1) * kBlockIds); ++id) {
      const std::string_view s = t.text(id);
      h = fnv1a(s, h);
      h = fnv1a(std::string_view("\0", 1), h);
      all = fnv1a(s, all);
      all = fnv1a(std::string_view("\0", 1), all);
    }
    EXPECT_EQ(h, g.block_text_hash[static_cast<size_t>(b)])
        << "decoded texts differ in ids [" << b * kBlockIds << ", " << (b + 1) * kBlockIds << ")";
  }
  EXPECT_EQ(all, g.text_hash);
  // Spot checks that read well in a failure.
  EXPECT_EQ(t.text(0), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(t.text(300), "\xEF\xBF\xBD");  // "âĢ": two bytes of a three-byte character
  EXPECT_EQ(*t.token(300), "âĢ");
  EXPECT_TRUE(t.reassigned_added_tokens().empty());
}

Expected<TokenTexts> from_json(const json& j) {
  return TokenTexts::from_json(j.dump(), "test.json");
}

json word_level(json decoder, json normalizer = nullptr, json added = json::array()) {
  return {{"model", {{"type", "WordLevel"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"unk_token", "a"}}},
          {"decoder", decoder},
          {"normalizer", normalizer},
          {"added_tokens", added}};
}

TEST(TokenTexts, Errors) {
  auto r = TokenTexts::from_file("/nonexistent/tokenizer.json");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);

  r = TokenTexts::from_json("{\"model\": {", "broken.json");
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("broken.json"), std::string::npos);

  r = from_json(word_level({{"type", "Timestamps"}}));
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("'Timestamps'"), std::string::npos) << r.status().message();

  r = from_json(
      word_level({{"type", "Replace"}, {"pattern", {{"Regex", "a+"}}}, {"content", "x"}}));
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("a+"), std::string::npos) << r.status().message();

  // An unsupported normalizer matters only for added tokens marked "normalized".
  const json bert = {{"type", "BertNormalizer"}, {"lowercase", true}};
  r = from_json(word_level(nullptr, bert));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  r = from_json(word_level(nullptr, bert,
                           json::array({{{"id", 2}, {"content", "X"}, {"normalized", true}}})));
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("BertNormalizer"), std::string::npos);
  EXPECT_NE(r.status().message().find("\"X\""), std::string::npos) << r.status().message();

  json dup = word_level(nullptr);
  dup["model"]["vocab"] = {{"a", 0}, {"b", 0}};
  r = from_json(dup);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("id 0"), std::string::npos) << r.status().message();

  json other = word_level(nullptr);
  other["model"]["type"] = "Mystery";
  r = from_json(other);
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("Mystery"), std::string::npos);
}

TEST(TokenTexts, DecodersOnOneToken) {
  struct Case {
    json decoder;
    std::string token, want;
  };
  const std::vector<Case> cases = {
      {{{"type", "BPEDecoder"}, {"suffix", "</w>"}}, "ab</w>", "ab"},
      {{{"type", "CTC"}, {"pad_token", "<pad>"}, {"word_delimiter_token", "|"}, {"cleanup", true}},
       "a|b<pad> .",
       "a b."},
      {{{"type", "Metaspace"},
        {"replacement", "_"},
        {"add_prefix_space", false},
        {"prepend_scheme", "never"}},
       "_a_b",
       " a b"},
      {{{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 1}}, "xxxaxx", "xax"},
      {{{"type", "Fuse"}}, "ab", "ab"},
  };
  for (const auto& c : cases) {
    json j = word_level(c.decoder);
    j["model"]["vocab"] = {{c.token, 0}};
    auto t = from_json(j);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->text(0), c.want) << c.decoder.dump();
  }
  // add_prefix_space=false contradicts the default prepend_scheme (always): the library refuses.
  EXPECT_EQ(
      from_json(
          word_level({{"type", "Metaspace"}, {"replacement", "_"}, {"add_prefix_space", false}}))
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  // Strip past the token's start: the library panics; we refuse.
  json j = word_level({{"type", "Strip"}, {"content", "x"}, {"start", 1}, {"stop", 1}});
  j["model"]["vocab"] = {{"x", 0}};
  EXPECT_EQ(from_json(j).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
