// deepinfer::Tokenizer: the model's tokenizer for front ends (the CLI's tokenize, generate and
// perplexity, Python's deepinfer.tokenizer). Byte-level BPE that gives the ids Hugging Face
// `tokenizers` gives for a tokenizer.json (DeepSeek-V4's and others built from the same parts).
//
//   DI_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_file("/models/ds4"));
//   std::vector<int32_t> ids = tok.encode("<｜User｜>hi<｜Assistant｜>");
//   std::string text = tok.decode(ids);
//
// encode() never adds BOS/EOS (the chat renderer does); invalid UTF-8 input becomes U+FFFD as
// Python's bytes.decode(errors="replace") would. decode() skips unknown ids and repairs invalid
// UTF-8 like Rust's String::from_utf8_lossy. A Tokenizer is immutable: encode() may run on
// several threads at once, and copies share the loaded data. Implemented over
// src/tokenizer/tokenizer.h, whose comments give the details.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

class Tokenizer {
 public:
  // `path` is a tokenizer.json, or a directory that contains one (then tokenizer_config.json
  // beside it, if present, names BOS/EOS). Errors name the file and the problem: NotFound
  // (missing file), DataLoss (malformed JSON), InvalidArgument (a field of the wrong shape),
  // Unimplemented (a model type, normalizer or pre-tokenizer we do not support).
  static Expected<Tokenizer> from_file(const std::string& path);

  // allow_special = false encodes special tokens (BOS, EOS, role tags) as plain text.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // skip_special drops special added tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  int32_t vocab_size() const;                                        // 1 + the largest id
  std::optional<int32_t> token_to_id(std::string_view token) const;  // as in tokenizer.json
  std::optional<std::string> id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  const std::string& path() const;  // the file it was loaded from
  // For diagnostics: the pieces BPE sees (added tokens included), in order.
  std::vector<std::string> pieces(std::string_view text, bool allow_special = true) const;

 private:
  friend class IncrementalDetokenizer;
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// Streaming decode: add ids one at a time, get text deltas that never split a UTF-8 character.
// The deltas and flush() concatenate to tokenizer.decode(all ids, skip_special).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false);
  ~IncrementalDetokenizer();
  IncrementalDetokenizer(IncrementalDetokenizer&&) noexcept;
  IncrementalDetokenizer& operator=(IncrementalDetokenizer&&) noexcept;

  std::string add(int32_t id);  // the text now complete (possibly empty)
  std::string flush();          // held-back bytes (an incomplete character becomes U+FFFD)
  size_t pending_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer
