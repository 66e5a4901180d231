// Regex front end: a Python `re` / ECMAScript-style pattern -> grammar IR expression.
//
// Supported: literals (UTF-8), `.` (any code point but \n), classes `[...]` with ranges and
// `^` negation, \d \w \s \D \W \S (ASCII meaning, as Python's re.ASCII), escapes \n \t \r \f
// \v \0 \xHH \uHHHH \UHHHHHHHH and escaped punctuation, groups `(...)` `(?:...)` `(?P<n>...)`
// `(?<n>...)`, alternation, quantifiers * + ? {m} {m,} {m,n} {,n} (lazy `?` suffix accepted
// and treated as greedy: it does not change what matches), anchors `^` at the very start and
// `$` at the very end. Lookarounds, backreferences, word boundaries, inline flags and
// possessive quantifiers are errors. Errors: InvalidArgument "regex error at position N
// (code points from 0): ...".
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "structured/grammar.h"

namespace deepinfer::structured {

struct RegexOptions {
  // Emit each matched character as it appears inside a JSON string: '"', '\' and control
  // characters in their escaped forms (\" \\ \n \u001f ...). Used for JSON Schema "pattern".
  bool json_string = false;
};

struct RegexExpr {
  int32_t expr = -1;
  bool anchored_start = false;
  bool anchored_end = false;
};

// Adds the pattern's expression to `g` (no rules are added).
Expected<RegexExpr> parse_regex(std::string_view pattern, Grammar& g,
                                const RegexOptions& options = {});

// A grammar whose root matches exactly the strings the pattern fully matches (re.fullmatch).
Expected<Grammar> grammar_from_regex(std::string_view pattern);

// Adds, to `g`, one code point from `ranges` (or outside them, if negated), written in the
// JSON-string form when `json_string` is set. Shared with the JSON Schema front end.
int32_t emit_codepoints(Grammar& g, std::vector<CodepointRange> ranges, bool negate,
                        bool json_string);

}  // namespace deepinfer::structured
