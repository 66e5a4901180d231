// Added tokens (special and not): found in the raw text before any pre-tokenization, exactly
// as Hugging Face's AddedVocabulary::extract_and_normalize does it:
//
//   1. the tokens with normalized=false are matched on the raw text;
//   2. the tokens with normalized=true are matched in the stretches left between (our
//      normalizer is the identity, so "normalized text" is the text itself).
//
// Each pass is a leftmost-longest search (aho-corasick MatchKind::LeftmostLongest). A match of
// a special token is ignored when special tokens are not allowed (HF's
// encode_special_tokens = true): its text stays ordinary text, and the search resumes after it.
// single_word drops a match that touches a word character (Rust regex \w) on either side;
// lstrip / rstrip widen the match over the White_Space around it (the token id is unchanged).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool normalized = true;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A piece of the input: an added token (id >= 0) or text to pre-tokenize (id == -1).
struct Segment {
  uint32_t begin, end;
  int32_t id;
};

class AddedVocabulary {
 public:
  // Tokens in tokenizer.json order; duplicates of a content keep the first, as HF does.
  void build(std::vector<AddedToken> tokens);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

  // Splits `text` into segments covering it (no empty segments).
  void split(std::string_view text, bool allow_special, std::vector<Segment>& out) const;

 private:
  // A byte trie over the contents of one group of tokens.
  struct Trie {
    struct Node {
      int32_t token = -1;  // index into tokens_ when a content ends here
      std::vector<std::pair<uint8_t, int32_t>> children;
    };
    std::vector<Node> nodes;
    bool first_byte[256] = {};
    void add(std::string_view s, int32_t token);
    int32_t child(int32_t node, uint8_t b) const;
    // Leftmost-longest match in text[from, end): start, end and token index, or false.
    bool find(std::string_view text, size_t from, size_t end, size_t* m_begin, size_t* m_end,
              int32_t* token) const;
  };
  void split_pass(std::string_view text, uint32_t begin, uint32_t end, const Trie& trie,
                  bool allow_special, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_, normalized_;
};

}  // namespace deepinfer::tokenizer
