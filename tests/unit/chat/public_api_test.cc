// include/deepinfer/chat.h against the chat module it wraps: ChatConversation renders what
// render_prompt renders for the same request (from JSON or built message by message),
// parse_chat_output and the non-streaming ChatOutputParser give what parse_assistant_output
// gives, and the errors come through unchanged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "deepinfer/chat.h"
#include "tokenizer/chat/chat_json.h"
#include "tokenizer/chat/output_parser.h"
#include "tokenizer/chat/render.h"

namespace deepinfer {
namespace {

const char* kMessages =
    R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},)"
    R"( {"role": "assistant", "content": "Hello", "reasoning_content": "greet"},)"
    R"( {"role": "user", "content": "Weather?"}])";
const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "d",)"
    R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";

TEST(PublicChat, ConversationFromJsonRendersWhatRenderPromptRenders) {
  for (bool thinking : {false, true}) {
    for (bool add_bos : {false, true}) {
      auto req = chat::parse_chat_request_json(kMessages);
      ASSERT_TRUE(req.ok());
      chat::RenderOptions ro;
      ro.thinking = thinking;
      ro.add_bos = add_bos;
      ro.reasoning_effort = chat::ReasoningEffort::kMax;
      ro.tools = *chat::parse_tools_json(kTools);
      auto want = chat::render_prompt(req->messages, ro);
      ASSERT_TRUE(want.ok()) << want.status().to_string();

      auto conversation = ChatConversation::from_json(kMessages);
      ASSERT_TRUE(conversation.ok());
      ASSERT_TRUE(conversation->set_tools_json(kTools).ok());
      ChatRenderOptions o;
      o.thinking = thinking;
      o.add_bos = add_bos;
      o.reasoning_effort = "max";
      auto got = conversation->render(o);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(*got, *want);
    }
  }
}

TEST(PublicChat, MessagesAddedOneByOneRenderLikeTheirJson) {
  ChatConversation built;
  ASSERT_TRUE(built.add_message("system", "Be brief.").ok());
  ASSERT_TRUE(built.add_message("user", "Hi").ok());
  ASSERT_TRUE(built.add_message("assistant", "Hello", "greet").ok());
  ASSERT_TRUE(built.add_message("user", "Weather?").ok());
  auto parsed = ChatConversation::from_json(kMessages);
  ASSERT_TRUE(parsed.ok());
  for (bool thinking : {false, true}) {
    ChatRenderOptions o;
    o.thinking = thinking;
    o.drop_thinking = false;
    EXPECT_EQ(*built.render(o), *parsed->render(o));
  }
  built.clear();
  ASSERT_TRUE(built.add_message("user", "Hi").ok());
  EXPECT_EQ(*built.render({}),
            *ChatConversation::from_json(R"([{"role":"user","content":"Hi"}])")->render({}));
}

TEST(PublicChat, ErrorsComeThroughUnchanged) {
  ChatConversation c;
  const Status bad_role = c.add_message("robot", "x");
  EXPECT_EQ(bad_role.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_role.message().find("'robot'"), std::string::npos);

  const char* bad = R"([{"role": "user"}])";
  auto want = chat::parse_chat_request_json(bad);
  auto got = ChatConversation::from_json(bad);
  ASSERT_FALSE(want.ok());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), want.status().message());

  ChatRenderOptions o;
  o.reasoning_effort = "extreme";
  auto effort = ChatConversation::from_json(kMessages)->render(o);
  ASSERT_FALSE(effort.ok());
  EXPECT_EQ(effort.status().message(), chat::parse_reasoning_effort("extreme").status().message());
}

TEST(PublicChat, OutputParsingMatchesTheChatModule) {
  const std::string text =
      "think</think>Answer.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>";
  auto want = chat::parse_assistant_output(text, true);
  auto got = parse_chat_output(text, true);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->reasoning_content, want->reasoning_content);
  EXPECT_EQ(got->content, want->content);
  EXPECT_EQ(got->ended, want->ended);
  ASSERT_EQ(got->tool_calls.size(), 1u);
  EXPECT_EQ(got->tool_calls[0].name, want->tool_calls[0].name);
  EXPECT_EQ(got->tool_calls[0].arguments, want->tool_calls[0].arguments);

  // Without streamed tool calls a call arrives once, whole, with its index.
  ChatOutputParser parser(true, /*stream_tool_calls=*/false);
  std::vector<ChatOutputEvent> events;
  for (char ch : text) ASSERT_TRUE(parser.feed(std::string(1, ch), &events).ok());
  ASSERT_TRUE(parser.finish(&events).ok());
  EXPECT_TRUE(parser.ended());
  std::string reasoning, content;
  int calls = 0;
  for (const ChatOutputEvent& e : events) {
    if (e.type == ChatOutputEvent::Type::kReasoning) reasoning += e.text;
    if (e.type == ChatOutputEvent::Type::kContent) content += e.text;
    ASSERT_NE(e.type, ChatOutputEvent::Type::kToolCallBegin);
    ASSERT_NE(e.type, ChatOutputEvent::Type::kToolCallArguments);
    if (e.type == ChatOutputEvent::Type::kToolCallEnd) {
      ++calls;
      EXPECT_EQ(e.tool_index, 0u);
      EXPECT_EQ(e.tool_name, want->tool_calls[0].name);
      EXPECT_EQ(e.text, want->tool_calls[0].arguments);
    }
  }
  EXPECT_EQ(reasoning, want->reasoning_content);
  EXPECT_EQ(content, want->content);
  EXPECT_EQ(calls, 1);

  auto broken = parse_chat_output("x\n\n<｜DSML｜tool_calls>oops", false);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(
      broken.status().message(),
      chat::parse_assistant_output("x\n\n<｜DSML｜tool_calls>oops", false).status().message());
}

}  // namespace
}  // namespace deepinfer
