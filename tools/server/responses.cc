// Engine events -> OpenAI chat / completions and Anthropic messages responses (api.h).
//
// Chat and messages outputs go through the DeepSeek-V4 output parser (include/deepinfer/chat.h)
// per sample: reasoning, content and tool calls are separated while they stream, tool-call
// arguments are streamed as JSON fragments as each DSML parameter completes, and no DSML markup
// reaches a client. Output the parser refuses (malformed DSML) ends that sample's visible text
// at the point of failure; the request still finishes normally.
#include <chrono>
#include <random>

#include "api.h"
#include "json_util.h"

namespace deepinfer::server {
namespace {

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s.push_back(kHex[rng() % 16]);
  return s;
}

Json bytes_of(const std::string& b) {
  Json out = Json::array();
  for (unsigned char c : b) out.push_back(static_cast<int>(c));
  return out;
}

std::string sse(const Json& j) { return "data: " + dump(j) + "\n\n"; }
std::string sse_event(const char* name, const Json& j) {
  return std::string("event: ") + name + "\ndata: " + dump(j) + "\n\n";
}

struct ToolCallState {
  std::string id, name, arguments;
  bool done = false;
};

// One sample (choice) of the response.
struct Choice {
  std::optional<ChatOutputParser> parser;
  bool parse_failed = false;
  bool role_sent = false;
  bool finished = false;
  std::string text;  // raw generated text (completions)
  std::string content, reasoning;
  std::vector<ToolCallState> calls;
  std::vector<TokenLogprobs> logprobs;
  int64_t tokens = 0;
  std::string finish_reason;
  std::optional<int32_t> stop_reason;
  std::string error;
};

// Events of the chat output parser for one delta of text (or the end).
std::vector<ChatOutputEvent> parse_piece(Choice& c, const std::string& text, bool end) {
  std::vector<ChatOutputEvent> events;
  if (!c.parser || c.parse_failed) return events;
  Status st = c.parser->feed(text, &events);
  if (st.ok() && end) st = c.parser->finish(&events);
  if (!st.ok()) c.parse_failed = true;  // the malformed rest is not shown
  for (const ChatOutputEvent& e : events) {
    switch (e.type) {
      case ChatOutputEvent::Type::kReasoning:
        c.reasoning += e.text;
        break;
      case ChatOutputEvent::Type::kContent:
        c.content += e.text;
        break;
      case ChatOutputEvent::Type::kToolCallBegin:
        c.calls.push_back({random_id("call_"), e.tool_name, "", false});
        break;
      case ChatOutputEvent::Type::kToolCallArguments:
        if (!c.calls.empty()) c.calls.back().arguments += e.text;
        break;
      case ChatOutputEvent::Type::kToolCallEnd:
        if (!c.calls.empty()) c.calls.back().done = true;
        break;
    }
  }
  return events;
}

class BuilderBase : public ResponseBuilder {
 public:
  BuilderBase(const GenerationSpec& spec, const ApiContext& ctx, std::string id)
      : spec_(spec), ctx_(ctx), id_(std::move(id)), created_(now_seconds()) {
    const size_t n = static_cast<size_t>(spec.params.n);
    choices_.resize(spec.prompts.size() * n);
    for (Choice& c : choices_) {
      if (spec.parse_output) c.parser.emplace(spec.thinking);
    }
    usage_.resize(spec.prompts.size());
  }

  std::optional<ApiError> failure() const override { return failure_; }

 protected:
  Choice& choice(size_t prompt, int32_t index, size_t* flat) {
    *flat = prompt * static_cast<size_t>(spec_.params.n) + static_cast<size_t>(index);
    return choices_.at(*flat);
  }
  void note_done(size_t prompt, const RequestEvent& ev) {
    usage_[prompt] = ev.usage;
    if (!ev.output.error.empty() && !failure_) {
      failure_ = ev.rejected ? bad_request(ev.output.error)
                             : ApiError(500, "internal_server_error", ev.output.error);
    }
    // A non-streaming response takes the final output (deltas are not accumulated).
    for (const CompletionOutput& o : ev.output.outputs) {
      size_t flat = 0;
      Choice& c = choice(prompt, o.index, &flat);
      if (!spec_.stream) {
        c.text = o.text;
        c.logprobs = o.logprobs;
        c.tokens = static_cast<int64_t>(o.token_ids.size());
        parse_piece(c, o.text, /*end=*/true);
      }
      c.finish_reason = o.finish_reason;
      c.stop_reason = o.stop_reason;
      c.error = o.error;
      c.finished = true;
    }
    if (ev.rejected) {
      for (size_t i = 0; i < static_cast<size_t>(spec_.params.n); ++i) {
        choices_[prompt * static_cast<size_t>(spec_.params.n) + i].finished = true;
      }
    }
    prompt_logprobs_.resize(spec_.prompts.size());
    prompt_logprobs_[prompt] = ev.output.prompt_logprobs;
    prompt_ids_.resize(spec_.prompts.size());
    prompt_ids_[prompt] = ev.output.prompt_token_ids;
  }
  Json usage_json() const {
    Usage u;
    for (const Usage& x : usage_) {
      u.prompt_tokens += x.prompt_tokens;
      u.completion_tokens += x.completion_tokens;
      u.cached_tokens += x.cached_tokens;
    }
    if (spec_.echo_only) u.completion_tokens = 0;
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  }
  Json running_usage() const {
    int64_t prompt = 0, completion = 0;
    for (const PromptInput& p : spec_.prompts) prompt += static_cast<int64_t>(p.ids.size());
    for (const Choice& c : choices_) completion += c.tokens;
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}};
  }
  Json error_chunk(const std::string& message) const {
    return {{"error",
             {{"message", message},
              {"type", "internal_server_error"},
              {"param", nullptr},
              {"code", 500}}}};
  }
  Json chat_logprobs(const std::vector<TokenLogprobs>& lps) const {
    Json content = Json::array();
    for (const TokenLogprobs& lp : lps) {
      const std::string tb = ctx_.loop->token_bytes(lp.token);
      Json top = Json::array();
      for (const auto& [t, l] : lp.top) {
        const std::string b = ctx_.loop->token_bytes(t);
        top.push_back({{"token", b}, {"logprob", l}, {"bytes", bytes_of(b)}});
      }
      content.push_back(
          {{"token", tb}, {"logprob", lp.logprob}, {"bytes", bytes_of(tb)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }

  const GenerationSpec& spec_;
  const ApiContext& ctx_;
  std::string id_;
  int64_t created_;
  std::vector<Choice> choices_;
  std::vector<Usage> usage_;
  std::vector<std::vector<TokenLogprobs>> prompt_logprobs_;
  std::vector<std::vector<int32_t>> prompt_ids_;
  std::optional<ApiError> failure_;
};

// ---- OpenAI chat completions --------------------------------------------------------------
class ChatBuilder final : public BuilderBase {
 public:
  using BuilderBase::BuilderBase;

  std::string stream_start() override { return {}; }

  std::string on_event(size_t prompt, const RequestEvent& ev) override {
    if (ev.done) {
      note_done(prompt, ev);
      if (!spec_.stream) return {};
      std::string out;
      if (ev.rejected || (!ev.output.error.empty() && !streamed_any_)) {
        return sse(error_chunk(ev.output.error));
      }
      return out;
    }
    if (!spec_.stream) return {};
    size_t flat = 0;
    Choice& c = choice(prompt, ev.delta.index, &flat);
    c.tokens += static_cast<int64_t>(ev.delta.token_ids.size());
    std::string out;
    if (!c.role_sent) {
      c.role_sent = true;
      out += chunk(flat, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
    }
    const std::vector<ChatOutputEvent> events = parse_piece(c, ev.delta.text, ev.delta.finished);
    Json lp = ev.delta.logprobs.empty() || !spec_.logprobs ? Json(nullptr)
                                                           : chat_logprobs(ev.delta.logprobs);
    std::vector<Json> deltas;
    for (const ChatOutputEvent& e : events) {
      switch (e.type) {
        case ChatOutputEvent::Type::kReasoning:
          deltas.push_back({{"reasoning_content", e.text}});
          break;
        case ChatOutputEvent::Type::kContent:
          deltas.push_back({{"content", e.text}});
          break;
        case ChatOutputEvent::Type::kToolCallBegin: {
          const ToolCallState& call = c.calls.at(e.tool_index);
          deltas.push_back(
              {{"tool_calls",
                Json::array({{{"index", e.tool_index},
                              {"id", call.id},
                              {"type", "function"},
                              {"function", {{"name", call.name}, {"arguments", ""}}}}})}});
          break;
        }
        case ChatOutputEvent::Type::kToolCallArguments:
          deltas.push_back(
              {{"tool_calls",
                Json::array({{{"index", e.tool_index}, {"function", {{"arguments", e.text}}}}})}});
          break;
        case ChatOutputEvent::Type::kToolCallEnd:
          break;
      }
    }
    if (deltas.empty() && !lp.is_null()) deltas.push_back(Json::object());
    for (size_t i = 0; i < deltas.size(); ++i) {
      out += chunk(flat, deltas[i], i + 1 == deltas.size() ? lp : Json(nullptr), nullptr);
    }
    if (ev.delta.finished) {
      c.finish_reason = ev.delta.finish_reason;
      c.stop_reason = ev.delta.stop_reason;
      if (ev.delta.finish_reason == "error") {
        out += sse(error_chunk(ev.delta.error));
      } else if (ev.delta.finish_reason != "abort") {
        out += chunk(flat, Json::object(), nullptr, finish_json(c));
      }
    }
    if (!out.empty()) streamed_any_ = true;
    return out;
  }

  std::string finish() override {
    if (spec_.stream) {
      std::string out;
      if (spec_.include_usage) {
        Json j = header("chat.completion.chunk");
        j["choices"] = Json::array();
        j["usage"] = usage_json();
        out += sse(j);
      }
      return out + "data: [DONE]\n\n";
    }
    Json j = header("chat.completion");
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice& c = choices_[i];
      Json msg = {{"role", "assistant"}};
      msg["content"] = c.content.empty() && !c.calls.empty() ? Json(nullptr) : Json(c.content);
      msg["reasoning_content"] = c.reasoning.empty() ? Json(nullptr) : Json(c.reasoning);
      if (!c.calls.empty()) {
        Json calls = Json::array();
        for (const ToolCallState& t : c.calls) {
          calls.push_back({{"id", t.id},
                           {"type", "function"},
                           {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
        }
        msg["tool_calls"] = calls;
      } else {
        msg["tool_calls"] = Json::array();
      }
      choices.push_back({{"index", i},
                         {"message", msg},
                         {"logprobs", spec_.logprobs ? chat_logprobs(c.logprobs) : Json(nullptr)},
                         {"finish_reason", finish_json(c)},
                         {"stop_reason", c.stop_reason ? Json(*c.stop_reason) : Json(nullptr)}});
    }
    j["choices"] = choices;
    j["usage"] = usage_json();
    return dump(j);
  }

 private:
  Json header(const char* object) const {
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", spec_.model}};
  }
  Json finish_json(const Choice& c) const {
    if (c.finish_reason.empty()) return nullptr;
    if (c.finish_reason == "stop" && !c.calls.empty()) return "tool_calls";
    return c.finish_reason;
  }
  std::string chunk(size_t index, const Json& delta, const Json& logprobs, const Json& finish) {
    Json j = header("chat.completion.chunk");
    j["choices"] = Json::array(
        {{{"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}}});
    if (spec_.continuous_usage) j["usage"] = running_usage();
    return sse(j);
  }
  bool streamed_any_ = false;
};

// ---- OpenAI (legacy) completions ----------------------------------------------------------
class CompletionBuilder final : public BuilderBase {
 public:
  using BuilderBase::BuilderBase;

  std::string stream_start() override { return {}; }

  std::string on_event(size_t prompt, const RequestEvent& ev) override {
    if (ev.done) {
      note_done(prompt, ev);
      if (spec_.stream && (ev.rejected || !ev.output.error.empty())) {
        return sse(error_chunk(ev.output.error));
      }
      return {};
    }
    if (!spec_.stream) return {};
    size_t flat = 0;
    Choice& c = choice(prompt, ev.delta.index, &flat);
    std::string text = spec_.echo_only ? std::string() : ev.delta.text;
    if (spec_.echo && !c.role_sent) {  // role_sent: "echo sent" here
      c.role_sent = true;
      text = echo_text(prompt) + text;
    }
    c.tokens += static_cast<int64_t>(ev.delta.token_ids.size());
    std::string out;
    Json lp = nullptr;
    if (spec_.logprobs && !spec_.echo_only && !ev.delta.logprobs.empty()) {
      lp = completion_logprobs({}, ev.delta.logprobs, text_offset_[flat]);
    }
    text_offset_[flat] += static_cast<int64_t>(text.size());
    if (!text.empty() || !lp.is_null()) out += chunk(flat, text, lp, nullptr);
    if (ev.delta.finished) {
      if (ev.delta.finish_reason == "error") {
        out += sse(error_chunk(ev.delta.error));
      } else if (ev.delta.finish_reason != "abort") {
        out += chunk(flat, "", nullptr, finish_of(ev.delta.finish_reason));
      }
    }
    return out;
  }

  std::string finish() override {
    if (spec_.stream) {
      std::string out;
      if (spec_.include_usage) {
        Json j = header();
        j["choices"] = Json::array();
        j["usage"] = usage_json();
        out += sse(j);
      }
      return out + "data: [DONE]\n\n";
    }
    Json j = header();
    Json choices = Json::array();
    const size_t n = static_cast<size_t>(spec_.params.n);
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice& c = choices_[i];
      const size_t prompt = i / n;
      std::string text = spec_.echo_only ? std::string() : c.text;
      const std::string echo = spec_.echo ? echo_text(prompt) : std::string();
      Json lp = nullptr;
      if (spec_.logprobs) {
        std::vector<TokenLogprobs> gen;
        if (!spec_.echo_only) gen = c.logprobs;
        lp = completion_logprobs(spec_.echo ? prompt_part(prompt) : std::vector<PromptTok>{}, gen,
                                 0);
      }
      choices.push_back({{"index", i},
                         {"text", echo + text},
                         {"logprobs", lp},
                         {"finish_reason", finish_of(c.finish_reason)},
                         {"stop_reason", c.stop_reason ? Json(*c.stop_reason) : Json(nullptr)}});
    }
    j["choices"] = choices;
    j["usage"] = usage_json();
    return dump(j);
  }

 private:
  struct PromptTok {
    int32_t id;
    const TokenLogprobs* lp;  // null for the first token
  };
  Json header() const {
    return {
        {"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", spec_.model}};
  }
  Json finish_of(const std::string& reason) const {
    if (reason.empty()) return nullptr;
    if (spec_.echo_only) return "length";
    return reason;
  }
  std::string echo_text(size_t prompt) const {
    const PromptInput& p = spec_.prompts.at(prompt);
    if (!p.text.empty()) return p.text;
    return ctx_.loop->decode(p.ids);
  }
  std::vector<PromptTok> prompt_part(size_t prompt) const {
    std::vector<PromptTok> out;
    const std::vector<int32_t>& ids = prompt < prompt_ids_.size() && !prompt_ids_[prompt].empty()
                                          ? prompt_ids_[prompt]
                                          : spec_.prompts[prompt].ids;
    const std::vector<TokenLogprobs>* lps =
        prompt < prompt_logprobs_.size() ? &prompt_logprobs_[prompt] : nullptr;
    for (size_t i = 0; i < ids.size(); ++i) {
      const TokenLogprobs* lp =
          i > 0 && lps != nullptr && i - 1 < lps->size() ? &(*lps)[i - 1] : nullptr;
      out.push_back({ids[i], lp});
    }
    return out;
  }
  // {"tokens", "token_logprobs", "top_logprobs", "text_offset"} over prompt tokens (echo) then
  // generated tokens.
  Json completion_logprobs(const std::vector<PromptTok>& prompt,
                           const std::vector<TokenLogprobs>& gen, int64_t offset) const {
    Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
    auto add = [&](int32_t id, const TokenLogprobs* lp) {
      const std::string t = ctx_.loop->token_text(id);
      tokens.push_back(t);
      offsets.push_back(offset);
      offset += static_cast<int64_t>(t.size());
      if (lp == nullptr) {
        lps.push_back(nullptr);
        tops.push_back(nullptr);
        return;
      }
      lps.push_back(lp->logprob);
      Json top = Json::object();
      for (const auto& [tid, l] : lp->top) top[ctx_.loop->token_text(tid)] = l;
      top[t] = lp->logprob;  // the chosen token is always listed (OpenAI, vLLM)
      tops.push_back(top);
    };
    for (const PromptTok& p : prompt) add(p.id, p.lp);
    for (const TokenLogprobs& lp : gen) add(lp.token, &lp);
    return {{"tokens", tokens},
            {"token_logprobs", lps},
            {"top_logprobs", tops},
            {"text_offset", offsets}};
  }
  std::string chunk(size_t index, const std::string& text, const Json& lp, const Json& finish) {
    Json j = header();
    j["choices"] = Json::array(
        {{{"index", index}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish}}});
    if (spec_.continuous_usage) j["usage"] = running_usage();
    return sse(j);
  }
  std::unordered_map<size_t, int64_t> text_offset_;
};

// ---- Anthropic messages -------------------------------------------------------------------
class MessagesBuilder final : public BuilderBase {
 public:
  using BuilderBase::BuilderBase;

  std::string stream_start() override {
    int64_t prompt = 0;
    for (const PromptInput& p : spec_.prompts) prompt += static_cast<int64_t>(p.ids.size());
    Json msg = {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", spec_.model},
                {"content", Json::array()},
                {"stop_reason", nullptr},
                {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", prompt}, {"output_tokens", 0}}}};
    return sse_event("message_start", {{"type", "message_start"}, {"message", msg}}) +
           sse_event("ping", {{"type", "ping"}});
  }

  std::string on_event(size_t prompt, const RequestEvent& ev) override {
    if (ev.done) {
      note_done(prompt, ev);
      if (spec_.stream && (ev.rejected || !ev.output.error.empty())) {
        return sse_event(
            "error",
            {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", ev.output.error}}}});
      }
      return {};
    }
    if (!spec_.stream) return {};
    size_t flat = 0;
    Choice& c = choice(prompt, ev.delta.index, &flat);
    c.tokens += static_cast<int64_t>(ev.delta.token_ids.size());
    std::string out;
    for (const ChatOutputEvent& e : parse_piece(c, ev.delta.text, ev.delta.finished)) {
      switch (e.type) {
        case ChatOutputEvent::Type::kReasoning:
          out += open_block("thinking", {{"type", "thinking"}, {"thinking", ""}});
          out += delta({{"type", "thinking_delta"}, {"thinking", e.text}});
          break;
        case ChatOutputEvent::Type::kContent:
          out += open_block("text", {{"type", "text"}, {"text", ""}});
          out += delta({{"type", "text_delta"}, {"text", e.text}});
          break;
        case ChatOutputEvent::Type::kToolCallBegin: {
          const ToolCallState& call = c.calls.at(e.tool_index);
          out += close_block();
          out += open_block("tool_use", {{"type", "tool_use"},
                                         {"id", "toolu_" + call.id.substr(5)},
                                         {"name", call.name},
                                         {"input", Json::object()}});
          break;
        }
        case ChatOutputEvent::Type::kToolCallArguments:
          out += delta({{"type", "input_json_delta"}, {"partial_json", e.text}});
          break;
        case ChatOutputEvent::Type::kToolCallEnd:
          out += close_block();
          break;
      }
    }
    if (ev.delta.finished) {
      c.finish_reason = ev.delta.finish_reason;
      out += close_block();
    }
    return out;
  }

  std::string finish() override {
    const Choice& c = choices_.at(0);
    const Json usage = {
        {"input_tokens", usage_json()["prompt_tokens"]},
        {"output_tokens", usage_json()["completion_tokens"]},
        {"cache_read_input_tokens", usage_json()["prompt_tokens_details"]["cached_tokens"]}};
    if (spec_.stream) {
      return sse_event("message_delta",
                       {{"type", "message_delta"},
                        {"delta", {{"stop_reason", stop_reason(c)}, {"stop_sequence", nullptr}}},
                        {"usage", {{"output_tokens", usage["output_tokens"]}}}}) +
             sse_event("message_stop", {{"type", "message_stop"}});
    }
    Json content = Json::array();
    if (!c.reasoning.empty()) {
      content.push_back({{"type", "thinking"}, {"thinking", c.reasoning}, {"signature", ""}});
    }
    if (!c.content.empty()) content.push_back({{"type", "text"}, {"text", c.content}});
    for (const ToolCallState& t : c.calls) {
      Json input = Json::parse(t.arguments, nullptr, false);
      if (input.is_discarded()) input = Json::object();
      content.push_back({{"type", "tool_use"},
                         {"id", "toolu_" + t.id.substr(5)},
                         {"name", t.name},
                         {"input", input}});
    }
    return dump({{"id", id_},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", spec_.model},
                 {"content", content},
                 {"stop_reason", stop_reason(c)},
                 {"stop_sequence", nullptr},
                 {"usage", usage}});
  }

 private:
  Json stop_reason(const Choice& c) const {
    if (c.finish_reason == "length") return "max_tokens";
    if (!c.calls.empty()) return "tool_use";
    if (c.finish_reason == "stop" && c.parser && !c.parser->ended() &&
        !spec_.stop_sequences.empty() && !spec_.params.structured) {
      return "stop_sequence";
    }
    return "end_turn";
  }
  std::string open_block(const char* kind, const Json& block) {
    if (open_ == kind) return {};
    std::string out = close_block();
    open_ = kind;
    out +=
        sse_event("content_block_start",
                  {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
    return out;
  }
  std::string delta(const Json& d) {
    return sse_event("content_block_delta",
                     {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  }
  std::string close_block() {
    if (open_.empty()) return {};
    std::string out =
        sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_.clear();
    ++index_;
    return out;
  }
  std::string open_;
  int index_ = 0;
};

}  // namespace

std::unique_ptr<ResponseBuilder> make_response_builder(const GenerationSpec& spec,
                                                       const ApiContext& ctx,
                                                       const std::string& request_id) {
  switch (spec.kind) {
    case ApiKind::kChat:
      return std::make_unique<ChatBuilder>(spec, ctx, request_id);
    case ApiKind::kCompletion:
      return std::make_unique<CompletionBuilder>(spec, ctx, request_id);
    case ApiKind::kMessages:
      return std::make_unique<MessagesBuilder>(spec, ctx, request_id);
  }
  return nullptr;
}

std::string openai_error_body(const ApiError& e) {
  return dump({{"error",
                {{"message", e.what()},
                 {"type", e.type},
                 {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
                 {"code", e.code.empty() ? Json(e.status) : Json(e.code)}}}});
}

std::string anthropic_error_body(const ApiError& e) {
  std::string type = e.type;
  if (e.status == 401) type = "authentication_error";
  if (e.status == 404) type = "not_found_error";
  if (e.status == 429 || e.status == 503) type = "overloaded_error";
  if (e.status >= 500 && e.status != 503) type = "api_error";
  return dump({{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}});
}

}  // namespace deepinfer::server
