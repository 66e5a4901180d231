// Reads tokenizer.json quickly: a SAX pass that stores model.vocab and model.merges (the bulk
// of the file: ~128k entries and ~128k merges) straight into vectors, and builds an ordinary
// nlohmann::json tree for everything else, with null in place of those two fields.
// (A full DOM of the 6 MB file costs ~0.3 s of allocations; this is about a third of that.)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer_limits.h"

namespace deepinfer::tokenizer::detail {

struct TokenizerJson {
  nlohmann::json root;  // model.vocab and model.merges replaced by null when captured
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;
  // A merge as written: {"a b", ""} for the string form, {"a", "b"} for the array form.
  std::vector<std::pair<std::string, std::string>> merges;
  std::string capture_error;  // a vocab/merges entry of the wrong shape
};

// Parses `text`, tokenizer.json named `file` in messages. DataLoss (the parser's message, with
// the byte offset) when the JSON is malformed; InvalidArgument naming the limit when the
// document nests deeper, or vocab, merges or a token grow larger, than `limits` allow (checked
// while reading, before anything over a limit is stored).
Status parse_tokenizer_json(const std::string& text, const std::string& file, TokenizerJson& out,
                            const TokenizerLimits& limits = {});

// Reads tokenizer.json at `path` (NotFound / DataLoss), refusing a file over
// kMaxTokenizerFileBytes before reading it.
Expected<std::string> read_tokenizer_file(const std::string& path);
// The tokenizer.json a user named: the file itself, or tokenizer.json inside a directory;
// NotFound names what is missing.
Expected<std::string> resolve_tokenizer_path(const std::string& path);

}  // namespace deepinfer::tokenizer::detail
