// Fuzz target: a regex as a request gives it (guided_regex, so_args "regex"): parsed by
// grammar_from_regex, compiled against a tiny vocabulary, and a matcher walked with the
// pattern's own bytes as choices (structured_driver.h). Parsing must return a grammar or an
// error with the position; compiling must stay within its stated limits.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "structured/regex.h"
#include "structured_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view pattern(reinterpret_cast<const char*>(data), size);
  auto g = deepinfer::structured::grammar_from_regex(pattern);
  if (g.ok()) deepinfer::structured::fuzz::compile_and_drive(*g, pattern);
  return 0;
}
