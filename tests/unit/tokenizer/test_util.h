// Shared helpers for the tokenizer tests: where the data lives, the corpus files, and the
// real DeepSeek-V4 tokenizer loaded once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer::testing {

std::string source_dir();  // $DEEPINFER_SOURCE_DIR (the repository root)
std::string v4_tokenizer_path();
// The real tokenizer, loaded on first use (fails the test if it cannot be loaded).
const Tokenizer& v4();

struct Document {
  std::string name;
  std::string text;                // raw bytes, possibly invalid UTF-8
  bool has_ids = false;            // whether ids was stored
  std::vector<int32_t> ids;        // HF ids, special tokens recognised
  bool has_plain = false;          // whether plain_ids was stored
  std::vector<int32_t> plain_ids;  // HF ids with encode_special_tokens = True
};
// tests/data/tokenizer/corpus.bin + reference_ids<suffix>.bin (see make_vectors.py).
std::vector<Document> load_corpus(const std::string& suffix = "");

std::string read_file(const std::string& path);
// A printable rendering of bytes (escapes controls and invalid bytes).
std::string escape(const std::string& s);

}  // namespace deepinfer::tokenizer::testing
