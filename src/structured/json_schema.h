// JSON Schema front end: a schema (draft 2020-12 / draft-07 keywords) -> grammar whose strings
// are JSON documents that validate against it.
//
// Whitespace policy (default): compact, like `json.dumps(v, separators=(",", ":"))`, so
// `{"a":1,"b":[1,2]}`; the separators are options (e.g. ", " and ": " for Python's default
// json.dumps), and `any_whitespace` instead allows [ \t\n\r]* around every structural token.
//
// Generation is a sound subset of validation: every accepted document validates; some valid
// documents are never produced (see docs/structured_outputs.md: properties appear in schema
// order, no "additionalProperties" unless the schema allows them explicitly, no \u escapes of
// surrogates, no exponent in bounded numbers). Keywords we cannot enforce are errors
// (InvalidArgument / Unimplemented naming the keyword and its JSON pointer); annotations
// (title, description, examples, default, $comment, ...) are ignored.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "structured/grammar.h"

namespace deepinfer::structured {

struct JsonSchemaOptions {
  bool any_whitespace = false;
  std::string item_separator = ",";  // between array items and object members
  std::string key_separator = ":";   // between a key and its value
  // Properties not listed in "properties" appear only when "additionalProperties" is given
  // explicitly (true or a schema) or the schema has no "properties" at all; with strict = false
  // an absent "additionalProperties" always allows them (JSON Schema's own default). Likewise
  // an array with "prefixItems" and no "items" gets no further items in strict mode.
  bool strict = true;
  // Bounded repetitions (maxLength, maxItems) above this are errors: they would need one
  // automaton state per count.
  int32_t max_bounded_repeat = 512;
};

Expected<Grammar> grammar_from_json_schema(std::string_view schema,
                                           const JsonSchemaOptions& options = {});

}  // namespace deepinfer::structured
