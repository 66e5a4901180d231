// Shared helpers for the structured-output tests: data paths, small vocabularies, and a
// reference "naive" mask (every token tried on a copy of the matcher) that the fast mask must
// equal exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/grammar.h"
#include "structured/matcher.h"
#include "structured/tokenizer_info.h"

namespace deepinfer::structured::testing {

std::string source_dir();
std::string read_file(const std::string& path);

// 256 one-byte tokens plus an EOS (id 256) and a special token (id 257).
std::shared_ptr<const TokenizerInfo> byte_vocab();
// A small vocabulary of the given token strings; EOS is appended as the last id.
std::shared_ptr<const TokenizerInfo> small_vocab(const std::vector<std::string>& tokens);

std::shared_ptr<const CompiledGrammar> compile_or_die(const Grammar& g,
                                                      std::shared_ptr<const TokenizerInfo> tok);
// True if the whole of `s` is in the grammar's language.
bool full_match(const std::shared_ptr<const CompiledGrammar>& cg, std::string_view s);

std::vector<uint32_t> fast_mask(GrammarMatcher& m);
// Bit i set iff accept_token(i) succeeds on a copy of the matcher.
std::vector<uint32_t> naive_mask(const GrammarMatcher& m);
// Ids where the two masks differ (for failure messages).
std::vector<int32_t> mask_diff(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                               int32_t vocab);

}  // namespace deepinfer::structured::testing
