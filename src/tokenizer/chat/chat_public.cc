// include/deepinfer/chat.h over the chat module (render.h, chat_json.h, output_parser.h).
#include <string>
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

Expected<chat::RenderOptions> render_options(const ChatRenderOptions& options) {
  chat::RenderOptions ro;
  ro.thinking = options.thinking;
  DI_ASSIGN_OR_RETURN(ro.reasoning_effort, chat::parse_reasoning_effort(options.reasoning_effort));
  DI_ASSIGN_OR_RETURN(ro.effort_profile, chat::parse_effort_profile(options.effort_profile));
  ro.add_generation_prompt = options.add_generation_prompt;
  ro.add_bos = options.add_bos;
  ro.continue_final_message = options.continue_final_message;
  ro.drop_thinking = options.drop_thinking;
  return ro;
}

}  // namespace

Expected<std::string> render_chat_prompt(std::string_view messages_json,
                                         std::string_view tools_json,
                                         const ChatRenderOptions& options) {
  DI_ASSIGN_OR_RETURN(chat::OrderedJson messages, parse_json(messages_json, "messages"));
  DI_ASSIGN_OR_RETURN(std::vector<chat::ChatMessage> parsed, chat::parse_messages(messages));
  DI_ASSIGN_OR_RETURN(chat::RenderOptions ro, render_options(options));
  if (!tools_json.empty()) {
    DI_ASSIGN_OR_RETURN(chat::OrderedJson tools, parse_json(tools_json, "tools"));
    if (!tools.is_null()) {
      DI_ASSIGN_OR_RETURN(ro.tools, chat::parse_tools(tools));
    }
  }
  return chat::render_prompt(parsed, ro);
}

struct ChatConversation::Impl {
  chat::ChatRequest request;  // messages and request-level tools
};

ChatConversation::ChatConversation() : impl_(std::make_unique<Impl>()) {}
ChatConversation::~ChatConversation() = default;
ChatConversation::ChatConversation(ChatConversation&&) noexcept = default;
ChatConversation& ChatConversation::operator=(ChatConversation&&) noexcept = default;

Expected<ChatConversation> ChatConversation::from_json(std::string_view request_json) {
  DI_ASSIGN_OR_RETURN(chat::ChatRequest request, chat::parse_chat_request_json(request_json));
  ChatConversation c;
  c.impl_->request = std::move(request);
  return c;
}

Status ChatConversation::set_tools_json(std::string_view tools_json) {
  DI_ASSIGN_OR_RETURN(impl_->request.tools, chat::parse_tools_json(tools_json));
  return Status::ok_status();
}

Status ChatConversation::add_message(std::string_view role, std::string content,
                                     std::string reasoning_content) {
  chat::ChatMessage m;
  bool known = false;
  for (chat::Role r : {chat::Role::kSystem, chat::Role::kUser, chat::Role::kAssistant,
                       chat::Role::kTool, chat::Role::kDeveloper, chat::Role::kLatestReminder}) {
    if (role == chat::role_name(r)) {
      m.role = r;
      known = true;
    }
  }
  if (!known) {
    return invalid_argument("unknown chat role '" + std::string(role) +
                            "' (expected system, user, assistant, tool, developer or "
                            "latest_reminder)");
  }
  m.content = std::move(content);
  if (!reasoning_content.empty()) m.reasoning_content = std::move(reasoning_content);
  impl_->request.messages.push_back(std::move(m));
  return Status::ok_status();
}

void ChatConversation::clear() { impl_->request = {}; }

Expected<std::string> ChatConversation::render(const ChatRenderOptions& options) const {
  DI_ASSIGN_OR_RETURN(chat::RenderOptions ro, render_options(options));
  ro.tools = impl_->request.tools;
  return chat::render_prompt(impl_->request.messages, ro);
}

Expected<ChatOutput> parse_chat_output(std::string_view text, bool thinking) {
  DI_ASSIGN_OR_RETURN(chat::AssistantOutput parsed, chat::parse_assistant_output(text, thinking));
  ChatOutput out;
  out.reasoning_content = std::move(parsed.reasoning_content);
  out.content = std::move(parsed.content);
  for (chat::ParsedToolCall& c : parsed.tool_calls) {
    out.tool_calls.push_back(ChatToolCall{std::move(c.name), std::move(c.arguments)});
  }
  out.ended = parsed.ended;
  return out;
}

struct ChatOutputParser::Impl {
  Impl(bool thinking, bool stream_tool_calls) : parser(thinking, stream_tool_calls) {}
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

ChatOutputParser::ChatOutputParser(bool thinking, bool stream_tool_calls)
    : impl_(std::make_unique<Impl>(thinking, stream_tool_calls)) {}
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
