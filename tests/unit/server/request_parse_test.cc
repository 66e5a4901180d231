// The server's request parsing and the forced-tool-call grammar (tools/server), without a
// network: OpenAI-shaped errors name the parameter; the DSML grammar of tool_choice "required"
// accepts exactly what the official renderer writes for a valid call and refuses a call of an
// unknown function or with a missing parameter.
#include <gtest/gtest.h>

#include "api.h"
#include "deepinfer/engine_loop.h"
#include "structured/compiler.h"
#include "structured/matcher.h"
#include "structured/tokenizer_info.h"
#include "tokenizer/chat/dsml.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {
namespace {

const std::string kModel = std::string(DEEPINFER_TEST_SOURCE_DIR) + "/models/v4-small";

class ServerParse : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.model_dir = kModel;
    o.num_threads = 1;
    o.max_model_len = 1024;
    auto l = EngineLoop::create(o);
    ASSERT_TRUE(l.ok()) << l.status().message();
    loop_ = l->release();
  }
  static void TearDownTestSuite() { delete loop_; }
  ApiContext ctx() const {
    ApiContext c;
    c.loop = loop_;
    c.model_names = {"default"};
    return c;
  }
  static EngineLoop* loop_;
};
EngineLoop* ServerParse::loop_ = nullptr;

ApiError error_of(const std::string& body, const ApiContext& c, ApiKind kind = ApiKind::kChat) {
  try {
    if (kind == ApiKind::kChat) parse_chat_request(body, c);
    if (kind == ApiKind::kCompletion) parse_completion_request(body, c);
    if (kind == ApiKind::kMessages) parse_messages_request(body, c);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

TEST_F(ServerParse, ErrorsNameTheParameter) {
  const ApiContext c = ctx();
  const std::string m = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_EQ(error_of("{" + m + R"(, "temperature": "hot"})", c).param, "temperature");
  EXPECT_EQ(error_of("{" + m + R"(, "temperature": 3})", c).param, "temperature");
  EXPECT_EQ(error_of("{" + m + R"(, "top_p": 0})", c).param, "top_p");
  EXPECT_EQ(error_of("{" + m + R"(, "n": 0})", c).param, "n");
  EXPECT_EQ(error_of("{" + m + R"(, "seed": "x"})", c).param, "seed");
  EXPECT_EQ(error_of("{" + m + R"(, "stream_options": {"include_usage": true}})", c).param,
            "stream_options");
  EXPECT_EQ(error_of(R"({"messages": []})", c).param, "messages");
  EXPECT_EQ(error_of("{" + m + R"(, "model": "other"})", c).status, 404);
  EXPECT_EQ(error_of("{not json", c).status, 400);
  const ApiError long_prompt =
      error_of(R"({"prompt": "hi", "max_tokens": 5000})", c, ApiKind::kCompletion);
  EXPECT_EQ(long_prompt.code, "context_length_exceeded");
  EXPECT_EQ(
      error_of(R"({"messages": [{"role": "user", "content": "x"}]})", c, ApiKind::kMessages).param,
      "max_tokens");
}

TEST_F(ServerParse, ChatOptions) {
  const ApiContext c = ctx();
  GenerationSpec s = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 7,
          "seed": 5, "logprobs": true, "top_logprobs": 2, "reasoning_effort": "high",
          "stop": "x", "stream": true, "stream_options": {"include_usage": true}})",
      c);
  EXPECT_EQ(s.params.max_tokens, 7);
  EXPECT_EQ(s.params.seq_seed, 5u);
  EXPECT_EQ(s.params.logprobs, 2);
  EXPECT_TRUE(s.thinking && s.stream && s.include_usage);
  EXPECT_EQ(s.params.stop, std::vector<std::string>{"x"});
  ASSERT_EQ(s.prompts.size(), 1u);
  EXPECT_EQ(loop_->decode(s.prompts[0].ids).rfind("<｜User｜>hi<｜Assistant｜><think>", 0), 0u)
      << loop_->decode(s.prompts[0].ids);  // BOS is skipped by decode
  GenerationSpec j = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}],
          "chat_template_kwargs": {"thinking": true},
          "response_format": {"type": "json_object"}})",
      c);
  ASSERT_TRUE(j.params.structured.has_value());
  EXPECT_EQ(j.params.structured->schema_type, "json");
  EXPECT_FALSE(j.thinking);  // constrained output: answered in chat mode
}

TEST_F(ServerParse, ForcedToolCallGrammarMatchesTheRenderer) {
  const std::string tools = R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
      "note": {"type": "string"}}, "required": ["city", "days", "unit"]}}},
      {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}])";
  auto tok = tokenizer::Tokenizer::from_file(kModel + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  structured::GrammarCompiler compiler(structured::TokenizerInfo::from_tokenizer(*tok));
  auto grammar = compiler.compile("ebnf", forced_tool_call_grammar(tools, ""));
  ASSERT_TRUE(grammar.ok()) << grammar.status().message();
  auto accepts = [&](const std::string& name, const std::string& args) {
    auto text = chat::render_tool_calls({{"", name, args}}, "test");
    EXPECT_TRUE(text.ok());
    structured::GrammarMatcher m(*grammar);
    return m.accept_bytes(*text) && m.can_terminate();
  };
  EXPECT_TRUE(accepts("get_weather", R"({"city": "Paris", "days": 3, "unit": "c"})"));
  EXPECT_TRUE(accepts("get_weather", R"({"city": "Rome", "days": -12, "unit": "f"})"));
  EXPECT_TRUE(accepts("now", "{}"));
  EXPECT_FALSE(accepts("get_weather", R"({"city": "Paris", "days": 3})"));  // missing unit
  EXPECT_FALSE(accepts("get_weather", R"({"city": "Paris", "days": "3", "unit": "c"})"));
  EXPECT_FALSE(accepts("get_weather", R"({"city": "Paris", "days": 3, "unit": "k"})"));
  EXPECT_FALSE(accepts("other", "{}"));
  auto named = compiler.compile("ebnf", forced_tool_call_grammar(tools, "now"));
  ASSERT_TRUE(named.ok());
  structured::GrammarMatcher m(*named);
  auto weather = chat::render_tool_calls({{"", "get_weather", R"({"city": "P", "days": 1,
      "unit": "c"})"}},
                                         "test");
  EXPECT_FALSE(m.accept_bytes(*weather));
}

TEST_F(ServerParse, StreamedToolArgumentsConcatenateToValidJson) {
  // The public chat parser: a DSML call split anywhere streams name, then argument fragments.
  const std::string text =
      "Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
      "string=\"true\">x \"y\" ü<b</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" "
      "string=\"false\">[1, 2]</｜DSML｜parameter>\n<｜DSML｜parameter name=\"c\" "
      "string=\"false\">not json</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  for (size_t step : {1u, 3u, 7u, 1000u}) {
    ChatOutputParser p(false);
    std::vector<ChatOutputEvent> ev;
    for (size_t i = 0; i < text.size(); i += step) {
      ASSERT_TRUE(p.feed(text.substr(i, step), &ev).ok());
    }
    ASSERT_TRUE(p.finish(&ev).ok());
    std::string content, args, name, whole;
    int fragments = 0;
    for (const ChatOutputEvent& e : ev) {
      if (e.type == ChatOutputEvent::Type::kContent) content += e.text;
      if (e.type == ChatOutputEvent::Type::kToolCallBegin) name = e.tool_name;
      if (e.type == ChatOutputEvent::Type::kToolCallArguments) {
        args += e.text;
        ++fragments;
        EXPECT_EQ(e.text.find("DSML"), std::string::npos);
      }
      if (e.type == ChatOutputEvent::Type::kToolCallEnd) whole = e.text;
    }
    // Fed a byte at a time, the string value streams in pieces ('x', ' ', '\"', ...).
    if (step == 1) {
      EXPECT_GE(fragments, 8);
    }
    EXPECT_EQ(content, "Sure.");
    EXPECT_EQ(name, "f");
    EXPECT_EQ(args, R"({"a": "x \"y\" ü<b", "b": [1, 2], "c": "not json"})");
    EXPECT_EQ(whole, args);
  }
}

}  // namespace
}  // namespace deepinfer::server
