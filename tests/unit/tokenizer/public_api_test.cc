// include/deepinfer/tokenizer.h against the tokenizer it wraps: the same ids, text, special
// tokens and streamed deltas on the reference corpus, and the same load errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "deepinfer/tokenizer.h"
#include "test_util.h"

namespace deepinfer {
namespace {

namespace t = tokenizer::testing;

TEST(PublicTokenizer, MatchesTheTokenizerModule) {
  auto pub = Tokenizer::from_file(t::v4_tokenizer_path());
  ASSERT_TRUE(pub.ok()) << pub.status().to_string();
  const tokenizer::Tokenizer& ref = t::v4();
  EXPECT_EQ(pub->vocab_size(), ref.vocab_size());
  EXPECT_EQ(pub->bos_id(), ref.bos_id());
  EXPECT_EQ(pub->eos_id(), ref.eos_id());
  EXPECT_EQ(pub->path(), ref.path());
  EXPECT_EQ(pub->token_to_id("<｜User｜>"), ref.token_to_id("<｜User｜>"));
  for (int32_t id : {0, 1, 100, pub->vocab_size() - 1, pub->vocab_size()}) {
    EXPECT_EQ(pub->id_to_token(id), ref.id_to_token(id)) << id;
    EXPECT_EQ(pub->is_special(id), ref.is_special(id)) << id;
  }
  const std::vector<t::Document> corpus = t::load_corpus();
  ASSERT_FALSE(corpus.empty());
  for (const t::Document& d : corpus) {
    for (bool special : {true, false}) {
      const std::vector<int32_t> ids = pub->encode(d.text, special);
      EXPECT_EQ(ids, ref.encode(d.text, special)) << d.name;
      EXPECT_EQ(pub->pieces(d.text, special), ref.pieces(d.text, special)) << d.name;
      EXPECT_EQ(pub->decode(ids, special), ref.decode(ids, special)) << d.name;
      IncrementalDetokenizer detok(*pub, special);
      std::string streamed;
      for (int32_t id : ids) streamed += detok.add(id);
      streamed += detok.flush();
      EXPECT_EQ(detok.pending_bytes(), 0u);
      EXPECT_EQ(streamed, ref.decode(ids, special)) << d.name;
    }
  }
}

TEST(PublicTokenizer, LoadErrorsAreTheModules) {
  const std::string missing = t::source_dir() + "/no/such/tokenizer.json";
  auto pub = Tokenizer::from_file(missing);
  auto ref = tokenizer::Tokenizer::from_file(missing);
  ASSERT_FALSE(pub.ok());
  EXPECT_EQ(pub.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(pub.status().message(), ref.status().message());
}

}  // namespace
}  // namespace deepinfer
