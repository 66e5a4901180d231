// Parsing DeepSeek-V4 model output (the text generated after the prompt) into reasoning,
// content and tool calls, incrementally: text may arrive in chunks split anywhere, even inside a
// marker such as "</think>" or "｜DSML｜" or inside a UTF-8 character.
//
// Structure (official parse_message_from_completion_text, encoding_dsv4.py):
//   thinking mode:  REASONING "</think>" CONTENT [TOOL_CALLS] [EOS]
//   chat mode:                           CONTENT [TOOL_CALLS] [EOS]
//   TOOL_CALLS = "\n\n<｜DSML｜tool_calls>\n" (invoke blocks) "</｜DSML｜tool_calls>"
// Where we differ from the official parser, on purpose, to stream robustly:
//   - the output may end without EOS (max tokens, stop strings) or without "</think>" (it then
//     was all reasoning): the official parser asserts on both;
//   - a tool-calls block is recognised without the two newlines before it, and one that starts
//     inside the reasoning ends the reasoning (the official parser errors);
//   - other special-token text ("<think>", a stray "｜DSML｜", BOS) is kept as text.
// Malformed DSML inside a tool-calls block, text after the block or after EOS, and output that
// ends inside a block are errors (InvalidArgument naming the byte offset and what was expected):
// a tool call is never guessed at nor silently turned into content.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/chat/dsml_parser.h"

namespace deepinfer::chat {

// kToolCallBegin (tool_call.name) and kToolCallArguments (tool_call.arguments: a fragment of
// the arguments' JSON text) come only from a parser built with stream_tool_calls; they precede
// the call's kToolCall, whose arguments are then the fragments' concatenation (see
// DsmlBlockParser::Step).
enum class OutputEventType { kReasoning, kContent, kToolCall, kToolCallBegin, kToolCallArguments };

struct OutputEvent {
  OutputEventType type = OutputEventType::kContent;
  std::string text;          // kReasoning / kContent delta
  ParsedToolCall tool_call;  // kToolCall: complete once its invoke block closed
  std::size_t tool_index = 0;
};

struct AssistantOutput {
  std::string reasoning_content;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  bool ended = false;  // EOS was seen
};

class AssistantOutputParser {
 public:
  // thinking: the prompt ended with "<think>", so the output starts inside the reasoning.
  explicit AssistantOutputParser(bool thinking, bool stream_tool_calls = false);

  // Appends the events this text completes. Every text delta is whole UTF-8 characters when the
  // input is valid UTF-8. After an error the parser stays failed and returns the same error.
  Status feed(std::string_view text, std::vector<OutputEvent>* events);
  // End of output: flushes held-back text. Feeding after finish() is an error.
  Status finish(std::vector<OutputEvent>* events);

  // Whether EOS was seen (the model finished its turn).
  bool ended() const { return saw_eos_; }

 private:
  enum class State { kReasoning, kContent, kToolBlock, kAfterTools, kEnded, kFinished, kFailed };
  Status process(bool final, std::vector<OutputEvent>* events);
  Status process_text(bool final, std::vector<OutputEvent>* events, bool* progressed);
  Status process_block(bool final, std::vector<OutputEvent>* events, bool* progressed);
  Status process_tail(bool final, bool* progressed);
  void consume(std::size_t n);
  Status fail(Status status);

  State state_;
  std::string buf_;         // text not yet turned into events
  std::size_t offset_ = 0;  // bytes of output consumed before buf_
  std::size_t tool_count_ = 0;
  bool saw_eos_ = false;
  bool stream_tool_calls_ = false;
  DsmlBlockParser block_;
  Status error_;
};

// One-shot parse: feed(text) then finish(), collected.
Expected<AssistantOutput> parse_assistant_output(std::string_view text, bool thinking);

}  // namespace deepinfer::chat
