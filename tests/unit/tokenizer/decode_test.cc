// decode() and the IncrementalDetokenizer: multi-byte characters split across tokens, never a
// broken UTF-8 delta, deltas + flush == decode(all ids).
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::testing {
namespace {

std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer detok(tok, skip_special);
  std::string all;
  for (int32_t id : ids) {
    std::string delta = detok.add(id);
    EXPECT_TRUE(utf8::is_valid(delta)) << "delta " << escape(delta);
    EXPECT_LE(detok.pending_bytes(), 3u);
    all += delta;
  }
  std::string tail = detok.flush();
  EXPECT_TRUE(utf8::is_valid(tail));
  return all + tail;
}

TEST(Decode, SkipSpecial) {
  const Tokenizer& tok = v4();
  auto ids = tok.encode("<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>x</think>");
  EXPECT_EQ(tok.decode(ids), "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>x</think>");
  // Only BOS is special here: <｜User｜>, <｜Assistant｜> and <think> are "special": false.
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "<｜User｜>hi<｜Assistant｜><think>x</think>");
  auto eos = tok.encode("a<｜end▁of▁sentence｜><｜place▁holder▁no▁3｜>b");
  EXPECT_EQ(tok.decode(eos, true), "ab");
}

TEST(Decode, UnknownIdsAreSkipped) {
  const Tokenizer& tok = v4();
  std::vector<int32_t> ids = {-5, *tok.token_to_id("hi"), 1 << 30};
  EXPECT_EQ(tok.decode(ids), "hi");
}

TEST(Decode, BrokenUtf8BecomesReplacement) {
  const Tokenizer& tok = v4();
  // "😀" is several byte-level tokens; dropping the last one leaves an incomplete sequence.
  auto ids = tok.encode("\xf0\x9f\x98\x80");
  ASSERT_GT(ids.size(), 1u);
  ids.pop_back();
  EXPECT_EQ(tok.decode(ids), "\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, MultiByteCharactersSplitAcrossTokens) {
  const Tokenizer& tok = v4();
  const std::string text =
      "😀👨‍👩‍👧‍👦 𝟘𝟙 中文 ﷽ ज़ ä\u0301 \U0001F9FF\U000E0001 end";
  auto ids = tok.encode(text);
  ASSERT_GT(ids.size(), 10u);
  // Some token must hold an incomplete character, or this test checks nothing.
  bool split_char = false;
  for (int32_t id : ids) split_char |= !utf8::is_valid(tok.id_to_bytes(id));
  EXPECT_TRUE(split_char);
  EXPECT_EQ(stream(tok, ids, false), text);
}

TEST(IncrementalDetokenizer, EqualsDecodeOnCorpusAndRandomIds) {
  const Tokenizer& tok = v4();
  for (const auto& doc : load_corpus()) {
    EXPECT_EQ(stream(tok, doc.ids, false), tok.decode(doc.ids)) << doc.name;
    EXPECT_EQ(stream(tok, doc.ids, true), tok.decode(doc.ids, true)) << doc.name;
  }
  // Random ids make arbitrary byte soup: invalid sequences must repair the same way.
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<int32_t> ids;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      ids.push_back(rng() % 4 == 0
                        ? static_cast<int32_t>(rng() % 256) + 3  // single bytes
                        : static_cast<int32_t>(rng() % static_cast<uint32_t>(tok.vocab_size())));
    }
    EXPECT_EQ(stream(tok, ids, false), tok.decode(ids));
    EXPECT_EQ(stream(tok, ids, true), tok.decode(ids, true));
  }
}

TEST(Utf8, LossyMatchesMaximalSubpartRule) {
  auto lossy = [](std::string_view s) {
    std::string out;
    utf8::append_lossy(s, out);
    return out;
  };
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("a\x80"
                  "b"),
            "a" + R + "b");
  EXPECT_EQ(lossy("\xe2\x82"), R);                      // truncated: one replacement
  EXPECT_EQ(lossy("\xe0\x80\x80"), R + R + R);          // overlong
  EXPECT_EQ(lossy("\xf4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(lossy("\xf0\x9f\x98"
                  "a"),
            R + "a");
  EXPECT_EQ(lossy("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(utf8::incomplete_tail("a\xf0\x9f\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("a\xf0\x9f\x98\x80"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("a\xe0\x80"), 0u);  // can never complete
  EXPECT_EQ(utf8::incomplete_tail("\xc3"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("\x80"), 0u);
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
