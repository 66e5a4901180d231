// Helpers of the JSON Schema front end that do not need the converter's state: the JSON
// string-character grammar, type tests, format regexes, JSON-pointer resolution, schema
// merging for allOf, and the "any key but these" grammar for additional properties.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "structured/grammar.h"

namespace deepinfer::structured {

using OrderedJson = nlohmann::ordered_json;

// One character inside a JSON string: a plain code point (not '"', '\' or a control
// character) or an escape; \u escapes of surrogates are excluded, so every escape is one
// character (length bounds stay exact).
int32_t make_json_char(Grammar& g);

// Whether `v` is an instance of JSON Schema type `type` (1.0 is an "integer").
bool json_has_type(const OrderedJson& v, const std::string& type);

// The regex (full match, JSON-string-safe characters only) for a "format", or nullptr.
const char* format_regex(std::string_view format);

// "#", "#/$defs/a", "#/properties/x/items" (with ~0 ~1 and %XX unescaping).
Expected<const OrderedJson*> resolve_pointer(const OrderedJson& root, const std::string& ref);

// Merges two schemas for allOf: properties are merged (a shared property becomes an allOf of
// both), required lists united, types intersected, bounds tightened; any other keyword present
// in both with different values is Unimplemented.
Expected<OrderedJson> merge_schemas(const OrderedJson& a, const OrderedJson& b,
                                    const std::string& path);

// oneOf is generated as anyOf, which is exact only when no value matches two branches. We
// prove that per pair: disjoint JSON types ("integer" counts as "number"), or a required
// property that both give different constant values (a discriminator). Else: an error.
Status check_one_of_disjoint(const OrderedJson& root, const std::vector<OrderedJson>& branches,
                             const std::string& path);

// A JSON string (with quotes) of plain characters (no escapes) that is none of `names`.
int32_t key_excluding(Grammar& g, const std::vector<std::string>& names);

}  // namespace deepinfer::structured
