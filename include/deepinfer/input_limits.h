// Limits on what users hand the engine (docs/limits.md has the table of every parser's limits).
// Each parser keeps its limit values as named constants next to its code; this file holds what
// they share: the JSON nesting-depth scan every user JSON document goes through before a JSON
// parser sees it, and the wording of a limit error.
//
// Why a depth scan on the text: nlohmann::json parses and destroys without recursion, but
// copying, comparing and dump() recurse, and so do our own walkers (schemas, tool arguments,
// pre-tokenizer sequences); a document 100,000 levels deep would overflow the stack. Checking
// the text first bounds every later walk.
//
// Public because the server (a front end) words its own limit errors the same way;
// src/base/input_limits.cc implements it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "deepinfer/status.h"

namespace deepinfer {

// 1048576 -> "1,048,576".
std::string format_count(uint64_t n);

// "<found> exceeds the limit of <limit> (<limit_name>); <fix>", e.g. "2,000,000 merges exceed
// ..." is written by the caller as found = "2,000,000 merges". Callers put the source (file,
// field) in front.
std::string limit_message(std::string_view found, uint64_t limit, std::string_view limit_name,
                          std::string_view fix);

// The deepest nesting of arrays and objects in JSON text ("[[1]]" is 2, "1" is 0); brackets
// inside strings do not count. Linear, allocates nothing; malformed text is scanned as far as
// it goes (the JSON parser reports the syntax error afterwards).
size_t json_nesting_depth(std::string_view text);

// OK, or a Status with `code`: "<source>: JSON nesting depth 100,000 exceeds the limit of 64
// (<limit_name>); <fix>".
Status check_json_depth(std::string_view text, size_t max_depth, std::string_view source,
                        std::string_view limit_name, std::string_view fix,
                        StatusCode code = StatusCode::kInvalidArgument);

}  // namespace deepinfer
