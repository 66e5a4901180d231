// DSML: how the DeepSeek-V4 format writes tool schemas and tool calls into the prompt, and how a
// call's parameters turn back into an OpenAI `arguments` JSON string.
//
// Rules from encoding_dsv4.py: TOOLS_TEMPLATE / render_tools (the "## Tools" section),
// encode_arguments_to_dsml + tool_call_template + tool_calls_template (assistant tool calls),
// decode_dsml_to_arguments (the parser's inverse).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/chat/chat_types.h"

namespace deepinfer::chat {

// The "## Tools ..." section for these tool definitions (render_tools).
std::string render_tools_section(const std::vector<ToolDefinition>& tools);

// "\n\n<｜DSML｜tool_calls>\n...\n</｜DSML｜tool_calls>" for an assistant message. Each call's
// arguments must be a JSON object; string values are written raw with string="true", other values
// as Python JSON with string="false". `where` names the message in errors ("messages[2]").
Expected<std::string> render_tool_calls(const std::vector<ToolCall>& calls, std::string_view where);

// One parsed DSML parameter: name, raw value text, and whether string="true".
struct DsmlParameter {
  std::string name;
  std::string value;
  bool is_string = false;
};

// decode_dsml_to_arguments: {"k": json(v) or raw v, ...} joined with ", ". Non-string values are
// inserted as the model wrote them, unvalidated, exactly as the official decoder does, except
// one nested deeper than kMaxChatJsonDepth (chat_limits.h), which is given as a JSON string:
// whatever reads the arguments may walk them recursively.
std::string dsml_arguments_json(const std::vector<DsmlParameter>& params);

// Whether a non-string parameter value may be inserted as written (its nesting is within
// kMaxChatJsonDepth).
bool dsml_value_depth_ok(std::string_view value);

}  // namespace deepinfer::chat
