// Shared by token_texts_test.cc and compressed_vocab_test.cc: where the Engram reference data
// lives (tests/data/engram, written by tests/reference/engram/make_engram_vectors.py), its
// FNV-1a hashes, and the real V4 tokenizer's texts and golden map summary, loaded once.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.h"
#include "tokenizer/token_texts.h"

namespace deepinfer::tokenizer::testing {

inline constexpr const char* kSmallTokenizers[] = {"wordlevel", "metaspace", "wordpiece",
                                                   "bytefallback", "edge_bytelevel"};
inline constexpr uint64_t kFnvOffset = 0xCBF29CE484222325ull;
inline constexpr int32_t kBlockIds = 4096;

inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char b : bytes) h = (h ^ b) * 0x100000001B3ull;
  return h;
}

inline std::string engram_data_dir() { return source_dir() + "/tests/data/engram"; }

// tests/data/engram/v4_map.txt (format in make_engram_vectors.py).
struct V4MapGolden {
  int32_t size = 0, count = 0, non_ascii = 0;
  uint64_t map_hash = 0, text_hash = 0, non_ascii_hash = 0;
  std::vector<uint64_t> block_map_hash, block_text_hash;
  std::vector<std::pair<int32_t, int32_t>> reuse;  // (id, first id with the same key)
};

inline const V4MapGolden& v4_golden() {
  static const V4MapGolden g = [] {
    V4MapGolden r;
    std::istringstream in(read_file(engram_data_dir() + "/v4_map.txt"));
    std::string line;
    int32_t prev = 0;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string key;
      ls >> key;
      if (key == "size") {
        ls >> r.size;
      } else if (key == "count") {
        ls >> r.count;
      } else if (key == "map") {
        ls >> std::hex >> r.map_hash;
      } else if (key == "texts") {
        ls >> std::hex >> r.text_hash;
      } else if (key == "non_ascii") {
        ls >> r.non_ascii >> std::hex >> r.non_ascii_hash;
      } else if (key == "block") {
        int b;
        uint64_t m, t;
        ls >> b >> std::hex >> m >> t;
        r.block_map_hash.push_back(m);
        r.block_text_hash.push_back(t);
      } else {  // "<id - previous id> <first id>"
        int32_t first = 0;
        ls >> first;
        prev += std::stoi(key);
        r.reuse.emplace_back(prev, first);
      }
    }
    return r;
  }();
  return g;
}

inline const TokenTexts& v4_texts() {
  static const TokenTexts* t = [] {
    auto r = TokenTexts::from_file(v4_tokenizer_path());
    if (!r.ok()) {
      ADD_FAILURE() << "cannot load " << v4_tokenizer_path() << ": " << r.status().to_string();
      std::abort();
    }
    return new TokenTexts(std::move(r).value());
  }();
  return *t;
}

}  // namespace deepinfer::tokenizer::testing
