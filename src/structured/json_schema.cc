// JSON Schema -> grammar IR; see json_schema.h. Each schema node becomes an expression inlined
// into its parent (big rules keep the token-mask precompute context-independent); only $ref
// targets and the generic "any JSON value" become rules (they may recurse).
#include "structured/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/input_limits.h"
#include "structured/json_schema_util.h"
#include "structured/limits.h"
#include "structured/number_ranges.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

using json = nlohmann::ordered_json;

const std::set<std::string> kIgnored = {
    "title",    "description", "examples", "default",   "$schema",          "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "contentMediaType", "contentEncoding",
    "$defs",    "definitions"};
const std::set<std::string> kKnown = {"type",
                                      "enum",
                                      "const",
                                      "anyOf",
                                      "oneOf",
                                      "allOf",
                                      "$ref",
                                      "properties",
                                      "required",
                                      "additionalProperties",
                                      "items",
                                      "prefixItems",
                                      "additionalItems",
                                      "minItems",
                                      "maxItems",
                                      "minLength",
                                      "maxLength",
                                      "pattern",
                                      "format",
                                      "minimum",
                                      "maximum",
                                      "exclusiveMinimum",
                                      "exclusiveMaximum",
                                      "uniqueItems",
                                      "multipleOf"};
const std::set<std::string> kObjectKw = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKw = {"items", "prefixItems", "additionalItems", "minItems",
                                        "maxItems"};
const std::set<std::string> kStringKw = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKw = {"minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum", "multipleOf"};

class Converter {
 public:
  Converter(const json& root, const JsonSchemaOptions& o) : root_(root), o_(o) {}

  Expected<Grammar> run() {
    int32_t r = g_.add_rule("root");
    DI_ASSIGN_OR_RETURN(int32_t body, convert(root_, "#"));
    g_.set_body(r, body);
    g_.set_root(r);
    return std::move(g_);
  }

 private:
  Status err(const std::string& path, const std::string& msg) const {
    return invalid_argument("JSON Schema error at " + path + ": " + msg);
  }
  Status unsup(const std::string& path, const std::string& msg) const {
    return unimplemented("JSON Schema at " + path + ": " + msg);
  }

  // ---- shared pieces -------------------------------------------------------------------
  int32_t ws() { return o_.any_whitespace ? g_.star(g_.bytes(ws_set())) : g_.empty(); }
  static ByteSet ws_set() {
    ByteSet s;
    for (char c : {' ', '\t', '\n', '\r'}) s.set(static_cast<uint8_t>(c));
    return s;
  }
  int32_t sep() {
    return o_.any_whitespace ? g_.seq({ws(), g_.byte(','), ws()}) : g_.literal(o_.item_separator);
  }
  int32_t key_sep() {
    return o_.any_whitespace ? g_.seq({ws(), g_.byte(':'), ws()}) : g_.literal(o_.key_separator);
  }
  int32_t json_char() {
    if (json_char_ < 0) json_char_ = make_json_char(g_);
    return json_char_;
  }
  int32_t quote() { return g_.byte('"'); }
  int32_t any_string() { return g_.seq({quote(), g_.star(json_char()), quote()}); }
  int32_t any_number() {
    int32_t digit = g_.bytes(ByteSet::range('0', '9'));
    int32_t intpart =
        g_.alt({g_.byte('0'), g_.seq({g_.bytes(ByteSet::range('1', '9')), g_.star(digit)})});
    int32_t frac = g_.seq({g_.byte('.'), g_.plus(digit)});
    ByteSet e;
    e.set('e');
    e.set('E');
    ByteSet pm;
    pm.set('+');
    pm.set('-');
    int32_t exp = g_.seq({g_.bytes(e), g_.optional(g_.bytes(pm)), g_.plus(digit)});
    return g_.seq({g_.optional(g_.byte('-')), intpart, g_.optional(frac), g_.optional(exp)});
  }
  int32_t any_value() {
    if (any_rule_ < 0) {
      any_rule_ = g_.add_rule("any_value");
      int32_t v = g_.ref(any_rule_);
      int32_t member = g_.seq({any_string(), key_sep(), v});
      int32_t obj = g_.seq({g_.byte('{'), ws(),
                            g_.optional(g_.seq({member, g_.star(g_.seq({sep(), member}))})), ws(),
                            g_.byte('}')});
      int32_t arr =
          g_.seq({g_.byte('['), ws(), g_.optional(g_.seq({v, g_.star(g_.seq({sep(), v}))})), ws(),
                  g_.byte(']')});
      g_.set_body(any_rule_, g_.alt({obj, arr, any_string(), any_number(), g_.literal("true"),
                                     g_.literal("false"), g_.literal("null")}));
    }
    return g_.ref(any_rule_);
  }

  // ---- dispatch --------------------------------------------------------------------------
  Expected<int32_t> convert(const json& s, const std::string& path) {
    if (++depth_ > kMaxSchemaDepth) {
      return err(path, limit_message("schema nesting depth " + format_count(depth_),
                                     kMaxSchemaDepth, "kMaxSchemaDepth in src/structured/limits.h",
                                     "nest fewer schemas, or share parts through $defs"));
    }
    auto r = convert_inner(s, path);
    --depth_;
    return r;
  }

  Expected<int32_t> convert_inner(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      return err(path, "the schema 'false' matches nothing");
    }
    if (!s.is_object())
      return err(path, "a schema must be an object or a boolean, got " + s.dump());
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (kIgnored.count(k) || kKnown.count(k)) continue;
      return unsup(
          path,
          "keyword '" + k + "' is not supported (cannot be enforced during generation); remove it");
    }
    if (s.contains("uniqueItems") && s.at("uniqueItems") != false) {
      return unsup(path, "'uniqueItems': true cannot be enforced during generation");
    }
    if (s.contains("$ref")) {
      for (auto it = s.begin(); it != s.end(); ++it) {
        if (it.key() != "$ref" && !kIgnored.count(it.key())) {
          return unsup(path, "keyword '" + it.key() +
                                 "' next to '$ref' is not supported; wrap both in 'allOf'");
        }
      }
      if (!s.at("$ref").is_string()) return err(path + "/$ref", "'$ref' must be a string");
      return ref_rule(s.at("$ref").get<std::string>(), path + "/$ref");
    }
    if (s.contains("allOf")) {
      DI_ASSIGN_OR_RETURN(json merged, merge_all_of(s, path, 0));
      return convert(merged, path);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) {
      if (s.contains("anyOf") && s.contains("oneOf"))
        return unsup(path, "'anyOf' and 'oneOf' together are not supported");
      const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
      const json& branches = s[key];
      if (!branches.is_array() || branches.empty())
        return err(path + "/" + key, "must be a non-empty array");
      json base = s;
      base.erase(key);
      const bool has_base = has_constraints(base);
      std::vector<json> merged_branches;
      for (size_t i = 0; i < branches.size(); ++i) {
        const std::string bpath = path + "/" + key + "/" + std::to_string(i);
        if (has_base) {
          DI_ASSIGN_OR_RETURN(json merged, merge(base, branches[i], bpath));
          merged_branches.push_back(std::move(merged));
        } else {
          merged_branches.push_back(branches[i]);
        }
      }
      if (std::string(key) == "oneOf")
        DI_TRY(check_one_of_disjoint(root_, merged_branches, path + "/oneOf"));
      std::vector<int32_t> alts;
      for (size_t i = 0; i < merged_branches.size(); ++i) {
        DI_ASSIGN_OR_RETURN(
            int32_t e, convert(merged_branches[i], path + "/" + key + "/" + std::to_string(i)));
        alts.push_back(e);
      }
      return g_.alt(std::move(alts));
    }
    if (s.contains("enum") || s.contains("const")) return convert_enum(s, path);

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s.at("type");
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) return err(path + "/type", "type names must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return err(path + "/type", "'type' must be a string or a non-empty array of strings");
      }
    } else {
      // No type: a sound subset is the union of the types the keywords constrain.
      auto has_any = [&](const std::set<std::string>& kws) {
        for (const auto& k : kws) {
          if (s.contains(k)) return true;
        }
        return false;
      };
      if (has_any(kObjectKw)) types.push_back("object");
      if (has_any(kArrayKw)) types.push_back("array");
      if (has_any(kStringKw)) types.push_back("string");
      if (has_any(kNumberKw)) types.push_back("number");
      if (types.empty()) return any_value();
    }
    std::vector<int32_t> alts;
    for (const std::string& t : types) {
      DI_ASSIGN_OR_RETURN(int32_t e, convert_typed(s, t, path));
      alts.push_back(e);
    }
    return g_.alt(std::move(alts));
  }

  static bool has_constraints(const json& s) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!kIgnored.count(it.key())) return true;
    }
    return false;
  }

  Expected<int32_t> convert_typed(const json& s, const std::string& t, const std::string& path) {
    if (t == "null") return g_.literal("null");
    if (t == "boolean") return g_.alt({g_.literal("true"), g_.literal("false")});
    if (t == "integer") return convert_integer(s, path);
    if (t == "number") return convert_number(s, path);
    if (t == "string") return convert_string(s, path);
    if (t == "array") return convert_array(s, path);
    if (t == "object") return convert_object(s, path);
    return err(path + "/type", "unknown type '" + t + "'");
  }

  // ---- enum / const ----------------------------------------------------------------------
  Expected<int32_t> convert_enum(const json& s, const std::string& path) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (k != "enum" && k != "const" && k != "type" && !kIgnored.count(k)) {
        return unsup(path, "keyword '" + k + "' next to 'enum'/'const' is not supported");
      }
    }
    std::vector<const json*> values;
    if (s.contains("enum") && !s.at("enum").is_array())
      return err(path + "/enum", "'enum' must be an array");
    if (s.contains("const")) {
      const json& c = s.at("const");
      if (!s.contains("enum") ||
          std::find(s.at("enum").begin(), s.at("enum").end(), c) != s.at("enum").end())
        values.push_back(&c);
    } else {
      for (const json& v : s.at("enum")) values.push_back(&v);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s.at("type").is_string()) types.push_back(s.at("type").get<std::string>());
      if (s.at("type").is_array()) {
        for (const json& x : s.at("type")) types.push_back(x.get<std::string>());
      }
    }
    std::vector<int32_t> alts;
    std::set<std::string> seen;
    for (const json* v : values) {
      if (!types.empty() && !std::any_of(types.begin(), types.end(), [&](const std::string& t) {
            return json_has_type(*v, t);
          }))
        continue;
      std::string text;
      serialize(*v, text);
      if (seen.insert(text).second) alts.push_back(g_.literal(text));
    }
    if (alts.empty()) return err(path, "no 'enum'/'const' value satisfies the schema's 'type'");
    return g_.alt(std::move(alts));
  }

  void serialize(const json& v, std::string& out) const {
    const std::string is = o_.any_whitespace ? "," : o_.item_separator;
    const std::string ks = o_.any_whitespace ? ":" : o_.key_separator;
    if (v.is_object()) {
      out += "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += is;
        first = false;
        out += json(it.key()).dump();
        out += ks;
        serialize(it.value(), out);
      }
      out += "}";
    } else if (v.is_array()) {
      out += "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += is;
        serialize(v[i], out);
      }
      out += "]";
    } else {
      out += v.dump();
    }
  }

  // ---- numbers ---------------------------------------------------------------------------
  struct Bounds {
    std::optional<double> lo, hi;
    bool lo_excl = false, hi_excl = false;
  };
  Expected<Bounds> bounds(const json& s, const std::string& path) {
    Bounds b;
    auto num = [&](const char* k) -> Expected<std::optional<double>> {
      if (!s.contains(k)) return std::optional<double>();
      if (s[k].is_boolean()) return std::optional<double>();
      if (!s[k].is_number()) return err(path + "/" + k, "must be a number");
      return std::optional<double>(s[k].get<double>());
    };
    DI_ASSIGN_OR_RETURN(auto mn, num("minimum"));
    DI_ASSIGN_OR_RETURN(auto mx, num("maximum"));
    DI_ASSIGN_OR_RETURN(auto emn, num("exclusiveMinimum"));
    DI_ASSIGN_OR_RETURN(auto emx, num("exclusiveMaximum"));
    b.lo = mn;
    b.hi = mx;
    // Draft 4: boolean exclusiveMinimum/Maximum modify minimum/maximum.
    if (s.contains("exclusiveMinimum") && s.at("exclusiveMinimum").is_boolean())
      b.lo_excl = s.at("exclusiveMinimum").get<bool>();
    if (s.contains("exclusiveMaximum") && s.at("exclusiveMaximum").is_boolean())
      b.hi_excl = s.at("exclusiveMaximum").get<bool>();
    if (emn && (!b.lo || *emn >= *b.lo)) {
      b.lo = emn;
      b.lo_excl = true;
    }
    if (emx && (!b.hi || *emx <= *b.hi)) {
      b.hi = emx;
      b.hi_excl = true;
    }
    for (auto v : {b.lo, b.hi}) {
      if (v && std::fabs(*v) > 9e18)
        return unsup(path, "numeric bounds beyond +-9e18 are not supported");
    }
    return b;
  }

  Expected<int32_t> convert_integer(const json& s, const std::string& path) {
    if (s.contains("multipleOf") && s.at("multipleOf") != 1)
      return unsup(path, "'multipleOf' other than 1 is not supported");
    DI_ASSIGN_OR_RETURN(Bounds b, bounds(s, path));
    std::optional<int64_t> lo, hi;
    if (b.lo) lo = static_cast<int64_t>(b.lo_excl ? std::floor(*b.lo) + 1 : std::ceil(*b.lo));
    if (b.hi) hi = static_cast<int64_t>(b.hi_excl ? std::ceil(*b.hi) - 1 : std::floor(*b.hi));
    if (lo && hi && *lo > *hi) return err(path, "no integer satisfies the bounds");
    return integer_range(g_, lo, hi);
  }

  Expected<int32_t> convert_number(const json& s, const std::string& path) {
    if (s.contains("multipleOf")) return unsup(path, "'multipleOf' on numbers is not supported");
    DI_ASSIGN_OR_RETURN(Bounds b, bounds(s, path));
    if (!b.lo && !b.hi) return any_number();
    for (auto v : {b.lo, b.hi}) {
      if (v && std::floor(*v) != *v) {
        return unsup(path, "non-integer bounds on 'number' are not supported (integer bounds are)");
      }
    }
    std::optional<int64_t> lo, hi;
    if (b.lo) lo = static_cast<int64_t>(*b.lo);
    if (b.hi) hi = static_cast<int64_t>(*b.hi);
    if (lo && hi && (*lo > *hi || (*lo == *hi && (b.lo_excl || b.hi_excl))))
      return err(path, "no number satisfies the bounds");
    return bounded_number(g_, lo, b.lo_excl, hi, b.hi_excl);
  }

  // ---- strings, arrays, objects, refs (defined below) -------------------------------------
  Expected<int32_t> convert_string(const json& s, const std::string& path);
  Expected<int32_t> convert_array(const json& s, const std::string& path);
  Expected<int32_t> convert_object(const json& s, const std::string& path);
  Expected<int32_t> ref_rule(const std::string& ref, const std::string& path);
  Expected<json> merge(const json& a, const json& b, const std::string& path) {
    return merge_schemas(a, b, path);
  }
  Expected<json> merge_all_of(const json& s, const std::string& path, int depth);
  Expected<int64_t> count(const json& s, const char* key, const std::string& path);

  const json& root_;
  JsonSchemaOptions o_;
  Grammar g_;
  int32_t json_char_ = -1;
  int32_t any_rule_ = -1;
  int depth_ = 0;
  std::map<std::string, int32_t> ref_rules_;
};

Expected<int64_t> Converter::count(const json& s, const char* key, const std::string& path) {
  if (!s.contains(key)) return int64_t{-1};
  const json& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    return err(path + "/" + key, "must be a non-negative integer");
  const int64_t n = v.get<int64_t>();
  if (n > o_.max_bounded_repeat && std::string(key).rfind("max", 0) == 0) {
    return unsup(path + "/" + key, std::to_string(n) + " is over the supported limit of " +
                                       std::to_string(o_.max_bounded_repeat) +
                                       " (JsonSchemaOptions::max_bounded_repeat)");
  }
  if (n > o_.max_bounded_repeat) {
    return unsup(path + "/" + key, std::to_string(n) + " is over the supported limit of " +
                                       std::to_string(o_.max_bounded_repeat));
  }
  return n;
}

Expected<int32_t> Converter::convert_string(const json& s, const std::string& path) {
  const bool has_len = s.contains("minLength") || s.contains("maxLength");
  const int kinds =
      (has_len ? 1 : 0) + (s.contains("pattern") ? 1 : 0) + (s.contains("format") ? 1 : 0);
  if (kinds > 1) {
    return unsup(path,
                 "combining 'pattern', 'format' and 'minLength'/'maxLength' is not supported; use "
                 "one of them");
  }
  if (s.contains("pattern")) {
    if (!s.at("pattern").is_string()) return err(path + "/pattern", "must be a string");
    auto e = parse_regex(s.at("pattern").get<std::string>(), g_, RegexOptions{.json_string = true});
    if (!e.ok()) return e.status().with_context("JSON Schema at " + path + "/pattern");
    // JSON Schema patterns search: an unanchored side may have anything around the match.
    std::vector<int32_t> items{quote()};
    if (!e->anchored_start) items.push_back(g_.star(json_char()));
    items.push_back(e->expr);
    if (!e->anchored_end) items.push_back(g_.star(json_char()));
    items.push_back(quote());
    return g_.seq(std::move(items));
  }
  if (s.contains("format")) {
    if (!s.at("format").is_string()) return err(path + "/format", "must be a string");
    const std::string f = s.at("format").get<std::string>();
    const char* re = format_regex(f);
    if (!re) {
      return unsup(path + "/format", "format '" + f +
                                         "' is not supported (supported: date-time, date, time, "
                                         "email, uuid, uri, ipv4, ipv6)");
    }
    auto e = parse_regex(re, g_, RegexOptions{.json_string = true});
    if (!e.ok()) return e.status().with_context("internal format regex for '" + f + "'");
    return g_.seq({quote(), e->expr, quote()});
  }
  DI_ASSIGN_OR_RETURN(int64_t mn, count(s, "minLength", path));
  DI_ASSIGN_OR_RETURN(int64_t mx, count(s, "maxLength", path));
  if (mn < 0 && mx < 0) return any_string();
  if (mx >= 0 && mn > mx) return err(path, "minLength is greater than maxLength");
  return g_.seq({quote(),
                 g_.repeat(json_char(), static_cast<int32_t>(std::max<int64_t>(mn, 0)),
                           static_cast<int32_t>(mx)),
                 quote()});
}

Expected<int32_t> Converter::convert_array(const json& s, const std::string& path) {
  std::vector<const json*> prefix;
  const json* rest = nullptr;  // nullptr: no items beyond the prefix
  std::string rest_path;
  const json* prefix_json = nullptr;
  if (s.contains("prefixItems")) {
    prefix_json = &s.at("prefixItems");
    if (s.contains("items")) rest = &s.at("items"), rest_path = path + "/items";
  } else if (s.contains("items") && s.at("items").is_array()) {
    prefix_json = &s.at("items");  // draft-07 tuple form
    if (s.contains("additionalItems"))
      rest = &s.at("additionalItems"), rest_path = path + "/additionalItems";
  } else if (s.contains("items")) {
    rest = &s.at("items"), rest_path = path + "/items";
  }
  if (prefix_json) {
    if (!prefix_json->is_array()) return err(path + "/prefixItems", "must be an array of schemas");
    for (const json& p : *prefix_json) prefix.push_back(&p);
  }
  static const json kTrue = true;
  if (!rest && (!prefix_json || !o_.strict)) rest = &kTrue, rest_path = path + "/items";
  if (rest && rest->is_boolean() && !rest->get<bool>()) rest = nullptr;
  DI_ASSIGN_OR_RETURN(int64_t mn, count(s, "minItems", path));
  DI_ASSIGN_OR_RETURN(int64_t mx, count(s, "maxItems", path));
  mn = std::max<int64_t>(mn, 0);
  const int64_t k = static_cast<int64_t>(prefix.size());
  if (!rest) mx = mx < 0 ? k : std::min(mx, k);
  if (mx >= 0 && mn > mx) return err(path, "minItems is greater than the number of items allowed");
  std::vector<int32_t> pexpr;
  for (int64_t i = 0; i < k && (mx < 0 || i < mx); ++i) {
    DI_ASSIGN_OR_RETURN(int32_t e, convert(*prefix[i], path + "/prefixItems/" + std::to_string(i)));
    pexpr.push_back(e);
  }
  int32_t tail = g_.empty();  // the items after the prefix
  if (rest && (mx < 0 || mx > k)) {
    DI_ASSIGN_OR_RETURN(int32_t r, convert(*rest, rest_path));
    const int64_t need = std::max<int64_t>(mn - k, 0);
    const int64_t more = mx < 0 ? -1 : mx - k;
    if (k == 0) {
      int32_t rep =
          g_.repeat(g_.seq({sep(), r}), static_cast<int32_t>(std::max<int64_t>(need - 1, 0)),
                    static_cast<int32_t>(more < 0 ? -1 : more - 1));
      int32_t body = g_.seq({r, rep});
      tail = need >= 1 ? body : g_.optional(body);
    } else {
      tail = g_.repeat(g_.seq({sep(), r}), static_cast<int32_t>(need), static_cast<int32_t>(more));
    }
  }
  // Prefix items, nested from the end: item i is required iff i < minItems.
  int32_t body = tail;
  for (int64_t i = static_cast<int64_t>(pexpr.size()) - 1; i >= 0; --i) {
    int32_t item = i == 0 ? pexpr[i] : g_.seq({sep(), pexpr[i]});
    int32_t both = g_.seq({item, body});
    body = i < mn ? both : g_.optional(both);
  }
  return g_.seq({g_.byte('['), ws(), body, ws(), g_.byte(']')});
}

Expected<int32_t> Converter::convert_object(const json& s, const std::string& path) {
  std::vector<std::string> names;
  std::vector<const json*> schemas;
  std::vector<std::string> paths;
  if (s.contains("properties")) {
    const json& props = s.at("properties");
    if (!props.is_object()) return err(path + "/properties", "must be an object");
    for (auto it = props.begin(); it != props.end(); ++it) {
      names.push_back(it.key());
      schemas.push_back(&it.value());
      paths.push_back(path + "/properties/" + it.key());
    }
  }
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s.at("required").is_array()) return err(path + "/required", "must be an array of strings");
    for (const json& r : s.at("required")) {
      if (!r.is_string()) return err(path + "/required", "must be an array of strings");
      required.insert(r.get<std::string>());
    }
  }
  static const json kTrue = true;
  // Strict mode drops unlisted properties only when some are listed: {"type":"object"} alone
  // would otherwise only ever produce {}.
  const json* additional = (o_.strict && s.contains("properties")) ? nullptr : &kTrue;
  if (s.contains("additionalProperties")) additional = &s.at("additionalProperties");
  if (additional && additional->is_boolean() && !additional->get<bool>()) additional = nullptr;
  for (const std::string& r : required) {
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    if (!additional) {
      return err(path + "/required",
                 "required property '" + r +
                     "' is not in 'properties' and additional properties are not allowed");
    }
    names.push_back(r);
    schemas.push_back(additional);
    paths.push_back(path + "/additionalProperties");
  }
  const size_t n = names.size();
  std::vector<int32_t> members(n);
  for (size_t i = 0; i < n; ++i) {
    DI_ASSIGN_OR_RETURN(int32_t v, convert(*schemas[i], paths[i]));
    members[i] = g_.seq({g_.literal(json(names[i]).dump()), key_sep(), v});
  }
  int32_t extra = -1;  // one additional member
  int32_t tail = g_.empty();
  if (additional) {
    DI_ASSIGN_OR_RETURN(int32_t v, convert(*additional, path + "/additionalProperties"));
    extra = g_.seq({key_excluding(g_, names), key_sep(), v});
    tail = g_.star(g_.seq({sep(), extra}));
  }
  // tails[i]: members i.. after at least one member was written.
  std::vector<int32_t> tails(n + 1);
  tails[n] = tail;
  for (size_t i = n; i-- > 0;) {
    int32_t m = g_.seq({sep(), members[i]});
    tails[i] = g_.seq({required.count(names[i]) ? m : g_.optional(m), tails[i + 1]});
  }
  std::vector<int32_t> heads;
  bool all_optional = true;
  for (size_t i = 0; i < n && all_optional; ++i) {
    heads.push_back(g_.seq({members[i], tails[i + 1]}));
    if (required.count(names[i])) all_optional = false;
  }
  if (all_optional) {
    if (extra >= 0) heads.push_back(g_.seq({extra, tail}));
    heads.push_back(g_.empty());
  }
  return g_.seq({g_.byte('{'), ws(), g_.alt(std::move(heads)), ws(), g_.byte('}')});
}

Expected<int32_t> Converter::ref_rule(const std::string& ref, const std::string& path) {
  auto it = ref_rules_.find(ref);
  if (it != ref_rules_.end()) return g_.ref(it->second);
  auto target = resolve_pointer(root_, ref);
  if (!target.ok()) return target.status().with_context("JSON Schema at " + path);
  std::string name = "ref";
  for (char c : ref) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  const int32_t rule = g_.add_rule(name);
  ref_rules_.emplace(ref, rule);
  DI_ASSIGN_OR_RETURN(int32_t body, convert(**target, ref));
  g_.set_body(rule, body);
  return g_.ref(rule);
}

Expected<json> Converter::merge_all_of(const json& s, const std::string& path, int depth) {
  if (depth > 32) return unsup(path, "allOf nested too deeply (or a recursive $ref inside allOf)");
  const json& subs = s.at("allOf");
  if (!subs.is_array() || subs.empty()) return err(path + "/allOf", "must be a non-empty array");
  json out = s;
  out.erase("allOf");
  for (size_t i = 0; i < subs.size(); ++i) {
    const std::string sp = path + "/allOf/" + std::to_string(i);
    json sub = subs[i];
    while (sub.is_object() && sub.contains("$ref")) {
      if (sub.size() > 1)
        return unsup(sp, "keywords next to '$ref' inside allOf are not supported");
      DI_ASSIGN_OR_RETURN(const json* t, resolve_pointer(root_, sub["$ref"].get<std::string>()));
      sub = *t;
      if (++depth > 32) return unsup(sp, "recursive '$ref' inside allOf cannot be merged");
    }
    if (sub.is_object() && sub.contains("allOf")) {
      DI_ASSIGN_OR_RETURN(sub, merge_all_of(sub, sp, depth + 1));
    }
    DI_ASSIGN_OR_RETURN(out, merge_schemas(out, sub, sp));
  }
  return out;
}

}  // namespace

Expected<Grammar> grammar_from_json_schema(std::string_view schema,
                                           const JsonSchemaOptions& options) {
  if (schema.size() > kMaxSchemaBytes) {
    return invalid_argument("JSON Schema error: " +
                            limit_message("a schema of " + format_count(schema.size()) + " bytes",
                                          kMaxSchemaBytes,
                                          "kMaxSchemaBytes in src/structured/limits.h",
                                          "shorten the schema, or share parts through $defs"));
  }
  DI_TRY(check_json_depth(schema, kMaxSchemaJsonDepth, "JSON Schema error",
                          "kMaxSchemaJsonDepth in src/structured/limits.h",
                          "nest fewer schemas, or share parts through $defs"));
  json root = json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return invalid_argument("JSON Schema error: the schema is not valid JSON");
  Converter c(root, options);
  return c.run();
}

}  // namespace deepinfer::structured
