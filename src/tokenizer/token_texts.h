// What Hugging Face `tokenizers` says each token id is, read from any tokenizer.json:
// `decode([id], skip_special_tokens=False)` and `id_to_token(id)` for every id below
// len(tokenizer). V4.1's Engram builds its compressed token map from exactly these strings
// (compressed_vocab.h), so this follows the library (tokenizers 0.23) rather than the file:
//
//   * Ids. The model's vocabulary keeps its ids (BPE, WordLevel, WordPiece: the "vocab" object,
//     a repeated key keeping its last id; Unigram: the position in "vocab"). Added tokens are
//     added in file order with the library's rule, not with their "id" field: a content already
//     known keeps that id, a new one takes the next id after the model's vocabulary size (or
//     after the largest added id when that is larger); an empty content is skipped.
//     len(tokenizer) = model vocabulary size + added contents not in the model's vocabulary,
//     which is the largest id + 1 for every well-formed file; ids without a token in between
//     decode to "" and have no token string.
//   * Decoding one id. Its token string (also what id_to_token gives) is the added token's
//     content (or, for an added token marked "normalized" when the tokenizer has a normalizer,
//     the normalized content), else the model's token; then the decoder runs on it, added
//     tokens included: ByteLevel (GPT-2 byte alphabet back to bytes, a token with any other
//     character kept as its UTF-8, invalid UTF-8 -> U+FFFD like String::from_utf8_lossy),
//     Metaspace (the replacement character becomes a space, and every one is dropped from the
//     first token unless prepend_scheme is "never"), WordPiece, BPEDecoder, CTC, Replace with a
//     literal pattern, ByteFallback ("<0xAB>" tokens), Fuse, Strip, and Sequences of these. No
//     decoder: the token string itself. Anything else is an Unimplemented error naming it.
//   * Normalizers (TextNormalizer) are needed only for added tokens marked "normalized"; an
//     unsupported normalizer is an error only then.
//
// Unicode versions. HF's NFC/NFD/NFKC/NFKD and StripAccents come from a crate with Unicode 9.0
// tables; its Lowercase is Rust's char::to_lowercase (Unicode 16.0 in tokenizers 0.23); ICU is
// whatever the system has (Debian 12: ICU 72, Unicode 15.0). TextNormalizer therefore runs
// ICU's normalizers filtered to code points assigned by Unicode 9.0 (newer ones pass through
// untouched, as in HF), strips the marks (Mn, Mc, Me: HF strips all three) of Unicode 9.0, and
// lowercases with ICU for code points assigned by Unicode 14.0 and with a generated table
// (make_engram_vectors.py) above that. tests/unit/tokenizer/compressed_vocab_test.cc checks
// every code point against what HF does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace deepinfer::tokenizer {

// One Hugging Face normalizer step (the subset reproduced here).
struct NormalizerStep {
  enum class Kind {
    kNfc,
    kNfd,
    kNfkc,
    kNfkd,
    kLowercase,     // Rust char::to_lowercase per code point (no context)
    kStripAccents,  // drops General_Category M code points
    kStrip,         // White_Space at the start (left) and/or end (right)
    kReplace,       // literal `pattern`, or one of the supported regexes when `regex` is set
    kPrepend,       // `content` before a non-empty string
    kByteLevel,     // each UTF-8 byte -> its GPT-2 byte-alphabet character
  };
  Kind kind = Kind::kNfc;
  std::string pattern, content;
  bool regex = false;
  bool left = true, right = true;
};

class TextNormalizer {
 public:
  TextNormalizer() = default;  // the identity

  // Supported Replace regexes: "[ \t\r\n]+" and "^ $" (Oniguruma line anchors). Others, and an
  // empty literal pattern, are Unimplemented.
  static Expected<TextNormalizer> make(std::vector<NormalizerStep> steps);
  // From the JSON of a tokenizer.json "normalizer" value (null -> identity).
  static Expected<TextNormalizer> from_json(std::string_view json);

  // `text` must be well-formed UTF-8; the result is.
  std::string normalize(std::string_view text) const;
  bool identity() const { return steps_.empty(); }

 private:
  std::vector<NormalizerStep> steps_;
};

class TokenTexts {
 public:
  // `path`: a tokenizer.json, or a directory holding one. Errors name the file and the field:
  // NotFound, DataLoss (malformed JSON), InvalidArgument (a field of the wrong shape, two tokens
  // with one id), Unimplemented (a model, decoder or needed normalizer we do not reproduce).
  static Expected<TokenTexts> from_file(const std::string& path);
  // The same from tokenizer.json's text; `where` names it in errors.
  static Expected<TokenTexts> from_json(const std::string& json_text, const std::string& where);

  // len(tokenizer): the ids are [0, size()).
  int32_t size() const { return static_cast<int32_t>(text_offsets_.size()) - 1; }
  // decode([id], skip_special_tokens=False): well-formed UTF-8.
  std::string_view text(int32_t id) const { return slice(texts_, text_offsets_, id); }
  // id_to_token(id) (a normalized added token in its normalized form); nullopt when no token
  // has the id.
  std::optional<std::string_view> token(int32_t id) const {
    if (!has_token_[static_cast<size_t>(id)]) return std::nullopt;
    return slice(tokens_, token_offsets_, id);
  }
  // Whether the id is an added token (tokenizer.json "added_tokens").
  bool is_added(int32_t id) const { return is_added_[static_cast<size_t>(id)] != 0; }
  const std::string& path() const { return path_; }
  // Added tokens whose "id" field differs from the id the library gives them ("content: file
  // id -> id"), for diagnostics; empty for a well-formed file.
  const std::vector<std::string>& reassigned_added_tokens() const { return reassigned_; }

 private:
  static std::string_view slice(const std::string& arena, const std::vector<uint32_t>& offsets,
                                int32_t id) {
    const size_t i = static_cast<size_t>(id);
    return std::string_view(arena).substr(offsets[i], offsets[i + 1] - offsets[i]);
  }
  friend class TokenTextsBuilder;

  std::string path_;
  std::string texts_, tokens_;
  std::vector<uint32_t> text_offsets_{0}, token_offsets_{0};
  std::vector<uint8_t> has_token_, is_added_;
  std::vector<std::string> reassigned_;
};

}  // namespace deepinfer::tokenizer
