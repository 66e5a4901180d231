// The DeepSeek-V4 chat data model: messages, tool definitions, tool calls and render options.
//
// The shapes follow the OpenAI chat API as the official renderer
// (`encoding/encoding_dsv4.py` in the DeepSeek-V4 model repositories) consumes it, plus the
// official extensions it understands: `developer` and `latest_reminder` roles, message-level
// `tools` / `response_format` on system and developer messages, `task` (quick-instruction
// tokens) and `wo_eos` (an assistant turn left open for continuation).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::chat {

enum class Role { kSystem, kUser, kAssistant, kTool, kDeveloper, kLatestReminder };

const char* role_name(Role role);

// One tool call of an assistant message. `arguments` is the JSON object text as the caller gave
// it (or its serialisation when the caller gave an object).
struct ToolCall {
  std::string id;  // may be empty; used to order tool results (sort_tool_results_by_call_order)
  std::string name;
  std::string arguments;
};

// An OpenAI function tool. `function_json` is the `function` object serialised as Python's
// json.dumps(ensure_ascii=False) would write it, keys in the caller's order: that exact text is
// what the official renderer puts under "### Available Tool Schemas".
struct ToolDefinition {
  std::string name;
  std::string function_json;
};

struct ChatMessage {
  Role role = Role::kUser;
  std::string content;  // flattened text; empty when absent
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;   // assistant only
  std::string tool_call_id;           // tool only
  std::vector<ToolDefinition> tools;  // system / developer only (official message-level tools)
  std::string response_format_json;   // system / developer only; Python-style JSON or empty
  std::string task;                   // quick-instruction task ("action", "title", ...) or empty
  bool wo_eos = false;                // assistant: leave the turn open (no EOS)
};

// Which reasoning-effort prompts the checkpoint's encoder defines. DeepSeek shipped two:
//   kPreview: DeepSeek-V4-Flash / -Pro first release: only "max" adds a preamble
//             ("Reasoning Effort: Absolute maximum ..."); "high" and none add nothing.
//   k0731:    DeepSeek-V4-Flash-0731: "low"/none add nothing, "high" adds the "Absolute maximum"
//             text and "max" the "Beyond maximum" text.
// Everything else in the format is identical between the two.
enum class EffortProfile { kPreview, k0731 };

enum class ReasoningEffort { kNone, kLow, kHigh, kMax };

struct RenderOptions {
  bool thinking = false;  // thinking_mode "thinking" (true) or "chat" (false)
  ReasoningEffort reasoning_effort = ReasoningEffort::kNone;
  EffortProfile effort_profile = EffortProfile::kPreview;
  // Request-level tools. Attached to the first message when it is system/developer (replacing
  // that message's own tools), otherwise to a new empty system message put first: the same
  // placement vLLM's DeepSeek-V4 tokenizer uses, so the prompt reads "{system}\n\n## Tools...".
  std::vector<ToolDefinition> tools;
  // Append "<｜Assistant｜>" + "<think>"/"</think>" after a final user/developer message (the
  // official renderer always does; false is our extension for scoring a prompt prefix).
  bool add_generation_prompt = true;
  bool add_bos = true;
  // Official drop_thinking: earlier turns' reasoning is dropped in thinking mode unless any
  // message carries tools.
  bool drop_thinking = true;
  // Leave a final assistant message open (no EOS) so generation continues it: the official
  // `wo_eos` flag set on the last message. An error if the last message is not an assistant.
  bool continue_final_message = false;
};

}  // namespace deepinfer::chat
