// Fuzz target: a GBNF grammar as a request gives it (guided_grammar, so_args "ebnf"): parsed by
// grammar_from_ebnf with root "root", compiled against a tiny vocabulary, and a matcher walked
// with the grammar text's bytes as choices (structured_driver.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "structured/ebnf.h"
#include "structured_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = deepinfer::structured::grammar_from_ebnf(text);
  if (g.ok()) deepinfer::structured::fuzz::compile_and_drive(*g, text);
  return 0;
}
