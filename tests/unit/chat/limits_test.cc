// The chat module's limits (src/tokenizer/chat/chat_limits.h, docs/limits.md): messages and
// tools documents, tool-call arguments and model output just over each limit give an error
// naming the limit, the value found and the fix; a normal input still parses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "deepinfer/chat.h"
#include "tokenizer/chat/chat_json.h"
#include "tokenizer/chat/chat_limits.h"
#include "tokenizer/chat/output_parser.h"

namespace deepinfer::chat {
namespace {

using ::testing::HasSubstr;

std::string deep_array(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string messages_json(size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) {
    s += i ? "," : "";
    s += R"({"role":"user","content":"x"})";
  }
  return s + "]";
}

TEST(ChatLimits, JsonDepth) {
  auto deep = parse_chat_request_json(R"({"messages": [], "x": )" + deep_array(100000) + "}");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(),
            "messages: JSON nesting depth 100,001 exceeds the limit of 512 (kMaxChatJsonDepth in "
            "src/tokenizer/chat/chat_limits.h); nest the document less deeply");
  // The public entry (render_chat_prompt) and the tools document are checked the same way.
  auto rendered = render_chat_prompt(deep_array(100000), "", {});
  ASSERT_FALSE(rendered.ok());
  EXPECT_THAT(rendered.status().message(), HasSubstr("kMaxChatJsonDepth"));
  auto tools = parse_tools_json(deep_array(100000));
  ASSERT_FALSE(tools.ok());
  EXPECT_THAT(tools.status().message(), HasSubstr("tools: JSON nesting depth 100,000"));
  // Under the limit a deep (unused) field is fine.
  EXPECT_TRUE(parse_chat_request_json(R"({"messages": [], "x": )" + deep_array(500) + "}").ok());
}

TEST(ChatLimits, ToolCallArgumentsDepth) {
  auto with_args = [](const std::string& args) {
    return R"([{"role": "assistant", "content": "", "tool_calls": [{"type": "function",
               "function": {"name": "f", "arguments": ")" +
           args + R"("}}]}])";
  };
  auto ok = parse_chat_request_json(with_args(R"({\"a\": )" + deep_array(100) + "}"));
  EXPECT_TRUE(ok.ok()) << ok.status().message();
  auto deep = parse_chat_request_json(with_args(R"({\"a\": )" + deep_array(100000) + "}"));
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(),
              HasSubstr("messages[0].tool_calls[0].function.arguments: JSON nesting depth "
                        "100,001 exceeds the limit of 512 (kMaxChatJsonDepth"));
}

TEST(ChatLimits, MessageCount) {
  auto ok = parse_chat_request_json(messages_json(kMaxMessages));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->messages.size(), kMaxMessages);
  auto over = parse_chat_request_json(messages_json(kMaxMessages + 1));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "messages: 65,537 messages exceeds the limit of 65,536 (kMaxMessages in "
            "src/tokenizer/chat/chat_limits.h); drop or summarise earlier turns");
}

TEST(ChatLimits, ToolCount) {
  auto tools = [](size_t n) {
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) {
      s += i ? "," : "";
      s += R"({"type":"function","function":{"name":"f)";
      s += std::to_string(i);
      s += R"("}})";
    }
    return s + "]";
  };
  EXPECT_TRUE(parse_tools_json(tools(kMaxTools)).ok());
  auto over = parse_tools_json(tools(kMaxTools + 1));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "tools: 1,025 tools exceeds the limit of 1,024 (kMaxTools in "
            "src/tokenizer/chat/chat_limits.h); offer fewer tools per request");
}

TEST(ChatLimits, ContentSize) {
  // Text parts count together: two halves joined by "\n" are exactly at the limit.
  const std::string half(kMaxContentBytes / 2, 'c');
  auto parts =
      parse_chat_request_json(R"([{"role": "user", "content": [{"type": "text", "text": ")" + half +
                              R"("}, {"type": "text", "text": ")" + half.substr(1) + "\"}]}]");
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ(parts->messages[0].content.size(), kMaxContentBytes);
  const std::string over_limit(kMaxContentBytes + 1, 'c');
  auto over = parse_chat_request_json(R"([{"role": "user", "content": ")" + over_limit + "\"}]");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "messages[0].content: content of 16,777,217 bytes exceeds the limit of 16,777,216 "
            "(kMaxContentBytes in src/tokenizer/chat/chat_limits.h); send less text in one "
            "message");
}

TEST(ChatLimits, PendingDsmlMarkup) {
  const std::string open =
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"a\" string=\"true\">";
  AssistantOutputParser p(/*thinking=*/false);
  std::vector<OutputEvent> events;
  ASSERT_TRUE(p.feed(open, &events).ok());
  const std::string chunk(1 << 20, 'v');
  Status st;
  size_t fed = 0;
  while (st.ok() && fed <= kMaxPendingDsmlBytes) {
    st = p.feed(chunk, &events);
    fed += chunk.size();
  }
  ASSERT_FALSE(st.ok());
  EXPECT_GT(fed, kMaxPendingDsmlBytes - chunk.size());
  EXPECT_THAT(st.message(), HasSubstr("bytes held waiting for a DSML marker exceeds the limit of "
                                      "16,777,216 (kMaxPendingDsmlBytes in "
                                      "src/tokenizer/chat/chat_limits.h)"));
  // A long value under the limit closes normally.
  AssistantOutputParser q(false);
  events.clear();
  ASSERT_TRUE(q.feed(open + std::string(kMaxPendingDsmlBytes / 2, 'v') +
                         "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
                     &events)
                  .ok());
  ASSERT_TRUE(q.finish(&events).ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, OutputEventType::kToolCall);
}

// A non-string DSML parameter nested deeper than kMaxChatJsonDepth is given as a JSON string,
// streamed or not, so that no reader of the arguments walks it recursively.
TEST(ChatLimits, DeepDsmlValueBecomesAString) {
  auto call_with = [](const std::string& value) {
    return "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
           "<｜DSML｜parameter name=\"a\" string=\"false\">" +
           value + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  };
  for (bool stream : {false, true}) {
    for (size_t depth : {size_t{3}, kMaxChatJsonDepth + 1}) {
      const std::string value = deep_array(depth);
      AssistantOutputParser p(/*thinking=*/false, stream);
      std::vector<OutputEvent> events;
      ASSERT_TRUE(p.feed(call_with(value), &events).ok());
      ASSERT_TRUE(p.finish(&events).ok());
      ASSERT_FALSE(events.empty());
      ASSERT_EQ(events.back().type, OutputEventType::kToolCall);
      const std::string want =
          depth <= kMaxChatJsonDepth ? "{\"a\": " + value + "}" : "{\"a\": \"" + value + "\"}";
      EXPECT_EQ(events.back().tool_call.arguments, want)
          << "stream " << stream << " depth " << depth;
    }
  }
}

}  // namespace
}  // namespace deepinfer::chat
