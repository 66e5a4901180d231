// DSML rendering of tool schemas and tool calls; see dsml.h.
#include "tokenizer/chat/dsml.h"

#include "base/input_limits.h"
#include "tokenizer/chat/chat_limits.h"
#include "tokenizer/chat/python_json.h"
#include "tokenizer/chat/special_tokens.h"

namespace deepinfer::chat {

std::string_view task_token(std::string_view task) {
  if (task == "action") return "<｜action｜>";
  if (task == "query") return "<｜query｜>";
  if (task == "authority") return "<｜authority｜>";
  if (task == "domain") return "<｜domain｜>";
  if (task == "title") return "<｜title｜>";
  if (task == "read_url") return "<｜read_url｜>";
  return {};
}

namespace {

// TOOLS_TEMPLATE with dsml_token, thinking tokens filled in; the schemas go between the halves.
constexpr std::string_view kToolsHead =
    "## Tools\n"
    "\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<｜DSML｜tool_calls>\" block like the following:\n"
    "\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n"
    "\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n"
    "\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n"
    "\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n"
    "\n"
    "### Available Tool Schemas\n"
    "\n";
constexpr std::string_view kToolsTail =
    "\n"
    "\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";

}  // namespace

std::string render_tools_section(const std::vector<ToolDefinition>& tools) {
  std::string out(kToolsHead);
  for (std::size_t i = 0; i < tools.size(); ++i) {
    if (i > 0) out.push_back('\n');
    out += tools[i].function_json;
  }
  out += kToolsTail;
  return out;
}

Expected<std::string> render_tool_calls(const std::vector<ToolCall>& calls,
                                        std::string_view where) {
  std::string out = "\n\n";
  out += kToolCallsOpen;
  out += ">\n";
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const ToolCall& call = calls[i];
    const std::string field =
        std::string(where) + ".tool_calls[" + std::to_string(i) + "].function.arguments";
    const OrderedJson args =
        OrderedJson::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (args.is_discarded()) {
      return invalid_argument(field + ": malformed JSON: '" + call.arguments +
                              "' (expected a JSON object such as {\"city\": \"Paris\"})");
    }
    if (!args.is_object()) {
      return invalid_argument(field + ": expected a JSON object, got '" + call.arguments + "'");
    }
    if (i > 0) out.push_back('\n');
    out += kInvokeOpen;
    out += " name=\"" + call.name + "\">\n";
    bool first = true;
    for (const auto& [key, value] : args.items()) {
      if (!first) out.push_back('\n');
      first = false;
      out += kParameterOpen;
      out += " name=\"" + key + "\" string=\"" + (value.is_string() ? "true" : "false") + "\">";
      out += value.is_string() ? value.get_ref<const std::string&>() : python_json_dumps(value);
      out += "<";
      out += kParameterEnd;
      out += ">";
    }
    out += "\n";
    out += kInvokeClose;
    out += ">";
  }
  out += "\n";
  out += kToolCallsClose;
  return out;
}

bool dsml_value_depth_ok(std::string_view value) {
  return json_nesting_depth(value) <= kMaxChatJsonDepth;
}

std::string dsml_arguments_json(const std::vector<DsmlParameter>& params) {
  std::string out = "{";
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i > 0) out += ", ";
    out += python_json_string(params[i].name);
    out += ": ";
    const bool as_string = params[i].is_string || !dsml_value_depth_ok(params[i].value);
    out += as_string ? python_json_string(params[i].value) : params[i].value;
  }
  out += "}";
  return out;
}

}  // namespace deepinfer::chat
