// include/deepinfer/chat.h over the chat module (render.h, chat_json.h, output_parser.h).
#include <utility>

#include "deepinfer/chat.h"
#include "tokenizer/chat/chat_json.h"
#include "tokenizer/chat/output_parser.h"
#include "tokenizer/chat/render.h"

namespace deepinfer {
namespace {

Expected<chat::OrderedJson> parse_json(std::string_view text, const char* what) {
  DI_TRY(chat::check_chat_json_depth(text, what));
  chat::OrderedJson j = chat::OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument(std::string(what) + " is not valid JSON");
  return j;
}

}  // namespace

Expected<std::string> render_chat_prompt(std::string_view messages_json,
                                         std::string_view tools_json,
                                         const ChatRenderOptions& options) {
  DI_ASSIGN_OR_RETURN(chat::OrderedJson messages, parse_json(messages_json, "messages"));
  DI_ASSIGN_OR_RETURN(std::vector<chat::ChatMessage> parsed, chat::parse_messages(messages));
  chat::RenderOptions ro;
  ro.thinking = options.thinking;
  DI_ASSIGN_OR_RETURN(ro.reasoning_effort, chat::parse_reasoning_effort(options.reasoning_effort));
  DI_ASSIGN_OR_RETURN(ro.effort_profile, chat::parse_effort_profile(options.effort_profile));
  ro.add_generation_prompt = options.add_generation_prompt;
  ro.continue_final_message = options.continue_final_message;
  ro.drop_thinking = options.drop_thinking;
  if (!tools_json.empty()) {
    DI_ASSIGN_OR_RETURN(chat::OrderedJson tools, parse_json(tools_json, "tools"));
    if (!tools.is_null()) {
      DI_ASSIGN_OR_RETURN(ro.tools, chat::parse_tools(tools));
    }
  }
  return chat::render_prompt(parsed, ro);
}

struct ChatOutputParser::Impl {
  explicit Impl(bool thinking) : parser(thinking, /*stream_tool_calls=*/true) {}
  chat::AssistantOutputParser parser;
  std::vector<chat::OutputEvent> raw;
  std::vector<std::string> names;  // per tool index

  void convert(std::vector<ChatOutputEvent>* out) {
    for (chat::OutputEvent& e : raw) {
      ChatOutputEvent o;
      o.tool_index = e.tool_index;
      switch (e.type) {
        case chat::OutputEventType::kReasoning:
          o.type = ChatOutputEvent::Type::kReasoning;
          o.text = std::move(e.text);
          break;
        case chat::OutputEventType::kContent:
          o.type = ChatOutputEvent::Type::kContent;
          o.text = std::move(e.text);
          break;
        case chat::OutputEventType::kToolCallBegin:
          o.type = ChatOutputEvent::Type::kToolCallBegin;
          o.tool_name = e.tool_call.name;
          break;
        case chat::OutputEventType::kToolCallArguments:
          o.type = ChatOutputEvent::Type::kToolCallArguments;
          o.tool_name = e.tool_call.name;
          o.text = std::move(e.tool_call.arguments);
          break;
        case chat::OutputEventType::kToolCall:
          o.type = ChatOutputEvent::Type::kToolCallEnd;
          o.tool_name = e.tool_call.name;
          o.text = std::move(e.tool_call.arguments);
          break;
      }
      if ((o.type == ChatOutputEvent::Type::kReasoning ||
           o.type == ChatOutputEvent::Type::kContent) &&
          o.text.empty()) {
        continue;
      }
      out->push_back(std::move(o));
    }
    raw.clear();
  }
};

ChatOutputParser::ChatOutputParser(bool thinking) : impl_(std::make_unique<Impl>(thinking)) {}
ChatOutputParser::~ChatOutputParser() = default;
ChatOutputParser::ChatOutputParser(ChatOutputParser&&) noexcept = default;
ChatOutputParser& ChatOutputParser::operator=(ChatOutputParser&&) noexcept = default;

Status ChatOutputParser::feed(std::string_view text, std::vector<ChatOutputEvent>* events) {
  const Status st = impl_->parser.feed(text, &impl_->raw);
  impl_->convert(events);
  return st;
}

Status ChatOutputParser::finish(std::vector<ChatOutputEvent>* events) {
  const Status st = impl_->parser.finish(&impl_->raw);
  impl_->convert(events);
  return st;
}

bool ChatOutputParser::ended() const { return impl_->parser.ended(); }

}  // namespace deepinfer
