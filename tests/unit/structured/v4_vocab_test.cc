// The real DeepSeek-V4 vocabulary (129,280 ids): random generations under JSON schemas where at
// every few steps the fast mask is compared with the naive per-token mask over all ids, and
// the finished document is parsed as JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "structured/compiler.h"
#include "test_util.h"

namespace deepinfer::structured {
namespace {

std::shared_ptr<const TokenizerInfo> v4() {
  static std::shared_ptr<const TokenizerInfo> info = [] {
    // The package's copy, shared/tokenizers/deepseek_v4/tokenizer.json minified (the same JSON without whitespace).
    const std::string path =
        testing::source_dir() + "/python/deepinfer/data/deepseek_v4/tokenizer.json";
    std::shared_ptr<const TokenizerInfo> out;
    auto tok = tokenizer::Tokenizer::from_file(path);
    EXPECT_TRUE(tok.ok()) << tok.status().to_string();
    if (tok.ok()) out = TokenizerInfo::from_tokenizer(tok.value());
    return out;
  }();
  return info;
}

bool bit(const std::vector<uint32_t>& m, int32_t id) { return (m[id >> 5] >> (id & 31)) & 1; }

TEST(StructuredV4, RandomGenerationsMatchNaiveMasksAndParse) {
  auto tok = v4();
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(tok->vocab_size(), 129280);
  ASSERT_FALSE(tok->eos_ids().empty());
  GrammarCompiler compiler(tok);
  const char* schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","bb","c c"]},"maxItems":3}},"required":["name","age"]})",
      R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},"c":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/t"})",
  };
  std::mt19937 rng(11);
  for (const char* schema : schemas) {
    auto cg = compiler.compile("json", schema);
    ASSERT_TRUE(cg.ok()) << cg.status().to_string();
    for (int walk = 0; walk < 4; ++walk) {
      GrammarMatcher m(cg.value());
      std::string text;
      std::vector<uint32_t> mask(tok->mask_words());
      for (int step = 0; step < 120 && !m.is_terminated(); ++step) {
        m.fill_next_token_bitmask(mask);
        if (step % 10 == 0) {
          auto naive = testing::naive_mask(m);
          auto diff = testing::mask_diff(mask, naive, tok->vocab_size());
          ASSERT_TRUE(diff.empty()) << "after '" << text << "': id " << diff[0] << " '"
                                    << tok->bytes(diff[0]) << "' fast=" << bit(mask, diff[0]);
        }
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < tok->vocab_size(); ++id) {
          if (bit(mask, id)) ids.push_back(id);
        }
        ASSERT_FALSE(ids.empty()) << "dead end after '" << text << "'";
        // Prefer EOS and short tokens, so that documents finish.
        int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        if (bit(mask, tok->eos_ids()[0]))
          id = tok->eos_ids()[0];
        else if (rng() % 2 == 0) {
          std::vector<int32_t> shorts;
          for (int32_t x : ids) {
            if (tok->bytes(x).size() == 1) shorts.push_back(x);
          }
          if (!shorts.empty())
            id = shorts[std::uniform_int_distribution<size_t>(0, shorts.size() - 1)(rng)];
        }
        ASSERT_TRUE(m.accept_token(id));
        if (!m.is_terminated()) text += tok->bytes(id);
      }
      if (m.is_terminated()) {
        auto doc = nlohmann::json::parse(text, nullptr, false);
        EXPECT_FALSE(doc.is_discarded()) << text;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::structured
