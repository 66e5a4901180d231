// Fuzz target: tokenizer.json text (Tokenizer::from_json_text, the same loader as from_file).
// Loading must return a tokenizer or an error naming the problem; a tokenizer that loads must
// then encode and decode without crashing, so a few texts (fixed ones and the input's own
// first bytes) go through encode (with and without special tokens), decode and the id tables.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = deepinfer::tokenizer::Tokenizer::from_json_text(text, "fuzz/tokenizer.json");
  if (!tok.ok()) return 0;
  const std::string_view samples[] = {"Hello world, 123 ab ab<s>", " \n\t", "\xe4\xbd\xa0\xff",
                                      text.substr(0, 64)};
  for (std::string_view s : samples) {
    for (bool special : {true, false}) {
      const std::vector<int32_t> ids = tok->encode(s, special);
      (void)tok->decode(ids, /*skip_special=*/!special);
      (void)tok->pieces(s, special);
    }
  }
  const int32_t n = std::min<int32_t>(tok->vocab_size(), 512);
  for (int32_t id = -1; id <= n; ++id) {
    (void)tok->id_to_token(id);
    (void)tok->id_to_bytes(id);
  }
  return 0;
}
