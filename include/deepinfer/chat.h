// The DeepSeek-V4 chat format for front ends (server, CLI, Python): render OpenAI-style
// messages into the exact prompt the official renderer produces, and parse the model's output
// back into reasoning, content and tool calls while it streams.
//
//   ChatRenderOptions o;  o.thinking = true;
//   DI_ASSIGN_OR_RETURN(std::string prompt, render_chat_prompt(messages_json, tools_json, o));
//   ChatOutputParser parser(o.thinking);
//   parser.feed(delta_text, &events);  ...  parser.finish(&events);
//
// A conversation kept by the caller (the CLI's chat, Python's chat_render) is a ChatConversation:
// built from a request document or message by message, rendered with the same options.
//
// JSON crosses this boundary as text, so the header needs no JSON library; key order is kept
// (tool schemas are rendered in the caller's order, as the model was trained). Implemented
// over src/tokenizer/chat (render.h, chat_json.h, output_parser.h), whose comments give the
// rules.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

struct ChatRenderOptions {
  bool thinking = false;                   // thinking mode: the prompt ends with "<think>"
  std::string reasoning_effort;            // "", "none", "low", "high", "max"
  std::string effort_profile = "preview";  // "preview" or "0731" (the checkpoint's encoder)
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // leave a final assistant message open
  bool drop_thinking = true;            // earlier turns' reasoning dropped (official rule)
  bool add_bos = true;                  // start with <｜begin▁of▁sentence｜>
};

// messages_json: a JSON array of OpenAI chat messages (content as a string or text parts,
// tool_calls, tool results, reasoning_content); tools_json: a JSON array of OpenAI tools, or
// empty. InvalidArgument names the message and field at fault.
Expected<std::string> render_chat_prompt(std::string_view messages_json,
                                         std::string_view tools_json,
                                         const ChatRenderOptions& options);

// Messages (and request-level tools) to render, parsed once and kept.
class ChatConversation {
 public:
  ChatConversation();
  ~ChatConversation();
  ChatConversation(ChatConversation&&) noexcept;
  ChatConversation& operator=(ChatConversation&&) noexcept;

  // request_json: a JSON array of OpenAI chat messages, or an object {"messages": [...],
  // "tools": [...]} (an OpenAI chat request body; other keys ignored). InvalidArgument names
  // the message and field at fault.
  static Expected<ChatConversation> from_json(std::string_view request_json);
  // Replaces the request-level tools with a JSON array of OpenAI tools.
  Status set_tools_json(std::string_view tools_json);
  // Appends a text message. role: "system", "user", "assistant", "tool", "developer" or
  // "latest_reminder"; reasoning_content (an assistant's reasoning) only when not empty.
  Status add_message(std::string_view role, std::string content,
                     std::string reasoning_content = {});
  void clear();  // no messages, no tools
  // The exact prompt text (BOS included as text unless options.add_bos is off).
  Expected<std::string> render(const ChatRenderOptions& options) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON object text
};

// A whole output, parsed at once (what ChatOutputParser's events add up to).
struct ChatOutput {
  std::string reasoning_content;
  std::string content;
  std::vector<ChatToolCall> tool_calls;
  bool ended = false;  // the model's EOS was seen
};
Expected<ChatOutput> parse_chat_output(std::string_view text, bool thinking);

struct ChatOutputEvent {
  enum class Type {
    kReasoning,          // text: reasoning delta
    kContent,            // text: content delta
    kToolCallBegin,      // tool_index, tool_name: a call starts
    kToolCallArguments,  // tool_index, text: a fragment of the call's arguments (JSON text)
    kToolCallEnd,        // tool_index, tool_name, text: the call's whole arguments
  };
  Type type = Type::kContent;
  std::string text;
  std::size_t tool_index = 0;
  std::string tool_name;
};

// Incremental parser of one sample's output. The fragments of a call concatenate to a valid
// JSON object; no DSML markup ever reaches reasoning, content or arguments. After an error
// (malformed DSML, text after the tool calls) every call returns it again. Without
// stream_tool_calls a call arrives only whole, as one kToolCallEnd.
class ChatOutputParser {
 public:
  explicit ChatOutputParser(bool thinking, bool stream_tool_calls = true);
  ~ChatOutputParser();
  ChatOutputParser(ChatOutputParser&&) noexcept;
  ChatOutputParser& operator=(ChatOutputParser&&) noexcept;

  Status feed(std::string_view text, std::vector<ChatOutputEvent>* events);
  Status finish(std::vector<ChatOutputEvent>* events);  // end of output: flushes held text
  bool ended() const;                                   // the model's EOS was seen

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer
