// The Engram compressed token map of DeepSeek-V4.1 (spec §5 last bullet, §6.7 item 2): token
// ids whose texts normalise alike (" The", "the", "THE", "thé") share one compressed id, and
// the Engram hashes run over compressed ids.
//
// As the reference builds it (NeMo / official `engram.py`, `_compressed_token_map`): for every
// id in [0, len(tokenizer)), text = decode([id], skip_special_tokens=False) (TokenTexts); the
// key is the raw token string (id_to_token) when the text contains U+FFFD, else the text put
// through the Engram normalizer below, or the text itself when that comes out empty. Compressed
// ids are given in order of the first appearance of each key. The number of keys feeds every
// hash multiplier, so it must equal the config's engram_compressed_vocab_size (99,092 for the
// released V4.1, whose tokenizer is V4's): check_compressed_vocab_size says what differs.
//
// The Engram normalizer (HF normalizers, in order): NFKC, NFD, StripAccents, Lowercase,
// Replace(regex "[ \t\r\n]+" -> " "), Replace(regex "^ $" -> U+E000), Strip, Replace(U+E000 ->
// " "): a lone space survives Strip as " ", any other text loses its outer White_Space.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/token_texts.h"

namespace deepinfer::tokenizer {

struct CompressedVocab {
  std::vector<int32_t> map;       // token id -> compressed id, size TokenTexts::size()
  std::vector<int32_t> first_id;  // compressed id -> the first token id with that key
  int32_t count = 0;              // number of compressed ids
};

// The eight-step Engram normalizer.
const TextNormalizer& engram_normalizer();

// The key a token id is grouped by.
std::string engram_key(const TokenTexts& texts, int32_t id);

CompressedVocab build_compressed_vocab(const TokenTexts& texts);

// OK when vocab.count == expected (engram_compressed_vocab_size). Otherwise InvalidArgument with
// both counts, the tokenizer file, and the first tokens past the expected count (or the last
// ones, when there are too few), each with its id, text and key.
Status check_compressed_vocab_size(const CompressedVocab& vocab, const TokenTexts& texts,
                                   int64_t expected);

}  // namespace deepinfer::tokenizer
