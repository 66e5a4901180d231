// Added-token matching (see added_tokens.h for the rules mirrored from HF).
#include "tokenizer/added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <unordered_set>

#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// Rust regex's Unicode \w: Alphabetic, marks, decimal digits, connector punctuation,
// Join_Control.
bool is_word_char(uint32_t c) {
  if (u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) ||
      u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_JOIN_CONTROL)) {
    return true;
  }
  int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

bool is_space(uint32_t c) { return UnicodeClasses::get().of(c) & kClassSpace; }

// The code point that ends at byte `end` of text (well-formed UTF-8), and its start.
uint32_t last_char(std::string_view text, size_t end, size_t* start) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  *start = b;
  size_t bad = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + b;
  size_t len = utf8::sequence_length(p, end - b, &bad);
  return len ? utf8::decode(p, len) : 0xFFFD;
}

uint32_t first_char(std::string_view text, size_t begin, size_t* len_out) {
  size_t bad = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + begin;
  size_t len = utf8::sequence_length(p, text.size() - begin, &bad);
  *len_out = len ? len : bad;
  return len ? utf8::decode(p, len) : 0xFFFD;
}

}  // namespace

void AddedVocabulary::Trie::add(std::string_view s, int32_t token) {
  if (nodes.empty()) nodes.emplace_back();
  int32_t node = 0;
  for (unsigned char b : s) {
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes.size());
      nodes[node].children.emplace_back(b, next);
      nodes.emplace_back();
    }
    node = next;
  }
  if (nodes[node].token < 0) nodes[node].token = token;  // the first token with a content wins
  first_byte[static_cast<unsigned char>(s[0])] = true;
}

int32_t AddedVocabulary::Trie::child(int32_t node, uint8_t b) const {
  for (const auto& [byte, next] : nodes[node].children) {
    if (byte == b) return next;
  }
  return -1;
}

bool AddedVocabulary::Trie::find(std::string_view text, size_t from, size_t end, size_t* m_begin,
                                 size_t* m_end, int32_t* token) const {
  if (nodes.empty()) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = from; i < end; ++i) {
    if (!first_byte[p[i]]) continue;
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < end; ++j) {
      node = child(node, p[j]);
      if (node < 0) break;
      if (nodes[node].token >= 0) {
        best = nodes[node].token;
        best_end = j + 1;
      }
    }
    if (best >= 0) {
      *m_begin = i;
      *m_end = best_end;
      *token = best;
      return true;
    }
  }
  return false;
}

void AddedVocabulary::build(std::vector<AddedToken> tokens) {
  tokens_.clear();
  std::unordered_set<std::string> seen;
  for (auto& t : tokens) {
    if (t.content.empty() || !seen.insert(t.content).second) continue;
    tokens_.push_back(std::move(t));
  }
  raw_ = Trie{};
  normalized_ = Trie{};
  // HF builds each trie from the special tokens first, then the others.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < tokens_.size(); ++k) {
      const AddedToken& t = tokens_[k];
      if (t.special != (pass == 0)) continue;
      (t.normalized ? normalized_ : raw_).add(t.content, static_cast<int32_t>(k));
    }
  }
}

void AddedVocabulary::split_pass(std::string_view text, uint32_t begin, uint32_t end,
                                 const Trie& trie, bool allow_special,
                                 std::vector<Segment>& out) const {
  // Mirrors HF find_matches on the sentence text[begin, end).
  size_t start_offset = begin;
  size_t from = begin;
  size_t mb, me;
  int32_t k;
  while (from < end && trie.find(text, from, end, &mb, &me, &k)) {
    from = me;
    const AddedToken& t = tokens_[k];
    if (!allow_special && t.special) continue;
    size_t start = mb, stop = me;
    if (t.single_word) {
      size_t cs, cl;
      bool start_space = start == begin || !is_word_char(last_char(text, start, &cs));
      bool stop_space = stop == end || !is_word_char(first_char(text, stop, &cl));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t s = start, cs;
      while (s > begin && is_space(last_char(text, s, &cs))) s = cs;
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      size_t cl;
      while (stop < end && is_space(first_char(text, stop, &cl))) stop += cl;
    }
    if (start_offset < start)
      out.push_back({static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start), -1});
    out.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), t.id});
    start_offset = stop;
  }
  if (start_offset < end) out.push_back({static_cast<uint32_t>(start_offset), end, -1});
}

void AddedVocabulary::split(std::string_view text, bool allow_special,
                            std::vector<Segment>& out) const {
  const uint32_t n = static_cast<uint32_t>(text.size());
  if (n == 0) return;
  if (tokens_.empty()) {
    out.push_back({0, n, -1});
    return;
  }
  const size_t first = out.size();
  split_pass(text, 0, n, raw_, allow_special, out);
  if (normalized_.nodes.empty()) return;
  // Second pass over the text segments of the first.
  std::vector<Segment> pass1(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  out.resize(first);
  for (const Segment& s : pass1) {
    if (s.id >= 0) {
      out.push_back(s);
    } else {
      split_pass(text, s.begin, s.end, normalized_, allow_special, out);
    }
  }
}

}  // namespace deepinfer::tokenizer
