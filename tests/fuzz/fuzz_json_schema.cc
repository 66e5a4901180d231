// Fuzz target: a JSON Schema as a request gives it (response_format json_schema, guided_json):
// grammar_from_json_schema, compiled against a tiny vocabulary, and a matcher walked with the
// schema text's bytes as choices (structured_driver.h). The options vary with the input's size
// (any_whitespace, strict, Python-style separators), so every combination is reached without
// a header byte that would break the seed schemas' JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "structured/json_schema.h"
#include "structured_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view schema(reinterpret_cast<const char*>(data), size);
  // Python's json.dumps separators or the compact default (the strings built whole: GCC 12
  // warns, falsely, about assigning a literal into a default-constructed member here).
  const bool python = (size & 4) != 0;
  deepinfer::structured::JsonSchemaOptions o{
      .any_whitespace = (size & 1) != 0,
      .item_separator = std::string(python ? ", " : ","),
      .key_separator = std::string(python ? ": " : ":"),
      .strict = (size & 2) == 0,
      .max_bounded_repeat = deepinfer::structured::JsonSchemaOptions{}.max_bounded_repeat};
  auto g = deepinfer::structured::grammar_from_json_schema(schema, o);
  if (g.ok()) deepinfer::structured::fuzz::compile_and_drive(*g, schema);
  return 0;
}
