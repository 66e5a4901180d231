// The OpenAI and Anthropic request shapes, turned into what the engine runs (request_parse.cc),
// and the engine's events turned back into those APIs' responses and SSE streams
// (responses.cc). No networking here: tests/unit/server drives these functions directly.
//
// Parsing is strict where a client would be misled by leniency: a known field of the wrong
// type, an out-of-range value, an unknown model or an unsupported option is an ApiError with
// the OpenAI error shape and status; unknown extra fields are ignored (clients send vendor
// extensions), as OpenAI and vLLM do. A request is fully parsed, tokenized and validated
// before anything reaches the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "deepinfer/chat.h"
#include "deepinfer/engine_loop.h"

namespace deepinfer::server {

// An error answered to the client: HTTP status + {"error": {"message", "type", "param",
// "code"}} (Anthropic endpoints: {"type": "error", "error": {"type", "message"}}).
struct ApiError : std::runtime_error {
  ApiError(int status_, std::string type_, const std::string& message, std::string param_ = {},
           std::string code_ = {})
      : std::runtime_error(message),
        status(status_),
        type(std::move(type_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
  int status;
  std::string type;
  std::string param;
  std::string code;
};
ApiError bad_request(const std::string& message, const std::string& param = {});

enum class ApiKind { kChat, kCompletion, kMessages };

// What the parser needs from the server (all thread-safe).
struct ApiContext {
  const EngineLoop* loop = nullptr;
  std::vector<std::string> model_names;  // served names; the first is reported
  std::string effort_profile = "preview";
  int64_t default_max_tokens = 0;  // 0: up to the context limit (chat), 16 (completions)
};

struct PromptInput {
  std::vector<int32_t> ids;
  std::string text;  // the text prompt (completions echo it); empty for token prompts
};

// One API request as the engine will run it: one engine request per prompt, n samples each.
struct GenerationSpec {
  ApiKind kind = ApiKind::kChat;
  std::string model;
  std::vector<PromptInput> prompts;
  SamplingParams params;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats (vLLM)
  // Chat / messages: how to read the output.
  bool thinking = false;      // the prompt ends inside <think>: output starts as reasoning
  bool parse_output = false;  // chat format output parser (reasoning, content, tool calls)
  bool tools_given = false;
  // logprobs: chat: logprobs=true + top_logprobs; completions: logprobs=N.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Completions.
  bool echo = false;
  bool echo_only = false;  // max_tokens 0 with echo: the generated token is dropped
  std::vector<std::string> stop_sequences;  // messages: to report stop_sequence
};

GenerationSpec parse_chat_request(const std::string& body, const ApiContext& ctx);
GenerationSpec parse_completion_request(const std::string& body, const ApiContext& ctx);
GenerationSpec parse_messages_request(const std::string& body, const ApiContext& ctx);

// The forced tool call of tool_choice "required" / a named function, as a GBNF grammar over
// the DSML format (tool_grammar.cc): one call of one of `tools_json`'s functions (or of
// `only`), with the schema's required parameters in order.
std::string forced_tool_call_grammar(const std::string& tools_json, const std::string& only);

// Builds the response of one GenerationSpec from the engine's events. Streaming: on_event
// returns the SSE text to send now; non-streaming: it accumulates and finish() returns the
// JSON body. Not thread-safe (one per HTTP request, driven on the connection's strand).
class ResponseBuilder {
 public:
  virtual ~ResponseBuilder() = default;
  // SSE text to send right after the response headers (Anthropic's message_start).
  virtual std::string stream_start() = 0;
  // prompt_index: which of the spec's prompts the event belongs to.
  virtual std::string on_event(size_t prompt_index, const RequestEvent& ev) = 0;
  // Every prompt's final event was given: the trailing SSE text ([DONE], usage), or the body.
  virtual std::string finish() = 0;
  // Non-streaming: the engine failed a request (an "error" finish); finish() is not called.
  virtual std::optional<ApiError> failure() const = 0;
};

std::unique_ptr<ResponseBuilder> make_response_builder(const GenerationSpec& spec,
                                                       const ApiContext& ctx,
                                                       const std::string& request_id);

// Error bodies.
std::string openai_error_body(const ApiError& e);
std::string anthropic_error_body(const ApiError& e);

}  // namespace deepinfer::server
