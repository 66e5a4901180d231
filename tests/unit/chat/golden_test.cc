// Goldens from DeepSeek's official renderer and parser (encoding_dsv4.py encode_messages and
// parse_message_from_completion_text), stored in tests/data/chat/v4_goldens.json by
// tests/reference/chat/gen_chat_goldens.py. Each render case names the official rule it pins.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/chat/chat_json.h"
#include "tokenizer/chat/render.h"

namespace deepinfer::chat {
namespace {

using testing::chunkings;
using testing::load_goldens;
using testing::parse_chunked;

TEST(ChatGolden, RenderMatchesOfficialEncoder) {
  const OrderedJson goldens = load_goldens();
  ASSERT_GE(goldens["render"].size(), 20u);
  for (const auto& c : goldens["render"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + " (" + c["rule"].get<std::string>() + ")");
    auto messages = parse_messages(c["messages"]);
    ASSERT_TRUE(messages.ok()) << messages.status().to_string();
    RenderOptions opt;
    if (!c["tools"].is_null()) {
      auto tools = parse_tools(c["tools"]);
      ASSERT_TRUE(tools.ok()) << tools.status().to_string();
      opt.tools = *tools;
    }
    opt.thinking = c["thinking"].get<bool>();
    opt.drop_thinking = c["drop_thinking"].get<bool>();
    auto effort = parse_reasoning_effort(
        c["reasoning_effort"].is_null() ? "" : c["reasoning_effort"].get<std::string>());
    ASSERT_TRUE(effort.ok());
    opt.reasoning_effort = *effort;
    auto profile = parse_effort_profile(c["effort_profile"].get<std::string>());
    ASSERT_TRUE(profile.ok());
    opt.effort_profile = *profile;
    auto prompt = render_prompt(*messages, opt);
    ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["prompt"].get<std::string>());
  }
}

TEST(ChatGolden, ParseMatchesOfficialParserUnderEveryChunking) {
  const OrderedJson goldens = load_goldens();
  ASSERT_GE(goldens["parse"].size(), 5u);
  for (const auto& c : goldens["parse"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = c["text"].get<std::string>();
    const bool thinking = c["thinking"].get<bool>();
    auto one_shot = parse_assistant_output(text, thinking);
    ASSERT_TRUE(one_shot.ok()) << one_shot.status().to_string();
    EXPECT_EQ(one_shot->reasoning_content, c["reasoning_content"].get<std::string>());
    EXPECT_EQ(one_shot->content, c["content"].get<std::string>());
    EXPECT_TRUE(one_shot->ended);
    ASSERT_EQ(one_shot->tool_calls.size(), c["tool_calls"].size());
    for (std::size_t i = 0; i < one_shot->tool_calls.size(); ++i) {
      EXPECT_EQ(one_shot->tool_calls[i].name, c["tool_calls"][i]["name"].get<std::string>());
      EXPECT_EQ(one_shot->tool_calls[i].arguments,
                c["tool_calls"][i]["arguments"].get<std::string>());
    }
    for (const auto& sizes : chunkings(text.size())) {
      auto chunked = parse_chunked(text, thinking, sizes);
      ASSERT_TRUE(chunked.ok()) << chunked.status().to_string();
      EXPECT_EQ(chunked->reasoning_content, one_shot->reasoning_content);
      EXPECT_EQ(chunked->content, one_shot->content);
      EXPECT_EQ(chunked->tool_calls, one_shot->tool_calls);
      EXPECT_EQ(chunked->ended, one_shot->ended);
    }
  }
}

// The assistant turns inside the rendered goldens are model outputs too: every completed
// assistant turn (after "<｜Assistant｜>" + think token, up to its EOS) must parse, under every
// chunking, to the same result as in one shot.
TEST(ChatGolden, RenderedAssistantTurnsParseUnderEveryChunking) {
  const OrderedJson goldens = load_goldens();
  const std::string eos = "<｜end▁of▁sentence｜>";
  int turns = 0;
  for (const auto& c : goldens["render"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    for (const std::string marker : {"<｜Assistant｜><think>", "<｜Assistant｜></think>"}) {
      const bool thinking = marker.find("<think>") != std::string::npos;
      for (std::size_t at = prompt.find(marker); at != std::string::npos;
           at = prompt.find(marker, at + 1)) {
        const std::size_t start = at + marker.size();
        const std::size_t end = prompt.find(eos, start);
        if (end == std::string::npos || prompt.find("<｜User｜>", start) < end) continue;
        const std::string text = prompt.substr(start, end + eos.size() - start);
        SCOPED_TRACE(c["name"].get<std::string>() + ": " + text.substr(0, 60));
        auto one_shot = parse_assistant_output(text, thinking);
        ASSERT_TRUE(one_shot.ok()) << one_shot.status().to_string();
        ++turns;
        for (const auto& sizes : chunkings(text.size())) {
          auto chunked = parse_chunked(text, thinking, sizes);
          ASSERT_TRUE(chunked.ok()) << chunked.status().to_string();
          EXPECT_EQ(chunked->reasoning_content, one_shot->reasoning_content);
          EXPECT_EQ(chunked->content, one_shot->content);
          EXPECT_EQ(chunked->tool_calls, one_shot->tool_calls);
        }
      }
    }
  }
  EXPECT_GE(turns, 8);
}

}  // namespace
}  // namespace deepinfer::chat
