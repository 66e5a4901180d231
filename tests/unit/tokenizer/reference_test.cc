// Every id of every corpus document against the Hugging Face `tokenizers` reference
// (tests/reference/tokenizer/make_vectors.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <sstream>
#include <thread>

#include "test_util.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::testing {
namespace {

// Explains the first mismatch: position, ids around it, and the pieces around it.
std::string explain(const Tokenizer& tok, const Document& doc, const std::vector<int32_t>& want,
                    const std::vector<int32_t>& got, bool allow_special) {
  size_t pos = 0;
  while (pos < want.size() && pos < got.size() && want[pos] == got[pos]) ++pos;
  std::ostringstream os;
  os << "document '" << doc.name << "' (" << doc.text.size()
     << " bytes, allow_special=" << allow_special << "): first difference at id #" << pos
     << " (expected " << want.size() << " ids, got " << got.size() << ")\n";
  auto show = [&](const char* label, const std::vector<int32_t>& ids) {
    os << "  " << label << ":";
    for (size_t k = pos >= 5 ? pos - 5 : 0; k < std::min(ids.size(), pos + 6); ++k) {
      os << (k == pos ? " >>" : " ") << ids[k] << "'"
         << escape(std::string(tok.id_to_bytes(ids[k]))) << "'";
    }
    os << "\n";
  };
  show("expected", want);
  show("got     ", got);
  // Which pre-tokenizer piece holds the mismatch (our pieces, each encoded alone).
  auto pieces = tok.pieces(doc.text, allow_special);
  size_t count = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    size_t n = tok.encode(pieces[k], allow_special).size();
    if (count + n > pos || k + 1 == pieces.size()) {
      os << "  our pieces around it:";
      for (size_t j = k >= 3 ? k - 3 : 0; j < std::min(pieces.size(), k + 4); ++j) {
        os << (j == k ? " >>" : " ") << "[" << escape(pieces[j]) << "]";
      }
      os << "\n";
      break;
    }
    count += n;
  }
  return os.str();
}

// Compares every stored id list of `docs` with `tok`; returns the number of ids compared.
size_t compare_all(const Tokenizer& tok, const std::vector<Document>& docs) {
  size_t checked = 0, failed = 0;
  for (const auto& doc : docs) {
    if (doc.has_ids) {
      auto got = tok.encode(doc.text);
      if (got != doc.ids) {
        ++failed;
        ADD_FAILURE() << explain(tok, doc, doc.ids, got, true);
      }
      checked += doc.ids.size();
    }
    if (doc.has_plain) {
      auto plain = tok.encode(doc.text, /*allow_special=*/false);
      if (plain != doc.plain_ids) {
        ++failed;
        ADD_FAILURE() << explain(tok, doc, doc.plain_ids, plain, false);
      }
      checked += doc.plain_ids.size();
    }
  }
  EXPECT_EQ(failed, 0u);
  return checked;
}

TEST(TokenizerReference, EveryIdOfEveryDocument) {
  auto docs = load_corpus();
  ASSERT_GT(docs.size(), 100u);
  size_t checked = compare_all(v4(), docs);
  std::printf("[ compared %zu reference ids over %zu documents ]\n", checked, docs.size());
}

// Small tokenizers cut from the real one: added tokens with lstrip / rstrip / single_word /
// normalized / special flags, and GPT-2's ByteLevel regex (make_vectors.py: tiny_tokenizer).
TEST(TokenizerReference, TinyTokenizersWithTokenFlagsAndGpt2Regex) {
  for (const std::string name : {"tiny_flags", "tiny_gpt2"}) {
    auto tok = Tokenizer::from_file(source_dir() + "/tests/data/tokenizer/" + name);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    auto docs = load_corpus("_" + name);
    size_t checked = compare_all(*tok, docs);
    EXPECT_GT(checked, 10000u) << name;
    std::printf("[ %s: compared %zu reference ids ]\n", name.c_str(), checked);
  }
}

TEST(TokenizerReference, RoundTripValidUtf8) {
  const Tokenizer& tok = v4();
  for (const auto& doc : load_corpus()) {
    if (!utf8::is_valid(doc.text) || !doc.has_ids) continue;
    EXPECT_EQ(tok.decode(tok.encode(doc.text)), doc.text) << doc.name;
  }
}

TEST(TokenizerReference, InvalidUtf8DecodesToPythonReplacement) {
  const Tokenizer& tok = v4();
  // Python: b"x\xe2\x82 y\xf0\x9f\x98 z\xc3 end\xe4".decode("utf-8", "replace")
  std::string text = "x\xe2\x82 y\xf0\x9f\x98 z\xc3 end\xe4";
  EXPECT_EQ(tok.decode(tok.encode(text)),
            "x\xEF\xBF\xBD y\xEF\xBF\xBD z\xEF\xBF\xBD end\xEF\xBF\xBD");
  // Surrogates and overlongs: one U+FFFD per byte (no valid prefix).
  EXPECT_EQ(tok.decode(tok.encode("\xed\xa0\x80")), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode(tok.encode("\xc0\x80")), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok.encode("a\xff"), tok.encode("a\xEF\xBF\xBD"));
}

TEST(TokenizerReference, ConcurrentEncodeMatches) {
  const Tokenizer& tok = v4();
  auto docs = load_corpus();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = static_cast<size_t>(t); k < docs.size(); k += 2) {
        if (tok.encode(docs[k].text) != docs[k].ids) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerReference, KeyIdsAndVocab) {
  const Tokenizer& tok = v4();
  EXPECT_EQ(tok.vocab_size(), 129280);
  EXPECT_EQ(tok.bos_id(), 0);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.token_to_id("<｜User｜>"), 128803);
  EXPECT_EQ(tok.token_to_id("<｜Assistant｜>"), 128804);
  EXPECT_EQ(tok.token_to_id("<think>"), 128821);
  EXPECT_EQ(tok.token_to_id("</think>"), 128822);
  EXPECT_EQ(tok.token_to_id("｜DSML｜"), 128825);
  EXPECT_EQ(tok.token_to_id("<｜latest_reminder｜>"), 128828);
  EXPECT_EQ(tok.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(128803), "<｜User｜>");
  EXPECT_EQ(tok.id_to_token(-1), std::nullopt);
  EXPECT_EQ(tok.id_to_token(129280), std::nullopt);
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_TRUE(tok.is_special(128000));
  // <｜User｜>, <think> are added tokens marked "special": false in tokenizer.json.
  EXPECT_FALSE(tok.is_special(128803));
  EXPECT_FALSE(tok.is_special(128821));
  EXPECT_FALSE(tok.is_special(100));
  EXPECT_EQ(tok.encode("<｜User｜>hi<｜Assistant｜>"),
            (std::vector<int32_t>{128803, *tok.token_to_id("hi"), 128804}));
  EXPECT_TRUE(tok.encode("").empty());
}

}  // namespace
}  // namespace deepinfer::tokenizer::testing
