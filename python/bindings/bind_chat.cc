// deepinfer._core chat functions: DeepSeek-V4 prompt rendering and model-output parsing.
// JSON crosses the boundary as text (python/deepinfer/chat.py dumps the messages), so the C++
// parser and its error messages are the only ones; errors become ValueError.
#include <nanobind/stl/string.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "deepinfer/chat.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace deepinfer::python {
namespace {

template <typename T>
T unwrap(Expected<T> value) {
  if (!value.ok()) throw nb::value_error(value.status().message().c_str());
  return std::move(value).value();
}

void check(const Status& status) {
  if (!status.ok()) throw nb::value_error(status.message().c_str());
}

// Python's parser is built without streamed tool calls: a call arrives whole (kToolCallEnd).
nb::dict event_to_dict(const ChatOutputEvent& e) {
  nb::dict d;
  switch (e.type) {
    case ChatOutputEvent::Type::kReasoning:
      d["type"] = "reasoning";
      d["text"] = e.text;
      break;
    case ChatOutputEvent::Type::kContent:
      d["type"] = "content";
      d["text"] = e.text;
      break;
    case ChatOutputEvent::Type::kToolCallEnd:
      d["type"] = "tool_call";
      d["index"] = e.tool_index;
      d["name"] = e.tool_name;
      d["arguments"] = e.text;
      break;
    case ChatOutputEvent::Type::kToolCallBegin:
    case ChatOutputEvent::Type::kToolCallArguments:
      break;  // only from parsers built with stream_tool_calls, which Python does not make
  }
  return d;
}

nb::list events_to_list(const std::vector<ChatOutputEvent>& events) {
  nb::list out;
  for (const auto& e : events) out.append(event_to_dict(e));
  return out;
}

std::string render(const std::string& messages_json, const std::string& tools_json, bool thinking,
                   const std::string& reasoning_effort, const std::string& effort_profile,
                   bool add_generation_prompt, bool add_bos, bool drop_thinking,
                   bool continue_final_message) {
  ChatConversation conversation = unwrap(ChatConversation::from_json(messages_json));
  if (!tools_json.empty()) check(conversation.set_tools_json(tools_json));
  ChatRenderOptions opt;
  opt.thinking = thinking;
  opt.reasoning_effort = reasoning_effort;
  opt.effort_profile = effort_profile;
  opt.add_generation_prompt = add_generation_prompt;
  opt.add_bos = add_bos;
  opt.drop_thinking = drop_thinking;
  opt.continue_final_message = continue_final_message;
  return unwrap(conversation.render(opt));
}

nb::dict parse_output(const std::string& text, bool thinking) {
  ChatOutput out = unwrap(parse_chat_output(text, thinking));
  nb::list calls;
  for (const auto& c : out.tool_calls) {
    nb::dict fn;
    fn["name"] = c.name;
    fn["arguments"] = c.arguments;
    nb::dict call;
    call["type"] = "function";
    call["function"] = fn;
    calls.append(call);
  }
  nb::dict d;
  d["role"] = "assistant";
  d["reasoning_content"] = out.reasoning_content;
  d["content"] = out.content;
  d["tool_calls"] = calls;
  d["ended"] = out.ended;
  return d;
}

}  // namespace

void bind_chat(nb::module_& m) {
  m.def("chat_render", &render, "messages_json"_a, "tools_json"_a, "thinking"_a,
        "reasoning_effort"_a, "effort_profile"_a, "add_generation_prompt"_a, "add_bos"_a,
        "drop_thinking"_a, "continue_final_message"_a,
        "Render a JSON messages array (or {messages, tools} object) into the DeepSeek-V4 prompt.");
  m.def("chat_parse_output", &parse_output, "text"_a, "thinking"_a,
        "Parse a complete DeepSeek-V4 model output into reasoning, content and tool calls.");
  nb::class_<ChatOutputParser>(m, "AssistantOutputParser")
      .def(
          "__init__",
          [](ChatOutputParser* p, bool thinking) {
            new (p) ChatOutputParser(thinking, /*stream_tool_calls=*/false);
          },
          "thinking"_a)
      .def(
          "feed",
          [](ChatOutputParser& p, const std::string& text) {
            std::vector<ChatOutputEvent> events;
            check(p.feed(text, &events));
            return events_to_list(events);
          },
          "text"_a)
      .def("finish",
           [](ChatOutputParser& p) {
             std::vector<ChatOutputEvent> events;
             check(p.finish(&events));
             return events_to_list(events);
           })
      .def_prop_ro("ended", &ChatOutputParser::ended);
}

}  // namespace deepinfer::python
