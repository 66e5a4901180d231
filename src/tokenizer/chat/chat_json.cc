// JSON parsing of chat requests; see chat_json.h.
#include "tokenizer/chat/chat_json.h"

#include <string>

#include "base/input_limits.h"
#include "tokenizer/chat/chat_limits.h"

namespace deepinfer::chat {
namespace {

Status content_too_large(const std::string& field, size_t bytes) {
  return invalid_argument(field + ": " +
                          limit_message("content of " + format_count(bytes) + " bytes",
                                        kMaxContentBytes,
                                        "kMaxContentBytes in src/tokenizer/chat/chat_limits.h",
                                        "send less text in one message"));
}

std::string type_name(const OrderedJson& v) { return v.type_name(); }

Expected<Role> parse_role(const OrderedJson& v, const std::string& field) {
  if (!v.is_string()) return invalid_argument(field + ": missing or not a string");
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "system") return Role::kSystem;
  if (s == "user") return Role::kUser;
  if (s == "assistant") return Role::kAssistant;
  if (s == "tool") return Role::kTool;
  if (s == "developer") return Role::kDeveloper;
  if (s == "latest_reminder") return Role::kLatestReminder;
  return invalid_argument(field + ": unknown role '" + s +
                          "' (expected system, user, assistant, tool, developer or "
                          "latest_reminder)");
}

// Content as text. Tool results follow the official tool_result rule (text parts joined with
// "\n\n", other parts as "[Unsupported <type>]"); other roles accept text parts only, joined with
// "\n" as vLLM flattens them before the encoder sees them.
Expected<std::string> flatten_content(const OrderedJson& v, Role role, const std::string& field) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > kMaxContentBytes) return content_too_large(field, s.size());
    return s;
  }
  if (!v.is_array()) {
    return invalid_argument(field + ": expected a string or an array of text parts, got " +
                            type_name(v));
  }
  const bool tool = role == Role::kTool;
  std::string out;
  for (std::size_t j = 0; j < v.size(); ++j) {
    const std::string part_field = field + "[" + std::to_string(j) + "]";
    const OrderedJson& part = v[j];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return invalid_argument(part_field + ": expected an object with a string \"type\"");
    }
    const std::string type = part["type"].get<std::string>();
    if (j > 0) out += tool ? "\n\n" : "\n";
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) {
        return invalid_argument(part_field + ".text: missing or not a string");
      }
      out += part["text"].get_ref<const std::string&>();
      if (out.size() > kMaxContentBytes) return content_too_large(field, out.size());
    } else if (tool) {
      out += "[Unsupported " + type + "]";
    } else {
      return invalid_argument(part_field + ": only text parts are supported, got type '" + type +
                              "'");
    }
  }
  return out;
}

Expected<ToolCall> parse_tool_call(const OrderedJson& v, const std::string& field) {
  if (!v.is_object()) return invalid_argument(field + ": expected an object, got " + type_name(v));
  ToolCall call;
  const OrderedJson* fn = &v;
  std::string fn_field = field;
  if (v.contains("function")) {
    if (!v["function"].is_object())
      return invalid_argument(field + ".function: expected an object");
    fn = &v["function"];
    fn_field += ".function";
  }
  if (v.contains("type") && !(v["type"].is_string() && v["type"] == "function")) {
    return invalid_argument(field + ".type: only \"function\" tool calls are supported");
  }
  if (v.contains("id") && v["id"].is_string()) {
    call.id = v["id"].get<std::string>();
  } else if (fn->contains("id") && (*fn)["id"].is_string()) {
    call.id = (*fn)["id"].get<std::string>();
  }
  if (!fn->contains("name") || !(*fn)["name"].is_string() ||
      (*fn)["name"].get_ref<const std::string&>().empty()) {
    return invalid_argument(fn_field + ".name: missing, empty or not a string");
  }
  call.name = (*fn)["name"].get<std::string>();
  if (!fn->contains("arguments")) return invalid_argument(fn_field + ".arguments: missing");
  const OrderedJson& args = (*fn)["arguments"];
  if (args.is_object()) {
    call.arguments = args.dump();
  } else if (args.is_string()) {
    call.arguments = args.get<std::string>();
    DI_TRY(check_chat_json_depth(call.arguments, fn_field + ".arguments"));
    const OrderedJson parsed = OrderedJson::parse(call.arguments, nullptr, false);
    if (parsed.is_discarded()) {
      return invalid_argument(fn_field + ".arguments: malformed JSON: '" + call.arguments +
                              "' (expected a JSON object such as {\"city\": \"Paris\"})");
    }
    if (!parsed.is_object()) {
      return invalid_argument(fn_field + ".arguments: expected a JSON object, got '" +
                              call.arguments + "'");
    }
  } else {
    return invalid_argument(fn_field +
                            ".arguments: expected a JSON object or a string holding "
                            "one, got " +
                            type_name(args));
  }
  return call;
}

Expected<ToolDefinition> parse_tool(const OrderedJson& v, const std::string& field) {
  if (!v.is_object()) return invalid_argument(field + ": expected an object, got " + type_name(v));
  if (v.contains("type") && !(v["type"].is_string() && v["type"] == "function")) {
    return invalid_argument(field + ".type: only \"function\" tools are supported");
  }
  const OrderedJson* fn = &v;
  std::string fn_field = field;
  if (v.contains("function")) {
    fn = &v["function"];
    fn_field += ".function";
    if (!fn->is_object()) return invalid_argument(fn_field + ": expected an object");
  }
  if (!fn->contains("name") || !(*fn)["name"].is_string() ||
      (*fn)["name"].get_ref<const std::string&>().empty()) {
    return invalid_argument(fn_field + ".name: missing, empty or not a string");
  }
  return ToolDefinition{(*fn)["name"].get<std::string>(), python_json_dumps(*fn)};
}

bool truthy(const OrderedJson& v) {
  if (v.is_null()) return false;
  if (v.is_object() || v.is_array() || v.is_string()) return !v.empty();
  return true;
}

Expected<ChatMessage> parse_message(const OrderedJson& v, std::size_t i) {
  const std::string field = "messages[" + std::to_string(i) + "]";
  if (!v.is_object()) return invalid_argument(field + ": expected an object, got " + type_name(v));
  ChatMessage m;
  DI_ASSIGN_OR_RETURN(m.role,
                      parse_role(v.contains("role") ? v["role"] : OrderedJson(), field + ".role"));

  const bool has = v.contains("content") && !v["content"].is_null();
  if (has) {
    DI_ASSIGN_OR_RETURN(m.content, flatten_content(v["content"], m.role, field + ".content"));
  } else if (m.role != Role::kAssistant) {
    return invalid_argument(field + ".content: missing (a " + std::string(role_name(m.role)) +
                            " message needs content)");
  }

  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (m.reasoning_content || !v.contains(key) || v[key].is_null()) continue;
    if (!v[key].is_string()) return invalid_argument(field + "." + key + ": expected a string");
    m.reasoning_content = v[key].get<std::string>();
  }
  if (v.contains("tool_calls") && !v["tool_calls"].is_null()) {
    const OrderedJson& calls = v["tool_calls"];
    if (!calls.is_array()) return invalid_argument(field + ".tool_calls: expected an array");
    for (std::size_t j = 0; j < calls.size(); ++j) {
      DI_ASSIGN_OR_RETURN(ToolCall call, parse_tool_call(calls[j], field + ".tool_calls[" +
                                                                       std::to_string(j) + "]"));
      m.tool_calls.push_back(std::move(call));
    }
  }
  if (v.contains("tool_call_id") && !v["tool_call_id"].is_null()) {
    if (!v["tool_call_id"].is_string())
      return invalid_argument(field + ".tool_call_id: expected a string");
    m.tool_call_id = v["tool_call_id"].get<std::string>();
  }
  if (v.contains("tools") && !v["tools"].is_null()) {
    DI_ASSIGN_OR_RETURN(m.tools, parse_tools(v["tools"]));
  }
  if (v.contains("response_format") && truthy(v["response_format"])) {
    m.response_format_json = python_json_dumps(v["response_format"]);
  }
  if (v.contains("task") && !v["task"].is_null()) {
    if (!v["task"].is_string()) return invalid_argument(field + ".task: expected a string");
    m.task = v["task"].get<std::string>();
  }
  if (v.contains("wo_eos") && !v["wo_eos"].is_null()) {
    if (!v["wo_eos"].is_boolean()) return invalid_argument(field + ".wo_eos: expected a boolean");
    m.wo_eos = v["wo_eos"].get<bool>();
  }
  return m;
}

Expected<OrderedJson> parse_json_text(std::string_view text, const char* what) {
  DI_TRY(check_chat_json_depth(text, what));
  try {
    return OrderedJson::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string(what) + ": malformed JSON: " + e.what());
  }
}

}  // namespace

Expected<std::vector<ChatMessage>> parse_messages(const OrderedJson& messages) {
  if (!messages.is_array()) {
    return invalid_argument("messages: expected a JSON array of messages, got " +
                            type_name(messages));
  }
  if (messages.size() > kMaxMessages) {
    return invalid_argument("messages: " +
                            limit_message(format_count(messages.size()) + " messages", kMaxMessages,
                                          "kMaxMessages in src/tokenizer/chat/chat_limits.h",
                                          "drop or summarise earlier turns"));
  }
  std::vector<ChatMessage> out;
  out.reserve(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    DI_ASSIGN_OR_RETURN(ChatMessage m, parse_message(messages[i], i));
    out.push_back(std::move(m));
  }
  return out;
}

Expected<std::vector<ToolDefinition>> parse_tools(const OrderedJson& tools) {
  if (!tools.is_array())
    return invalid_argument("tools: expected a JSON array, got " + type_name(tools));
  if (tools.size() > kMaxTools) {
    return invalid_argument("tools: " +
                            limit_message(format_count(tools.size()) + " tools", kMaxTools,
                                          "kMaxTools in src/tokenizer/chat/chat_limits.h",
                                          "offer fewer tools per request"));
  }
  std::vector<ToolDefinition> out;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    DI_ASSIGN_OR_RETURN(ToolDefinition t, parse_tool(tools[i], "tools[" + std::to_string(i) + "]"));
    out.push_back(std::move(t));
  }
  return out;
}

Expected<ChatRequest> parse_chat_request_json(std::string_view json_text) {
  DI_ASSIGN_OR_RETURN(OrderedJson doc, parse_json_text(json_text, "messages"));
  ChatRequest req;
  if (doc.is_object()) {
    if (!doc.contains("messages")) {
      return invalid_argument(
          "messages: expected an array of messages or an object with a "
          "\"messages\" array");
    }
    DI_ASSIGN_OR_RETURN(req.messages, parse_messages(doc["messages"]));
    if (doc.contains("tools") && !doc["tools"].is_null()) {
      DI_ASSIGN_OR_RETURN(req.tools, parse_tools(doc["tools"]));
    }
    return req;
  }
  DI_ASSIGN_OR_RETURN(req.messages, parse_messages(doc));
  return req;
}

Expected<std::vector<ToolDefinition>> parse_tools_json(std::string_view json_text) {
  DI_ASSIGN_OR_RETURN(OrderedJson doc, parse_json_text(json_text, "tools"));
  return parse_tools(doc);
}

Status check_chat_json_depth(std::string_view text, const std::string& what) {
  return check_json_depth(text, kMaxChatJsonDepth, what,
                          "kMaxChatJsonDepth in src/tokenizer/chat/chat_limits.h",
                          "nest the document less deeply");
}

Expected<ReasoningEffort> parse_reasoning_effort(std::string_view text) {
  if (text.empty() || text == "none") return ReasoningEffort::kNone;
  if (text == "low") return ReasoningEffort::kLow;
  if (text == "high") return ReasoningEffort::kHigh;
  if (text == "max") return ReasoningEffort::kMax;
  return invalid_argument("reasoning_effort: unknown value '" + std::string(text) +
                          "' (expected high or max; low with the 0731 profile)");
}

Expected<EffortProfile> parse_effort_profile(std::string_view text) {
  if (text == "preview") return EffortProfile::kPreview;
  if (text == "0731") return EffortProfile::k0731;
  return invalid_argument("effort profile: unknown value '" + std::string(text) +
                          "' (expected preview or 0731)");
}

}  // namespace deepinfer::chat
