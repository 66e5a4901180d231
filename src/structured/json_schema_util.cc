// JSON Schema front-end helpers; see json_schema_util.h.
#include "structured/json_schema_util.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace deepinfer::structured {
namespace {

// Control characters, '"' and '\': never plain inside a JSON string.
std::vector<CodepointRange> specials() { return {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}; }

std::vector<uint32_t> utf8_codepoints(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

struct KeyTrie {
  bool end = false;
  std::map<uint32_t, KeyTrie> children;
};

int32_t not_in_trie(Grammar& g, const KeyTrie& node, int32_t plain_star) {
  std::vector<int32_t> alts;
  if (!node.end) alts.push_back(g.empty());
  auto excluded = specials();
  for (const auto& [cp, child] : node.children) excluded.push_back({cp, cp});
  alts.push_back(g.seq({g.codepoints(excluded, true), plain_star}));
  for (const auto& [cp, child] : node.children) {
    std::string bytes;
    append_utf8(cp, bytes);
    alts.push_back(g.seq({g.literal(bytes), not_in_trie(g, child, plain_star)}));
  }
  return g.alt(std::move(alts));
}

const OrderedJson& deref(const OrderedJson& root, const OrderedJson& b) {
  if (b.is_object() && b.contains("$ref") && b.at("$ref").is_string()) {
    auto t = resolve_pointer(root, b.at("$ref").get<std::string>());
    if (t.ok()) return *t.value();
  }
  return b;
}
std::set<std::string> branch_types(const OrderedJson& root, const OrderedJson& raw) {
  static const std::set<std::string> kAll = {"null",  "boolean", "object",
                                             "array", "string",  "number"};
  const OrderedJson& b = deref(root, raw);
  if (b.is_boolean()) return b.get<bool>() ? kAll : std::set<std::string>{};
  if (!b.is_object()) return kAll;
  auto type_of = [](const OrderedJson& v) -> std::string {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "boolean";
    if (v.is_object()) return "object";
    if (v.is_array()) return "array";
    if (v.is_string()) return "string";
    return "number";
  };
  if (b.contains("const")) return {type_of(b.at("const"))};
  if (b.contains("enum") && b.at("enum").is_array()) {
    std::set<std::string> out;
    for (const OrderedJson& v : b.at("enum")) out.insert(type_of(v));
    return out;
  }
  if (!b.contains("type")) return kAll;
  std::set<std::string> out;
  auto add = [&](const OrderedJson& t) {
    if (t.is_string())
      out.insert(t.get<std::string>() == "integer" ? "number" : t.get<std::string>());
  };
  if (b.at("type").is_array()) {
    for (const OrderedJson& t : b.at("type")) add(t);
  } else {
    add(b.at("type"));
  }
  return out;
}
// The constant a branch requires for property `name`, if any.
const OrderedJson* required_const(const OrderedJson& root, const OrderedJson& raw,
                                  const std::string& name) {
  const OrderedJson& b = deref(root, raw);
  if (!b.is_object() || !b.contains("required") || !b.contains("properties")) return nullptr;
  const OrderedJson& req = b.at("required");
  if (!req.is_array() || std::find(req.begin(), req.end(), OrderedJson(name)) == req.end())
    return nullptr;
  const OrderedJson& props = b.at("properties");
  if (!props.is_object() || !props.contains(name)) return nullptr;
  const OrderedJson& p = deref(root, props.at(name));
  if (!p.is_object()) return nullptr;
  if (p.contains("const")) return &p.at("const");
  if (p.contains("enum") && p.at("enum").is_array() && p.at("enum").size() == 1)
    return &p.at("enum")[0];
  return nullptr;
}

}  // namespace

Status check_one_of_disjoint(const OrderedJson& root, const std::vector<OrderedJson>& branches,
                             const std::string& path) {
  for (size_t i = 0; i < branches.size(); ++i) {
    const auto ti = branch_types(root, branches[i]);
    for (size_t j = i + 1; j < branches.size(); ++j) {
      const auto tj = branch_types(root, branches[j]);
      bool overlap = false;
      for (const auto& t : ti) overlap = overlap || tj.count(t);
      if (!overlap) continue;
      bool discriminated = false;
      const OrderedJson& bi = deref(root, branches[i]);
      if (bi.is_object() && bi.contains("properties") && bi.at("properties").is_object()) {
        for (auto it = bi.at("properties").begin();
             it != bi.at("properties").end() && !discriminated; ++it) {
          const OrderedJson* a = required_const(root, branches[i], it.key());
          const OrderedJson* b = required_const(root, branches[j], it.key());
          discriminated = a && b && *a != *b;
        }
      }
      if (!discriminated) {
        return unimplemented(
            "JSON Schema at " + path + ": branches " + std::to_string(i) + " and " +
            std::to_string(j) +
            " may match the same value, so 'exactly one' cannot be enforced; use anyOf, or "
            "make the branches disjoint (different types, or a required property with "
            "different const values)");
      }
    }
  }
  return Status();
}

int32_t make_json_char(Grammar& g) {
  int32_t plain = g.codepoints(specials(), true);
  ByteSet simple;
  for (char c : std::string("\"\\/bfnrt")) simple.set(static_cast<uint8_t>(c));
  ByteSet hex, hex_no_d, hex07;
  hex.set_range('0', '9');
  hex.set_range('a', 'f');
  hex.set_range('A', 'F');
  hex_no_d = hex;
  hex_no_d.words = {0, 0, 0, 0};
  hex_no_d.set_range('0', '9');
  hex_no_d.set_range('a', 'c');
  hex_no_d.set_range('e', 'f');
  hex_no_d.set_range('A', 'C');
  hex_no_d.set_range('E', 'F');
  hex07.set_range('0', '7');
  ByteSet d;
  d.set('d');
  d.set('D');
  int32_t h = g.bytes(hex);
  int32_t u = g.seq({g.byte('u'), g.alt({g.seq({g.bytes(hex_no_d), h, h, h}),
                                         g.seq({g.bytes(d), g.bytes(hex07), h, h})})});
  int32_t esc = g.seq({g.byte('\\'), g.alt({g.bytes(simple), u})});
  return g.alt({plain, esc});
}

bool json_has_type(const OrderedJson& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "string") return v.is_string();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (v.is_number_float()) {
      double d = v.get<double>();
      return d == static_cast<double>(static_cast<int64_t>(d));
    }
  }
  return false;
}

#define DI_DATE_RE \
  R"((\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|\d{4}-(0[469]|11)-(0[1-9]|[12]\d|30)|\d{4}-02-(0[1-9]|1\d|2[0-8])|(\d\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29))"
#define DI_TIME_RE R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"
constexpr const char* kDate = DI_DATE_RE;
constexpr const char* kDateTime = DI_DATE_RE "T" DI_TIME_RE;
#undef DI_DATE_RE
#undef DI_TIME_RE

const char* format_regex(std::string_view format) {
  static const std::map<std::string_view, const char*> kFormats = {
      // Days per month, and 29 February only in leap years.
      {"date", kDate},
      {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
      {"date-time", kDateTime},
      {"email",
       R"([a-zA-Z0-9_+-]+(\.[a-zA-Z0-9_+-]+)*@[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+)"},
      {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
      {"uri", R"([a-zA-Z][a-zA-Z0-9+.-]*:([a-zA-Z0-9._~:/?#@!$&'()*+,;=-]|%[0-9a-fA-F]{2})*)"},
      {"ipv4", R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"},
      {"ipv6",
       R"((([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:(:[0-9a-fA-F]{1,4}){1,6}|:((:[0-9a-fA-F]{1,4}){1,7}|:)))"},
  };
  auto it = kFormats.find(format);
  return it == kFormats.end() ? nullptr : it->second;
}

Expected<const OrderedJson*> resolve_pointer(const OrderedJson& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') {
    return unimplemented("'$ref': \"" + ref +
                         "\" is not a local reference; only '#...' references are supported");
  }
  const OrderedJson* cur = &root;
  size_t pos = 1;
  if (pos < ref.size() && ref[pos] != '/') {
    return unimplemented(
        "'$ref': \"" + ref +
        "\": anchors are not supported, use a JSON pointer such as '#/$defs/name'");
  }
  while (pos < ref.size()) {
    size_t next = ref.find('/', pos + 1);
    std::string raw =
        ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    std::string tok;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        tok.push_back(raw[i + 1] == '0' ? '~' : '/');
        ++i;
      } else if (raw[i] == '%' && i + 2 < raw.size()) {
        // A URI escape: two hex digits, else an error (std::stoi threw on "%te": found by the
        // json_schema fuzz target, tests/fuzz/corpus/json_schema/crash_ref_bad_percent_escape).
        unsigned byte = 0;
        const char* first = raw.data() + i + 1;
        const auto [end, ec] = std::from_chars(first, first + 2, byte, 16);
        if (ec != std::errc() || end != first + 2) {
          return invalid_argument("JSON Schema error: '$ref' \"" + ref +
                                  "\" has a bad percent escape '" + raw.substr(i, 3) + "'");
        }
        tok.push_back(static_cast<char>(byte));
        i += 2;
      } else {
        tok.push_back(raw[i]);
      }
    }
    // An array index: digits only, parsed without throwing (std::stoul threw on 30 digits).
    size_t index = 0;
    const auto [index_end, index_ec] = std::from_chars(tok.data(), tok.data() + tok.size(), index);
    const bool is_index =
        !tok.empty() && index_ec == std::errc() && index_end == tok.data() + tok.size();
    if (cur->is_object() && cur->contains(tok)) {
      cur = &cur->at(tok);
    } else if (cur->is_array() && is_index && index < cur->size()) {
      cur = &cur->at(index);
    } else {
      return invalid_argument("JSON Schema error: '$ref' \"" + ref + "\" does not resolve (no '" +
                              tok + "')");
    }
    if (next == std::string::npos) break;
    pos = next;
  }
  return cur;
}

Expected<OrderedJson> merge_schemas(const OrderedJson& a, const OrderedJson& b,
                                    const std::string& path) {
  if (a.is_boolean() || b.is_boolean()) {
    if (a == false || b == false)
      return invalid_argument("JSON Schema error at " + path +
                              ": allOf with 'false' matches nothing");
    return a.is_boolean() ? b : a;
  }
  // additionalProperties / items only see properties / prefixItems of their own schema object.
  auto crosses = [&](const char* x, const char* y) {
    return (a.contains(x) && b.contains(y)) || (a.contains(y) && b.contains(x));
  };
  for (auto [x, y] : {std::pair{"additionalProperties", "properties"},
                      std::pair{"items", "prefixItems"}, std::pair{"additionalItems", "items"}}) {
    if (crosses(x, y)) {
      return unimplemented("JSON Schema at " + path + ": allOf cannot merge '" + x + "' with '" +
                           y + "' from another subschema (they only see their own schema object)");
    }
  }
  OrderedJson out = a;
  for (auto it = b.begin(); it != b.end(); ++it) {
    const std::string& k = it.key();
    const OrderedJson& v = it.value();
    if (!out.contains(k)) {
      out[k] = v;
      continue;
    }
    OrderedJson& cur = out[k];
    if (cur == v) continue;
    if (k == "properties" && cur.is_object() && v.is_object()) {
      for (auto p = v.begin(); p != v.end(); ++p) {
        if (!cur.contains(p.key())) {
          cur[p.key()] = p.value();
        } else if (cur[p.key()] != p.value()) {
          cur[p.key()] = OrderedJson{{"allOf", OrderedJson::array({cur[p.key()], p.value()})}};
        }
      }
    } else if (k == "required" && cur.is_array() && v.is_array()) {
      for (const auto& r : v) {
        if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
      }
    } else if (k == "type") {
      auto as_set = [](const OrderedJson& t) {
        std::set<std::string> s;
        if (t.is_string()) s.insert(t.get<std::string>());
        if (t.is_array()) {
          for (const auto& x : t) s.insert(x.get<std::string>());
        }
        return s;
      };
      std::set<std::string> ta = as_set(cur), tb = as_set(v), both;
      for (const auto& t : ta) {
        if (tb.count(t) || (t == "integer" && tb.count("number"))) both.insert(t);
        if (t == "number" && tb.count("integer")) both.insert("integer");
      }
      if (both.empty())
        return invalid_argument("JSON Schema error at " + path + ": allOf has no common 'type'");
      cur = OrderedJson(std::vector<std::string>(both.begin(), both.end()));
    } else if ((k == "minimum" || k == "minLength" || k == "minItems" || k == "exclusiveMinimum") &&
               cur.is_number() && v.is_number()) {
      if (v > cur) cur = v;
    } else if ((k == "maximum" || k == "maxLength" || k == "maxItems" || k == "exclusiveMaximum") &&
               cur.is_number() && v.is_number()) {
      if (v < cur) cur = v;
    } else if (k == "title" || k == "description" || k == "default" || k == "examples" ||
               k == "$comment") {
      continue;
    } else {
      return unimplemented("JSON Schema at " + path +
                           ": allOf cannot merge two different values of '" + k + "'");
    }
  }
  return out;
}

int32_t key_excluding(Grammar& g, const std::vector<std::string>& names) {
  KeyTrie root;
  for (const auto& n : names) {
    KeyTrie* node = &root;
    for (uint32_t cp : utf8_codepoints(n)) node = &node->children[cp];
    node->end = true;
  }
  int32_t plain_star = g.star(g.codepoints(specials(), true));
  return g.seq({g.byte('"'), not_in_trie(g, root, plain_star), g.byte('"')});
}

}  // namespace deepinfer::structured
