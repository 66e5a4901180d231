// TokenizerInfo: the vocabulary as the grammar engine sees it: each id's bytes, which ids are
// special (never allowed by a grammar) or end-of-sequence (allowed exactly when the grammar is
// complete), and a byte trie over the non-special tokens in sorted order so that shared
// prefixes are walked once when masks are precomputed. Built once per tokenizer and shared by
// every compiled grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::structured {

struct TrieNode {
  uint8_t byte = 0;
  int32_t first_child = -1;
  int32_t next_sibling = -1;
  int32_t sub_lo = 0, sub_hi = 0;  // sorted positions of the tokens in this subtree
  int32_t end_lo = 0, end_hi = 0;  // sorted positions of the tokens that end exactly here
};

class TokenizerInfo {
 public:
  // Every id with non-empty bytes that is not special is a normal token. `eos_ids` are allowed
  // only where the grammar is complete, `special_ids` never.
  static std::shared_ptr<const TokenizerInfo> from_vocab(std::vector<std::string> token_bytes,
                                                         std::vector<int32_t> special_ids,
                                                         std::vector<int32_t> eos_ids);
  // From the project tokenizer: bytes via id_to_bytes, special via is_special, EOS via eos_id.
  static std::shared_ptr<const TokenizerInfo> from_tokenizer(const tokenizer::Tokenizer& tok);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t mask_words() const { return (vocab_size() + 31) / 32; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_special(int32_t id) const { return special_[id] != 0; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // Normal tokens sorted by bytes; position -> id.
  const std::vector<int32_t>& sorted() const { return sorted_; }
  // id -> sorted position, or -1 for special/empty ids.
  int32_t sorted_pos(int32_t id) const { return pos_[id]; }
  const std::vector<TrieNode>& trie() const { return trie_; }  // node 0 is the root

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> sorted_;
  std::vector<int32_t> pos_;
  std::vector<TrieNode> trie_;
};

}  // namespace deepinfer::structured
