// forced_tool_call_grammar (api.h): tool_choice "required" or a named function as a GBNF grammar
// over the DeepSeek-V4 DSML tool-call format (src/tokenizer/chat/dsml.cc, render_tool_calls),
// so that even a model that would not call a tool on its own returns one well-formed call.
//
// One call, of any listed function (or of `only`), with the function's required parameters in
// the schema's order. Values follow the parameter's type with bounded lengths, so a call always
// ends: strings (string="true") of 1 to 24 characters without newlines or '<', an enum's literals,
// integers, numbers, booleans; objects and arrays are written empty. The grammar then allows only
// EOS.
#include <string>

#include "api.h"
#include "json_util.h"

namespace deepinfer::server {
namespace {

std::string lit(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string value_rule(const Json& schema, bool* is_string) {
  *is_string = false;
  if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array() &&
      !schema["enum"].empty()) {
    std::string alts;
    bool all_strings = true;
    for (const Json& v : schema["enum"]) all_strings = all_strings && v.is_string();
    for (const Json& v : schema["enum"]) {
      if (!alts.empty()) alts += " | ";
      alts += lit(all_strings ? v.get<std::string>() : dump(v));
    }
    *is_string = all_strings;
    return "(" + alts + ")";
  }
  std::string type = schema.is_object() ? schema.value("type", "") : "";
  if (schema.is_object() && schema.contains("type") && schema["type"].is_array() &&
      !schema["type"].empty() && schema["type"][0].is_string()) {
    type = schema["type"][0].get<std::string>();
  }
  if (type == "integer") return R"(("0" | "-"? [1-9] [0-9]{0,8}))";
  if (type == "number") return R"(("0" | "-"? [1-9] [0-9]{0,8}) ("." [0-9]{1,6})?)";
  if (type == "boolean") return R"(("true" | "false"))";
  if (type == "object") return R"("{}")";
  if (type == "array") return R"("[]")";
  if (type == "null") return R"("null")";
  *is_string = true;
  return "[^<\n]{1,24}";
}

}  // namespace

std::string forced_tool_call_grammar(const std::string& tools_json, const std::string& only) {
  const Json tools = Json::parse(tools_json, nullptr, false);
  std::string calls, rules;
  int fi = 0;
  for (const Json& t : tools) {
    const Json fn = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) continue;
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const Json params = fn.contains("parameters") ? fn["parameters"] : Json::object();
    const Json props =
        params.is_object() && params.contains("properties") ? params["properties"] : Json::object();
    const Json required =
        params.is_object() && params.contains("required") ? params["required"] : Json::array();
    std::string body;
    int pi = 0;
    if (props.is_object()) {
      for (const auto& [key, schema] : props.items()) {
        bool needed = false;
        for (const Json& r : required)
          needed = needed || (r.is_string() && r.get<std::string>() == key);
        if (!needed) continue;
        bool is_string = false;
        const std::string value = value_rule(schema, &is_string);
        const std::string rule = "f" + std::to_string(fi) + "p" + std::to_string(pi++);
        rules += rule + " ::= " +
                 lit("<｜DSML｜parameter name=\"" + key + "\" string=\"" +
                     (is_string ? "true" : "false") + "\">") +
                 " " + value + " " + lit("</｜DSML｜parameter>") + "\n";
        if (!body.empty()) body += " \"\\n\" ";
        body += rule;
      }
    }
    const std::string rule = "f" + std::to_string(fi++);
    rules += rule + " ::= " + lit("<｜DSML｜invoke name=\"" + name + "\">\n") + " " +
             (body.empty() ? "" : body + " ") + lit("\n</｜DSML｜invoke>") + "\n";
    if (!calls.empty()) calls += " | ";
    calls += rule;
  }
  if (calls.empty()) return "root ::= \"\"\n";  // refused earlier: tool_choice names a listed tool
  return "root ::= " + lit("\n\n<｜DSML｜tool_calls>\n") + " (" + calls + ") " +
         lit("\n</｜DSML｜tool_calls>") + "\n" + rules;
}

}  // namespace deepinfer::server
