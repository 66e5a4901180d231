// OpenAI-style JSON → chat data model (messages, tool definitions), with errors that name the
// message index and field ("messages[2].tool_calls[0].function.name: ...").
//
// Accepted: the OpenAI chat message shapes (content as a string or an array of text parts;
// assistant tool_calls as {id, type, function: {name, arguments}} or flat {id, name, arguments},
// arguments as a JSON string or an object; tool messages with tool_call_id) plus the official
// DeepSeek-V4 extensions (roles developer / latest_reminder, message-level tools and
// response_format, task, wo_eos, reasoning_content or reasoning). Unknown fields are ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/chat/chat_types.h"
#include "tokenizer/chat/python_json.h"

namespace deepinfer::chat {

Expected<std::vector<ChatMessage>> parse_messages(const OrderedJson& messages);
Expected<std::vector<ToolDefinition>> parse_tools(const OrderedJson& tools);

// A request document: a JSON array of messages, or an object {"messages": [...], "tools": [...]}
// (the body of an OpenAI chat request; other keys are ignored).
struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;
};
Expected<ChatRequest> parse_chat_request_json(std::string_view json_text);
Expected<std::vector<ToolDefinition>> parse_tools_json(std::string_view json_text);

// InvalidArgument when `text` nests deeper than kMaxChatJsonDepth (chat_limits.h); `what`
// names the document ("messages", "tools", a tool call's arguments). Every JSON text the chat
// module parses goes through this first.
Status check_chat_json_depth(std::string_view text, const std::string& what);

// "reasoning_effort" values: "high", "max", "low" (0731 only), "none" / "" → kNone.
Expected<ReasoningEffort> parse_reasoning_effort(std::string_view text);
// "preview" or "0731".
Expected<EffortProfile> parse_effort_profile(std::string_view text);

}  // namespace deepinfer::chat
