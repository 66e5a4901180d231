// Rendering rules spelled out inline (each expectation derived from the named function of the
// official encoding_dsv4.py; the same scenarios are also pinned by the generated goldens), and
// the errors a caller can get, with their messages.
#include "tokenizer/chat/render.h"

#include <gtest/gtest.h>

#include "tokenizer/chat/chat_json.h"

namespace deepinfer::chat {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

Expected<std::string> render_json(const std::string& messages_json, RenderOptions opt = {}) {
  DI_ASSIGN_OR_RETURN(ChatRequest req, parse_chat_request_json(messages_json));
  if (opt.tools.empty()) opt.tools = req.tools;
  return render_prompt(req.messages, opt);
}

std::string must_render(const std::string& json, RenderOptions opt = {}) {
  auto out = render_json(json, opt);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::string();
}

std::string error_of(const std::string& json, RenderOptions opt = {}) {
  auto out = render_json(json, opt);
  EXPECT_FALSE(out.ok()) << "expected an error, got: " << (out.ok() ? *out : "");
  return out.ok() ? std::string() : out.status().message();
}

TEST(ChatRender, SingleUserChatMode) {
  // encode_messages: BOS; render_message: <｜User｜>content, then <｜Assistant｜></think> (chat).
  EXPECT_EQ(must_render(R"([{"role":"user","content":"Hi"}])"),
            kBos + "<｜User｜>Hi<｜Assistant｜></think>");
}

TEST(ChatRender, SingleUserThinkingMode) {
  // render_message: the last user turn opens <think> in thinking mode.
  RenderOptions opt;
  opt.thinking = true;
  EXPECT_EQ(must_render(R"([{"role":"user","content":"Hi"}])", opt),
            kBos + "<｜User｜>Hi<｜Assistant｜><think>");
}

TEST(ChatRender, SystemPromptAndEarlierReasoningDropped) {
  // system_msg_template is the bare text; _drop_thinking_messages strips earlier reasoning and the
  // earlier user turn is closed with </think>; the final assistant keeps "reasoning</think>".
  RenderOptions opt;
  opt.thinking = true;
  EXPECT_EQ(must_render(R"([{"role":"system","content":"S"},{"role":"user","content":"A"},
      {"role":"assistant","reasoning_content":"r1","content":"a1"},{"role":"user","content":"B"},
      {"role":"assistant","reasoning_content":"r2","content":"b1"}])",
                        opt),
            kBos + "S<｜User｜>A<｜Assistant｜></think>a1" + kEos +
                "<｜User｜>B<｜Assistant｜><think>r2</think>b1" + kEos);
}

TEST(ChatRender, ToolsKeepReasoningAndMergeResults) {
  // encode_messages: tools anywhere disable drop_thinking, so every turn keeps its reasoning and
  // opens <think>; merge_tool_messages turns the tool result into a user turn.
  RenderOptions opt;
  opt.thinking = true;
  const std::string out = must_render(R"({"messages":[{"role":"user","content":"Q"},
      {"role":"assistant","reasoning_content":"r","tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"f","arguments":"{\"x\": 1, \"s\": \"v\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"R"}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})",
                                      opt);
  const std::string tail =
      "<｜User｜>Q<｜Assistant｜><think>r</think>\n\n<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"x\" string=\"false\">1</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"s\" string=\"true\">v</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>" +
      kEos + "<｜User｜><tool_result>R</tool_result><｜Assistant｜><think>";
  ASSERT_GE(out.size(), tail.size());
  EXPECT_EQ(out.substr(out.size() - tail.size()), tail);
  // The tools section sits in an empty system message first (no system message was given).
  EXPECT_EQ(out.rfind(kBos + "\n\n## Tools\n", 0), 0u);
  EXPECT_NE(out.find("{\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}\n\nYou MUST"),
            std::string::npos);
}

TEST(ChatRender, MaxEffortPreambleOnlyInThinkingMode) {
  RenderOptions opt;
  opt.thinking = true;
  opt.reasoning_effort = ReasoningEffort::kMax;
  const std::string out = must_render(R"([{"role":"user","content":"Q"}])", opt);
  EXPECT_EQ(
      out.rfind(kBos + "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n", 0), 0u);
  EXPECT_NE(out.find("unchecked.\n\n<｜User｜>Q<｜Assistant｜><think>"), std::string::npos);
  opt.thinking = false;
  EXPECT_EQ(must_render(R"([{"role":"user","content":"Q"}])", opt),
            kBos + "<｜User｜>Q<｜Assistant｜></think>");
  opt.thinking = true;
  opt.effort_profile = EffortProfile::k0731;
  EXPECT_NE(must_render(R"([{"role":"user","content":"Q"}])", opt).find("Beyond maximum"),
            std::string::npos);
}

TEST(ChatRender, OptionsBosGenerationPromptAndContinuation) {
  RenderOptions opt;
  opt.add_bos = false;
  opt.add_generation_prompt = false;
  EXPECT_EQ(must_render(R"([{"role":"user","content":"Hi"}])", opt), "<｜User｜>Hi");
  RenderOptions cont;
  cont.continue_final_message = true;
  // assistant_msg_wo_eos_template: the open turn has no EOS.
  EXPECT_EQ(
      must_render(R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"Hel"}])", cont),
      kBos + "<｜User｜>Hi<｜Assistant｜></think>Hel");
}

TEST(ChatRender, ErrorsNameTheMessageAndField) {
  EXPECT_NE(error_of(R"([{"role":"user","content":"a"},{"role":"robot","content":"b"}])")
                .find("messages[1].role: unknown role 'robot'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user"}])").find("messages[0].content: missing"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user","content":"a"},{"role":"tool","content":"r"}])")
                .find("messages[1]: tool message without a preceding assistant message"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user","content":"a"},{"role":"assistant","tool_calls":[
      {"function":{"name":"f","arguments":"{oops"}}]}])")
                .find("messages[1].tool_calls[0].function.arguments: malformed JSON"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user","content":"a"},{"role":"assistant","tool_calls":[
      {"function":{"name":"f","arguments":"[1]"}}]}])")
                .find("expected a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user","content":"a"},{"role":"assistant","tool_calls":[
      {"id":"c1","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c9","content":"r"}])")
                .find("messages[2].tool_call_id: 'c9' matches no tool call of messages[1]"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user","content":[{"type":"image_url","image_url":{}}]}])")
                .find("messages[0].content[0]: only text parts are supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user","content":"a")").find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of(R"([{"role":"user","content":"a","task":"dance"}])")
                .find("messages[0].task: unknown task 'dance'"),
            std::string::npos);
  RenderOptions low;
  low.reasoning_effort = ReasoningEffort::kLow;
  EXPECT_NE(error_of(R"([{"role":"user","content":"a"}])", low).find("'low' is not defined"),
            std::string::npos);
  RenderOptions cont;
  cont.continue_final_message = true;
  EXPECT_NE(error_of(R"([{"role":"user","content":"a"}])", cont).find("continue_final_message"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::chat
