// JSON helpers of the server (nlohmann, the library the project already uses).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace deepinfer::server {

using Json = nlohmann::ordered_json;

// Compact JSON text; invalid UTF-8 (a single token's bytes may split a character) is replaced
// by U+FFFD instead of throwing.
inline std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace deepinfer::server
