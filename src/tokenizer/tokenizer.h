// deepinfer::tokenizer: byte-level BPE that gives the same ids as Hugging Face `tokenizers`
// for DeepSeek-V4's tokenizer.json (and other byte-level BPE tokenizer.json files that use the
// same building blocks).
//
//   auto tok = Tokenizer::from_file("/models/ds4");  // a tokenizer.json or its directory
//   std::vector<int32_t> ids = tok->encode("<｜User｜>hi<｜Assistant｜>");
//   std::string text = tok->decode(ids);
//
// Encoding: added tokens are split out of the raw text first (added_tokens.h), the rest goes
// through the pre-tokenizer (pretokenizer.h) and BPE (bpe.h). encode() never adds BOS/EOS
// (DeepSeek's tokenizer does not; the chat renderer does), and ignores the post-processor.
// Invalid UTF-8 input: each maximal invalid subsequence becomes U+FFFD first, exactly like
// Python's bytes.decode("utf-8", errors="replace"); the result is encoded as HF encodes it.
//
// Decoding: the ByteLevel decoder (each token's characters map back to bytes; a token with a
// character outside the byte map, e.g. "<｜User｜>", contributes its UTF-8 as is), then
// invalid UTF-8 in the result becomes U+FFFD like Rust's String::from_utf8_lossy. Ids outside
// [0, vocab_size()) and holes in the id space are skipped, as HF skips unknown ids.
//
// Thread safety: a Tokenizer is immutable after from_file; encode() is const and may run
// concurrently (each thread has its own word cache). Copies share the loaded data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace deepinfer::tokenizer {

namespace detail {
struct TokenizerData;
}

class Tokenizer {
 public:
  // `path` is a tokenizer.json, or a directory that contains one (then tokenizer_config.json
  // beside it, if present, names BOS/EOS). Errors name the file and the problem: NotFound
  // (missing file), DataLoss (malformed or truncated JSON), InvalidArgument (a field of the
  // wrong shape), Unimplemented (a model type, normalizer or pre-tokenizer we do not support).
  static Expected<Tokenizer> from_file(const std::string& path);
  // The same from tokenizer.json's text in memory (a request, a fuzzer); `name` stands for the
  // file in errors and path(). No tokenizer_config.json: BOS/EOS come from well-known names.
  static Expected<Tokenizer> from_json_text(std::string_view text, const std::string& name);

  // Text -> ids. allow_special = false treats special tokens (added tokens with
  // "special": true) as plain text; non-special added tokens are still recognised. Same as
  // HF's `encode_special_tokens = True`.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // Appends to `out` instead (reuses its capacity).
  void encode_into(std::string_view text, std::vector<int32_t>& out,
                   bool allow_special = true) const;

  // Ids -> text. skip_special drops special added tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Number of ids: 1 + the largest id of the vocabulary and the added tokens.
  int32_t vocab_size() const;
  // The id of a token string as written in tokenizer.json ("Ġthe", "<｜User｜>"), if any.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of an id, if any.
  std::optional<std::string> id_to_token(int32_t id) const;
  // The bytes an id decodes to (before UTF-8 repair); empty for unknown ids.
  std::string_view id_to_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // The file this tokenizer was loaded from.
  const std::string& path() const;

  // For tests and diagnostics: the pieces BPE sees (added tokens included), in order.
  std::vector<std::string> pieces(std::string_view text, bool allow_special = true) const;

  const std::shared_ptr<const detail::TokenizerData>& data() const { return data_; }

 private:
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerData> data) : data_(std::move(data)) {}
  std::shared_ptr<const detail::TokenizerData> data_;
};

// Streaming decode: feed ids one at a time, get text deltas. A delta is always well-formed
// UTF-8: bytes that may still complete a character are held back until the next id (or
// flush). The concatenation of all deltas and flush() equals tokenizer.decode(all ids,
// skip_special).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false);

  // Appends the id; returns the text that is now complete (possibly empty).
  std::string add(int32_t id);
  // Same, appending the delta to `out`.
  void add(int32_t id, std::string& out);
  // Returns the held-back bytes (an incomplete character becomes U+FFFD) and resets.
  std::string flush();
  // Bytes held back so far.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::shared_ptr<const detail::TokenizerData> data_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace deepinfer::tokenizer
