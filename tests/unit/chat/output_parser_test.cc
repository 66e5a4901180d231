// The streaming output parser beyond the official goldens: our documented leniencies (no EOS,
// no "</think>", block without its two newlines), UTF-8-whole deltas, event order, and errors —
// each checked under every chunking against the one-shot parse.
#include <gtest/gtest.h>

#include "test_util.h"

namespace deepinfer::chat {
namespace {

using testing::chunkings;
using testing::parse_chunked;

const std::string kEos = "<｜end▁of▁sentence｜>";
const std::string kBlock =
    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
    "<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

AssistantOutput parse_all_ways(const std::string& text, bool thinking) {
  auto one = parse_assistant_output(text, thinking);
  EXPECT_TRUE(one.ok()) << one.status().to_string();
  if (!one.ok()) return {};
  for (const auto& sizes : chunkings(text.size())) {
    auto chunked = parse_chunked(text, thinking, sizes);
    EXPECT_TRUE(chunked.ok()) << chunked.status().to_string();
    if (!chunked.ok()) continue;
    EXPECT_EQ(chunked->reasoning_content, one->reasoning_content);
    EXPECT_EQ(chunked->content, one->content);
    EXPECT_EQ(chunked->tool_calls, one->tool_calls);
    EXPECT_EQ(chunked->ended, one->ended);
  }
  return *one;
}

std::string error_all_ways(const std::string& text, bool thinking) {
  auto one = parse_assistant_output(text, thinking);
  EXPECT_FALSE(one.ok()) << "expected an error for: " << text;
  for (const auto& sizes : chunkings(text.size())) {
    EXPECT_FALSE(parse_chunked(text, thinking, sizes).ok());
  }
  return one.ok() ? std::string() : one.status().message();
}

TEST(OutputParser, TruncatedOutputs) {
  AssistantOutput r = parse_all_ways("still thinking <think> about it", true);
  EXPECT_EQ(r.reasoning_content, "still thinking <think> about it");
  EXPECT_EQ(r.content, "");
  EXPECT_FALSE(r.ended);
  r = parse_all_ways("done</think>partial answer\n", true);
  EXPECT_EQ(r.reasoning_content, "done");
  EXPECT_EQ(r.content, "partial answer\n");
  r = parse_all_ways("reasoning cut by EOS" + kEos, true);
  EXPECT_EQ(r.reasoning_content, "reasoning cut by EOS");
  EXPECT_TRUE(r.ended);
}

TEST(OutputParser, ToolBlockLeniency) {
  // Without the two newlines before the block, and with whitespace before EOS.
  AssistantOutput r = parse_all_ways("Sure." + kBlock + "\n" + kEos, false);
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"a\": \"x\"}");
  // A block that starts inside the reasoning ends it.
  r = parse_all_ways("plan\n\n" + kBlock, true);
  EXPECT_EQ(r.reasoning_content, "plan");
  EXPECT_EQ(r.tool_calls.size(), 1u);
  // Only two newlines belong to the block opener.
  r = parse_all_ways("a\n\n\n" + kBlock + kEos, false);
  EXPECT_EQ(r.content, "a\n");
}

TEST(OutputParser, EventsInOrderAndDeltasAreWholeUtf8) {
  const std::string text = "é東🚀</think>ñ🚀\n\n" + kBlock + kEos;
  std::vector<OutputEvent> events;
  auto r = parse_chunked(text, true, {1}, &events);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, OutputEventType::kToolCall);
  EXPECT_EQ(events.back().tool_index, 0u);
  bool seen_content = false;
  for (const auto& e : events) {
    if (e.type == OutputEventType::kContent) seen_content = true;
    if (e.type == OutputEventType::kReasoning) {
      EXPECT_FALSE(seen_content) << "reasoning after content";
    }
    if (e.type == OutputEventType::kToolCall) continue;
    ASSERT_FALSE(e.text.empty());
    const auto lead = static_cast<unsigned char>(e.text[0]);
    EXPECT_NE(lead & 0xC0, 0x80) << "delta starts inside a character";
  }
  EXPECT_EQ(r->reasoning_content, "é東🚀");
  EXPECT_EQ(r->content, "ñ🚀");
}

TEST(OutputParser, MalformedDsmlIsAnError) {
  const std::string open = "\n\n<｜DSML｜tool_calls>\n";
  EXPECT_NE(error_all_ways("x\n\n<｜DSML｜tool_calls>oops", false).find("expected '>\\n'"),
            std::string::npos);
  EXPECT_NE(
      error_all_ways(open + "<｜DSML｜invoke nam=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
                     false)
          .find("expected ' name=\"NAME\">"),
      std::string::npos);
  EXPECT_NE(
      error_all_ways(
          open +
              "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\">1</｜DSML｜parameter>\n"
              "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
          false)
          .find("string=\"true|false\">VALUE"),
      std::string::npos);
  EXPECT_NE(
      error_all_ways(open + "<｜DSML｜invoke name=\"f\">\n"
                            "<｜DSML｜parameter name=\"a\" string=\"true\">1</｜DSML｜parameter>\n"
                            "<｜DSML｜parameter name=\"a\" string=\"true\">2</｜DSML｜parameter>\n"
                            "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
                     false)
          .find("duplicate parameter 'a'"),
      std::string::npos);
  EXPECT_NE(error_all_ways(open + "<｜DSML｜invoke name=\"f\">\n", false)
                .find("ended inside a <｜DSML｜tool_calls> block"),
            std::string::npos);
  EXPECT_NE(error_all_ways(kBlock + "more text" + kEos, false)
                .find("unexpected text after </｜DSML｜tool_calls>"),
            std::string::npos);
  EXPECT_NE(error_all_ways("hi" + kEos + "again", false)
                .find("unexpected text after <｜end▁of▁sentence｜>"),
            std::string::npos);
  // The error carries the byte offset of the failing step.
  EXPECT_NE(
      error_all_ways("x\n\n<｜DSML｜tool_calls>oops", false).find("assistant output at byte "),
      std::string::npos);
}

TEST(OutputParser, FailedParserStaysFailed) {
  AssistantOutputParser p(false);
  std::vector<OutputEvent> ev;
  EXPECT_FALSE(p.feed("<｜DSML｜tool_calls>bad", &ev).ok());
  EXPECT_FALSE(p.feed("more", &ev).ok());
  EXPECT_FALSE(p.finish(&ev).ok());
  AssistantOutputParser q(false);
  EXPECT_TRUE(q.finish(&ev).ok());
  EXPECT_FALSE(q.feed("late", &ev).ok());
}

}  // namespace
}  // namespace deepinfer::chat
