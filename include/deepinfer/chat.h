// The DeepSeek-V4 chat format for front ends (server, CLI, Python): render OpenAI-style
// messages into the exact prompt the official renderer produces, and parse the model's output
// back into reasoning, content and tool calls while it streams.
//
//   ChatRenderOptions o;  o.thinking = true;
//   DI_ASSIGN_OR_RETURN(std::string prompt, render_chat_prompt(messages_json, tools_json, o));
//   ChatOutputParser parser(o.thinking);
//   parser.feed(delta_text, &events);  ...  parser.finish(&events);
//
// JSON crosses this boundary as text, so the header needs no JSON library; key order is kept
// (tool schemas are rendered in the caller's order, as the model was trained). Implemented
// over src/tokenizer/chat (render.h, output_parser.h), whose comments give the rules.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace deepinfer {

struct ChatRenderOptions {
  bool thinking = false;                   // thinking mode: the prompt ends with "<think>"
  std::string reasoning_effort;            // "", "none", "low", "high", "max"
  std::string effort_profile = "preview";  // "preview" or "0731" (the checkpoint's encoder)
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // leave a final assistant message open
  bool drop_thinking = true;            // earlier turns' reasoning dropped (official rule)
};

// messages_json: a JSON array of OpenAI chat messages (content as a string or text parts,
// tool_calls, tool results, reasoning_content); tools_json: a JSON array of OpenAI tools, or
// empty. InvalidArgument names the message and field at fault.
Expected<std::string> render_chat_prompt(std::string_view messages_json,
                                         std::string_view tools_json,
                                         const ChatRenderOptions& options);

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
// (malformed DSML, text after the tool calls) every call returns it again.
class ChatOutputParser {
 public:
  explicit ChatOutputParser(bool thinking);
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
