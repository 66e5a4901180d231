// Shared by the structured-output fuzz targets (regex, json_schema, gbnf): the tiny vocabulary
// every input is compiled against, and the matcher drive that runs after a compile succeeds.
//
// The vocabulary has all 256 one-byte tokens (every string is reachable), a few multi-byte
// tokens that cross grammar boundaries (JSON punctuation with quotes, keywords, a UTF-8
// character, its first byte alone), an EOS and a special token: small enough that a compile
// costs microseconds, varied enough that masks have accepted, rejected and uncertain tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/grammar.h"
#include "structured/matcher.h"
#include "structured/tokenizer_info.h"

namespace deepinfer::structured::fuzz {

inline std::shared_ptr<const TokenizerInfo> vocabulary() {
  static const std::shared_ptr<const TokenizerInfo> info = [] {
    std::vector<std::string> toks;
    for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"", "\":", "\",\"", "\"}", "true", "null", "false", "12", "-0.",
                          "ab", "abc", "  ", "\\n", "\\u00", "\xc3\xa9", "\xe4\xbd\xa0", "\xc3"}) {
      toks.push_back(t);
    }
    toks.push_back("</s>");
    toks.push_back("<special>");
    const int32_t eos = static_cast<int32_t>(toks.size()) - 2;
    return TokenizerInfo::from_vocab(std::move(toks), {eos + 1}, {eos});
  }();
  return info;
}

// Compiles `g` against vocabulary() and, if it compiles, walks a matcher with choices taken
// from `choices`: each step fills the mask, then feeds an allowed token or (high bit set) any
// token, and the mask must agree with accept_token about it; some steps roll back. Then the
// jump-forward string is fed, and finally `choices` itself as raw bytes on a fresh matcher.
// A mask that disagrees with accept_token is a bug: reported and aborted, so the fuzzer
// keeps the input.
inline void compile_and_drive(const Grammar& g, std::string_view choices) {
  auto cg = CompiledGrammar::compile(g, vocabulary());
  if (!cg.ok()) return;
  GrammarMatcher m(*cg);
  const TokenizerInfo& tok = (*cg)->tokenizer();
  std::vector<uint32_t> mask(static_cast<size_t>(tok.mask_words()));
  std::vector<int32_t> allowed;
  const size_t steps = choices.empty() ? 4 : std::min<size_t>(choices.size(), 24);
  for (size_t step = 0; step < steps; ++step) {
    const uint8_t c = choices.empty() ? 0 : static_cast<uint8_t>(choices[step % choices.size()]);
    m.fill_next_token_bitmask(mask);
    allowed.clear();
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
    }
    const int32_t id = (c & 0x80) || allowed.empty()
                           ? static_cast<int32_t>((c * 7u + step) % tok.vocab_size())
                           : allowed[c % allowed.size()];
    const bool in_mask = (mask[id >> 5] >> (id & 31)) & 1;
    const bool accepted = m.accept_token(id);
    if (accepted != in_mask) {
      std::fprintf(stderr, "structured fuzz: token %d is %s by the mask but %s by accept_token\n",
                   id, in_mask ? "allowed" : "refused", accepted ? "accepted" : "refused");
      std::abort();
    }
    if (m.is_terminated()) break;
    if ((c & 0x40) && m.num_accepted_tokens() > 0) m.rollback(1);
  }
  if (!m.is_terminated()) {
    const std::string jump = m.find_jump_forward_string();
    if (!jump.empty() && !m.accept_bytes(jump)) {
      std::fprintf(stderr, "structured fuzz: the jump-forward string was refused\n");
      std::abort();
    }
  }
  GrammarMatcher fresh(*cg);
  (void)fresh.accept_bytes(choices);
  (void)fresh.can_terminate();
}

}  // namespace deepinfer::structured::fuzz
