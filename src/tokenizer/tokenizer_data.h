// The loaded, immutable state behind a Tokenizer (internal to src/tokenizer/).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/string_map.h"

namespace deepinfer::tokenizer::detail {

struct TokenizerData {
  std::string path;
  uint64_t uid = 0;  // distinguishes instances in the per-thread word caches

  PreTokenizer pre;
  BpeModel bpe;
  AddedVocabulary added;

  // Per id: the token string (HF id_to_token), the bytes it decodes to, flags.
  enum : uint8_t { kExists = 1, kSpecial = 2 };
  std::vector<uint8_t> flags;
  std::vector<uint32_t> token_offsets;  // into token_arena, size vocab_size + 1
  std::string token_arena;
  std::vector<uint32_t> bytes_offsets;  // into bytes_arena, size vocab_size + 1
  std::string bytes_arena;
  StringIdMap token_ids;  // keys point into token_arena

  std::optional<int32_t> bos, eos;

  int32_t vocab_size() const { return static_cast<int32_t>(flags.size()); }
  std::string_view token(int32_t id) const {
    return std::string_view(token_arena)
        .substr(token_offsets[id], token_offsets[id + 1] - token_offsets[id]);
  }
  std::string_view bytes(int32_t id) const {
    return std::string_view(bytes_arena)
        .substr(bytes_offsets[id], bytes_offsets[id + 1] - bytes_offsets[id]);
  }
  static uint64_t next_uid() {
    static std::atomic<uint64_t> counter{1};
    return counter.fetch_add(1);
  }
};

// ByteLevel's byte <-> char table (GPT-2's bytes_to_unicode).
struct ByteLevelMap {
  uint32_t byte_to_cp[256];
  int16_t cp_to_byte[324];  // -1 when the char is not in the map
  static const ByteLevelMap& get();
};

}  // namespace deepinfer::tokenizer::detail
