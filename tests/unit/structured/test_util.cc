// Helpers for the structured-output tests; see test_util.h.
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace deepinfer::structured::testing {

std::string source_dir() {
  const char* s = std::getenv("DEEPINFER_SOURCE_DIR");
  return s ? s : "/work/main";
}


std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::shared_ptr<const TokenizerInfo> byte_vocab() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  toks.push_back("</s>");
  toks.push_back("<special>");
  return TokenizerInfo::from_vocab(std::move(toks), {257}, {256});
}

std::shared_ptr<const TokenizerInfo> small_vocab(const std::vector<std::string>& tokens) {
  std::vector<std::string> toks = tokens;
  toks.push_back("<eos>");
  const int32_t eos = static_cast<int32_t>(toks.size() - 1);
  return TokenizerInfo::from_vocab(std::move(toks), {}, {eos});
}

std::shared_ptr<const CompiledGrammar> compile_or_die(const Grammar& g,
                                                      std::shared_ptr<const TokenizerInfo> tok) {
  auto cg = CompiledGrammar::compile(g, std::move(tok));
  EXPECT_TRUE(cg.ok()) << cg.status().to_string();
  return cg.ok() ? cg.value() : nullptr;
}

bool full_match(const std::shared_ptr<const CompiledGrammar>& cg, std::string_view s) {
  GrammarMatcher m(cg);
  return m.accept_bytes(s) && m.can_terminate();
}

std::vector<uint32_t> fast_mask(GrammarMatcher& m) {
  std::vector<uint32_t> words(m.grammar().tokenizer().mask_words());
  m.fill_next_token_bitmask(words);
  return words;
}

std::vector<uint32_t> naive_mask(const GrammarMatcher& m) {
  const TokenizerInfo& tok = m.grammar().tokenizer();
  std::vector<uint32_t> words(tok.mask_words(), 0);
  GrammarMatcher copy = m;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (copy.accept_token(id)) {
      words[id >> 5] |= 1u << (id & 31);
      copy.rollback(1);
    }
  }
  return words;
}

std::vector<int32_t> mask_diff(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                               int32_t vocab) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < vocab; ++id) {
    if (((a[id >> 5] >> (id & 31)) & 1) != ((b[id >> 5] >> (id & 31)) & 1)) out.push_back(id);
  }
  return out;
}

}  // namespace deepinfer::structured::testing
