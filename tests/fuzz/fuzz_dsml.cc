// Fuzz target: model output as the streaming AssistantOutputParser reads it (reasoning,
// content, DSML tool calls, EOS). Input: one flags byte (bit 0: thinking, bit 1: stream tool
// calls), then the output text, cut into chunks at every 0xFF byte (the byte is dropped; it
// never occurs in UTF-8, so the fuzzer places cuts anywhere, even inside a marker or a
// character). Chunking must not change the result: the chunked events, collected, must equal
// those of the whole text fed at once to a parser of the same mode (both fail, or both give the
// same reasoning, content, tool calls and EOS; with streamed tool calls the arguments are
// normalised to valid JSON, so the mode matters), and a streamed call's argument fragments must
// concatenate to its final arguments. Without streamed calls, the one-shot parse must also equal
// parse_assistant_output. A difference aborts, so the fuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat/output_parser.h"

namespace {

using deepinfer::chat::AssistantOutput;
using deepinfer::chat::OutputEvent;
using deepinfer::chat::OutputEventType;

[[noreturn]] void differ(const char* what) {
  std::fprintf(stderr, "dsml fuzz: the chunked parse differs from the one-shot parse: %s\n",
               what);
  std::abort();
}

// Adds the events to `out`; checks each streamed call's fragments (collected in `fragments`
// since its kToolCallBegin; `began` says one is open) against its final kToolCall.
void collect(const std::vector<OutputEvent>& events, AssistantOutput& out, std::string& fragments,
             bool& began) {
  for (const OutputEvent& e : events) {
    switch (e.type) {
      case OutputEventType::kReasoning:
        out.reasoning_content += e.text;
        break;
      case OutputEventType::kContent:
        out.content += e.text;
        break;
      case OutputEventType::kToolCallBegin:
        fragments.clear();
        began = true;
        break;
      case OutputEventType::kToolCallArguments:
        fragments += e.tool_call.arguments;
        break;
      case OutputEventType::kToolCall:
        if (began && fragments != e.tool_call.arguments) differ("a call's argument fragments");
        began = false;
        out.tool_calls.push_back(e.tool_call);
        break;
    }
  }
}

// The whole text fed at once; false when the parser fails.
bool one_shot(std::string_view text, bool thinking, bool stream_calls, AssistantOutput& out) {
  deepinfer::chat::AssistantOutputParser parser(thinking, stream_calls);
  std::vector<OutputEvent> events;
  std::string fragments;
  bool began = false;
  if (!parser.feed(text, &events).ok() || !parser.finish(&events).ok()) return false;
  collect(events, out, fragments, began);
  out.ended = parser.ended();
  return true;
}

void compare(const AssistantOutput& a, const AssistantOutput& b) {
  if (a.reasoning_content != b.reasoning_content) differ("reasoning");
  if (a.content != b.content) differ("content");
  if (a.tool_calls != b.tool_calls) differ("tool calls");
  if (a.ended != b.ended) differ("EOS");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool thinking = (data[0] & 1) != 0;
  const bool stream_calls = (data[0] & 2) != 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  deepinfer::chat::AssistantOutputParser parser(thinking, stream_calls);
  AssistantOutput streamed;
  std::string whole, fragments;
  bool began = false;
  std::vector<OutputEvent> events;
  bool ok = true;
  size_t start = 0;
  while (ok && start <= input.size()) {
    size_t cut = input.find('\xff', start);
    if (cut == std::string_view::npos) cut = input.size();
    const std::string_view chunk = input.substr(start, cut - start);
    whole.append(chunk);
    events.clear();
    ok = parser.feed(chunk, &events).ok();
    collect(events, streamed, fragments, began);
    start = cut + 1;
  }
  if (ok) {
    events.clear();
    ok = parser.finish(&events).ok();
    collect(events, streamed, fragments, began);
  }
  if (!ok) {  // the one-shot parse must fail too, on the whole text
    for (size_t i = start; i < input.size(); ++i) {
      if (input[i] != '\xff') whole.push_back(input[i]);
    }
  }
  streamed.ended = parser.ended();

  AssistantOutput once;
  if (one_shot(whole, thinking, stream_calls, once) != ok) {
    differ(ok ? "only the one-shot parse failed" : "only the chunked parse failed");
  }
  if (!ok) return 0;
  compare(once, streamed);
  if (!stream_calls) {
    auto reference = deepinfer::chat::parse_assistant_output(whole, thinking);
    if (!reference.ok()) differ("parse_assistant_output failed");
    compare(*reference, once);
  }
  return 0;
}
