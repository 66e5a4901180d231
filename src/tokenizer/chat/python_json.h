// JSON text exactly as Python's `json.dumps(value, ensure_ascii=False)` writes it.
//
// The official DeepSeek-V4 renderer serialises tool schemas and non-string tool-call arguments
// with that call, and the model was trained on its output: ", " and ": " separators, keys in
// insertion order, non-ASCII kept as UTF-8, control characters as lowercase \u00XX, floats in
// Python's repr (shortest round-trip digits; "1.0", "1e-05", "1e+16"). nlohmann's own dump()
// differs on every one of those points, hence this small writer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace deepinfer::chat {

using OrderedJson = nlohmann::ordered_json;

// json.dumps(value, ensure_ascii=False). Integers outside int64/uint64 were already turned into
// doubles by the parser, so they print as floats (Python would keep them exact).
std::string python_json_dumps(const OrderedJson& value);

// json.dumps(text, ensure_ascii=False) for one string: the quoted, escaped form.
std::string python_json_string(std::string_view text);

// Python's repr() of a float, as json.dumps writes it (NaN / Infinity included).
std::string python_float_repr(double value);

}  // namespace deepinfer::chat
