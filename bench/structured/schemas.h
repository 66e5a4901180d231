// The benchmark's five JSON schemas (simple, nested, large enum, recursive, regex-heavy), shared
// by structured_bench and (through `structured_bench --dump-schemas`) the xgrammar script.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace deepinfer::structured::bench {

inline std::string large_enum_schema(int n) {
  std::string s = R"({"type":"object","properties":{"city":{"enum":[)";
  for (int i = 0; i < n; ++i) {
    if (i) s += ",";
    // Distinct, word-like values with shared prefixes, like real enum lists.
    static const char* kPre[] = {"north", "south", "east", "west", "new", "old", "great", "little"};
    static const char* kMid[] = {"field", "haven", "port", "ville",
                                 "ton",   "burg",  "wood", "bridge"};
    s.push_back('"');
    s.append(kPre[i % 8]);
    s.append(kMid[(i / 8) % 8]);
    s.push_back('_');
    s.append(std::to_string(i));
    s.push_back('"');
  }
  s += R"(]},"count":{"type":"integer"}},"required":["city","count"]})";
  return s;
}

inline std::vector<std::pair<std::string, std::string>> bench_schemas() {
  return {
      {"simple",
       R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string"}},"required":["name","age","email"]})"},
      {"nested",
       R"({"type":"object","properties":{"id":{"type":"integer"},"user":{"type":"object","properties":{"name":{"type":"string"},"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":"string"},"geo":{"type":"array","items":{"type":"number"},"maxItems":2}},"required":["street","zip"]},"roles":{"type":"array","items":{"enum":["admin","user","guest"]}}},"required":["name","address","roles"]},"active":{"type":"boolean"},"score":{"type":"number"}},"required":["id","user","active"]})"},
      {"large_enum", large_enum_schema(1000)},
      {"recursive",
       R"({"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name","children"]}},"$ref":"#/$defs/node"})"},
      {"regex_heavy",
       R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}-[a-f0-9]{8}$"},"email":{"type":"string","format":"email"},"created":{"type":"string","format":"date-time"},"ip":{"type":"string","format":"ipv4"},"uuid":{"type":"string","format":"uuid"},"phone":{"type":"string","pattern":"^\\+?[0-9]{1,3}[ -]?\\(?[0-9]{3}\\)?[ -]?[0-9]{3}-[0-9]{4}$"}},"required":["id","email","created","ip","uuid","phone"]})"},
  };
}

}  // namespace deepinfer::structured::bench
