// The limits of the tokenizer.json reader, in one place; docs/limits.md lists them with every
// other parser's. Real tokenizers sit far below them (DeepSeek-V4: a 7.5 MB file, 128k vocab
// entries, 127k merges, ~800 added tokens, tokens under 200 bytes, JSON nested 5 deep); they
// keep a corrupt or hostile file from allocating without bound (the per-id tables are sized by
// the largest id) or recursing off the stack.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::tokenizer {

inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{256} << 20;
inline constexpr size_t kMaxTokenizerJsonDepth = 64;
// model.vocab entries; every id (vocab or added token) must also be below it.
inline constexpr size_t kMaxVocab = size_t{1} << 21;
inline constexpr size_t kMaxMerges = size_t{1} << 21;
inline constexpr size_t kMaxAddedTokens = size_t{1} << 16;
// Bytes of one token (a vocab key, one side of a merge, an added token's content).
inline constexpr size_t kMaxTokenBytes = 4096;

// The reader's limits as values (detail::parse_tokenizer_json), so that a test can lower the
// counts to reach them cheaply.
struct TokenizerLimits {
  size_t max_json_depth = kMaxTokenizerJsonDepth;
  size_t max_vocab = kMaxVocab;
  size_t max_merges = kMaxMerges;
  size_t max_token_bytes = kMaxTokenBytes;
};

}  // namespace deepinfer::tokenizer
