// deepinfer._core chat functions: DeepSeek-V4 prompt rendering and model-output parsing.
// JSON crosses the boundary as text (python/deepinfer/chat.py dumps the messages), so the C++
// parser and its error messages are the only ones; errors become ValueError.
#include <nanobind/stl/string.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "tokenizer/chat/chat_json.h"
#include "tokenizer/chat/output_parser.h"
#include "tokenizer/chat/render.h"

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

nb::dict event_to_dict(const chat::OutputEvent& e) {
  nb::dict d;
  switch (e.type) {
    case chat::OutputEventType::kReasoning:
      d["type"] = "reasoning";
      d["text"] = e.text;
      break;
    case chat::OutputEventType::kContent:
      d["type"] = "content";
      d["text"] = e.text;
      break;
    case chat::OutputEventType::kToolCall:
      d["type"] = "tool_call";
      d["index"] = e.tool_index;
      d["name"] = e.tool_call.name;
      d["arguments"] = e.tool_call.arguments;
      break;
    case chat::OutputEventType::kToolCallBegin:
    case chat::OutputEventType::kToolCallArguments:
      break;  // only from parsers built with stream_tool_calls, which Python does not make
  }
  return d;
}

nb::list events_to_list(const std::vector<chat::OutputEvent>& events) {
  nb::list out;
  for (const auto& e : events) out.append(event_to_dict(e));
  return out;
}

std::string render(const std::string& messages_json, const std::string& tools_json, bool thinking,
                   const std::string& reasoning_effort, const std::string& effort_profile,
                   bool add_generation_prompt, bool add_bos, bool drop_thinking,
                   bool continue_final_message) {
  chat::ChatRequest req = unwrap(chat::parse_chat_request_json(messages_json));
  chat::RenderOptions opt;
  opt.tools = tools_json.empty() ? req.tools : unwrap(chat::parse_tools_json(tools_json));
  opt.thinking = thinking;
  opt.reasoning_effort = unwrap(chat::parse_reasoning_effort(reasoning_effort));
  opt.effort_profile = unwrap(chat::parse_effort_profile(effort_profile));
  opt.add_generation_prompt = add_generation_prompt;
  opt.add_bos = add_bos;
  opt.drop_thinking = drop_thinking;
  opt.continue_final_message = continue_final_message;
  return unwrap(chat::render_prompt(req.messages, opt));
}

nb::dict parse_output(const std::string& text, bool thinking) {
  chat::AssistantOutput out = unwrap(chat::parse_assistant_output(text, thinking));
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
  nb::class_<chat::AssistantOutputParser>(m, "AssistantOutputParser")
      .def(nb::init<bool>(), "thinking"_a)
      .def(
          "feed",
          [](chat::AssistantOutputParser& p, const std::string& text) {
            std::vector<chat::OutputEvent> events;
            check(p.feed(text, &events));
            return events_to_list(events);
          },
          "text"_a)
      .def("finish",
           [](chat::AssistantOutputParser& p) {
             std::vector<chat::OutputEvent> events;
             check(p.finish(&events));
             return events_to_list(events);
           })
      .def_prop_ro("ended", &chat::AssistantOutputParser::ended);
}

}  // namespace deepinfer::python
