// OpenAI chat / completions and Anthropic messages requests -> GenerationSpec (api.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "api.h"
#include "deepinfer/input_limits.h"
#include "json_util.h"
#include "request_limits.h"

namespace deepinfer::server {

ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, param);
}

namespace {

// `file`: where limit_name is defined (the server's own limits by default; the sampling
// parameters' in the public header).
[[noreturn]] void over_limit(const std::string& found, uint64_t limit, const char* limit_name,
                             const char* fix, const std::string& param,
                             const char* file = "tools/server/request_limits.h") {
  throw bad_request(limit_message(found, limit, std::string(limit_name) + " in " + file, fix),
                    param);
}

Json parse_body(const std::string& body) {
  if (const size_t depth = json_nesting_depth(body); depth > kMaxRequestJsonDepth) {
    over_limit("the request body's JSON nesting depth " + format_count(depth), kMaxRequestJsonDepth,
               "kMaxRequestJsonDepth", "nest the request less deeply", "");
  }
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw bad_request("the request body is not valid JSON (expected a JSON object)");
  }
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  return j;
}

const Json* field(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> get_number(const Json& j, const char* key) {
  const Json* v = field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw bad_request(std::string("'") + key + "' must be a number", key);
  const double x = v->get<double>();
  if (!std::isfinite(x)) throw bad_request(std::string("'") + key + "' must be finite", key);
  return x;
}

std::optional<int64_t> get_int(const Json& j, const char* key) {
  const Json* v = field(j, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    const double x = v->get<double>();
    if (std::floor(x) == x && std::fabs(x) < 9e15) return static_cast<int64_t>(x);
  }
  throw bad_request(std::string("'") + key + "' must be an integer", key);
}

std::optional<bool> get_bool(const Json& j, const char* key) {
  const Json* v = field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) throw bad_request(std::string("'") + key + "' must be a boolean", key);
  return v->get<bool>();
}

std::optional<std::string> get_string(const Json& j, const char* key) {
  const Json* v = field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) throw bad_request(std::string("'") + key + "' must be a string", key);
  return v->get<std::string>();
}

int32_t to_i32(int64_t v, const char* key, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    throw bad_request(std::string("'") + key + "' = " + std::to_string(v) + " is out of range [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]",
                      key);
  }
  return static_cast<int32_t>(v);
}

// to_i32 over [lo, limit], with the limit's own message above it.
int32_t to_i32_limited(int64_t v, const char* key, int64_t lo, int64_t limit,
                       const char* limit_name, const char* fix) {
  if (v > limit) {
    over_limit(std::string("'") + key + "' = " + std::to_string(v), static_cast<uint64_t>(limit),
               limit_name, fix, key);
  }
  return to_i32(v, key, lo, limit);
}

std::string check_model(const Json& j, const ApiContext& ctx, bool required) {
  const std::optional<std::string> model = get_string(j, "model");
  if (!model) {
    if (required) throw bad_request("'model' is required", "model");
    return ctx.model_names.front();
  }
  if (std::find(ctx.model_names.begin(), ctx.model_names.end(), *model) == ctx.model_names.end()) {
    throw ApiError(404, "not_found_error",
                   "The model '" + *model + "' does not exist; this server serves '" +
                       ctx.model_names.front() + "' (GET /v1/models lists it)",
                   "model", "model_not_found");
  }
  return *model;
}

std::vector<std::string> get_stop(const Json& j, const char* key) {
  const Json* v = field(j, key);
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const Json& s : *v) {
      if (!s.is_string()) throw bad_request(std::string("'") + key + "' must hold strings", key);
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad_request(std::string("'") + key + "' must be a string or an array of strings", key);
  }
  if (out.size() > kMaxStopStrings) {
    over_limit(format_count(out.size()) + " stop strings in '" + key + "'", kMaxStopStrings,
               "kMaxStopStrings", "pass fewer stop strings", key);
  }
  for (const std::string& s : out) {
    if (s.empty()) throw bad_request(std::string("'") + key + "' must not hold empty strings", key);
    if (s.size() > kMaxStopStringBytes) {
      over_limit("a stop string of " + format_count(s.size()) + " bytes in '" + key + "'",
                 kMaxStopStringBytes, "kMaxStopStringBytes", "shorten the stop string", key);
    }
  }
  return out;
}

// OpenAI's logit_bias: an object from token ids (as JSON keys: decimal strings) to biases
// (numbers; their range is SamplingParams::validate's).
std::map<int32_t, float> get_logit_bias(const Json& lb) {
  if (!lb.is_object()) {
    throw bad_request("'logit_bias' must be an object from token ids to biases, e.g. {\"50256\": -100}",
                      "logit_bias");
  }
  if (lb.size() > SamplingParams::kMaxLogitBias) {
    over_limit(format_count(lb.size()) + " entries in 'logit_bias'", SamplingParams::kMaxLogitBias,
               "SamplingParams::kMaxLogitBias", "bias fewer tokens", "logit_bias",
               "include/deepinfer/sampling_params.h");
  }
  std::map<int32_t, float> out;
  for (const auto& [key, value] : lb.items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int64_t id = digits ? std::stoll(key) : -1;
    if (!digits || id > std::numeric_limits<int32_t>::max()) {
      throw bad_request("'logit_bias' key '" + key.substr(0, 32) + "' is not a token id (a decimal "
                        "integer in [0, 2^31))", "logit_bias");
    }
    if (!value.is_number()) {
      throw bad_request("'logit_bias' value for token " + key + " must be a number", "logit_bias");
    }
    out[static_cast<int32_t>(id)] = static_cast<float>(value.get<double>());
  }
  return out;
}

// An array of token ids (JSON integers in [0, 2^31)) under `key`, at most `limit` of them
// (`limit_name` in `file`; `noun` names them in that error). An id past int32 is refused, not
// wrapped.
std::vector<int32_t> get_token_ids(const Json& j, const char* key, const char* noun, size_t limit,
                                   const char* limit_name, const char* file) {
  const Json* ids = field(j, key);
  std::vector<int32_t> out;
  if (ids == nullptr) return out;
  const std::string what = std::string("'") + key + "' must be an array of token ids (integers in [0, 2^31))";
  if (!ids->is_array()) throw bad_request(what, key);
  if (ids->size() > limit) {
    over_limit(format_count(ids->size()) + " " + noun, limit, limit_name,
               "pass fewer token ids", key, file);
  }
  for (const Json& t : *ids) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      throw bad_request(what, key);
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

// The sampling fields shared by chat and completions (OpenAI names plus vLLM's extensions).
void parse_sampling(const Json& j, GenerationSpec& spec) {
  SamplingParams& p = spec.params;
  p.temperature = 1.0f;
  p.top_k = 0;
  if (auto v = get_number(j, "temperature")) p.temperature = static_cast<float>(*v);
  if (auto v = get_number(j, "top_p")) p.top_p = static_cast<float>(*v);
  if (auto v = get_int(j, "top_k")) p.top_k = to_i32(*v, "top_k", -1, 1 << 30);
  if (auto v = get_number(j, "min_p")) p.min_p = static_cast<float>(*v);
  if (auto v = get_number(j, "presence_penalty")) p.presence_penalty = static_cast<float>(*v);
  if (auto v = get_number(j, "frequency_penalty")) p.frequency_penalty = static_cast<float>(*v);
  if (auto v = get_number(j, "repetition_penalty")) p.repetition_penalty = static_cast<float>(*v);
  if (auto v = get_int(j, "n")) {
    p.n = to_i32_limited(*v, "n", 1, kMaxN, "kMaxN", "send several requests instead");
  }
  if (auto v = get_int(j, "seed")) p.seq_seed = static_cast<uint64_t>(*v);
  if (auto v = get_int(j, "seq_seed")) p.seq_seed = static_cast<uint64_t>(*v);
  if (auto v = get_bool(j, "ignore_eos")) p.ignore_eos = *v;
  if (auto v = get_int(j, "min_tokens")) p.min_tokens = to_i32(*v, "min_tokens", 0, 1 << 30);
  if (auto v = get_bool(j, "include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  if (auto v = get_bool(j, "skip_special_tokens")) p.skip_special_tokens = *v;
  if (auto v = get_int(j, "truncate_prompt_tokens")) {
    p.truncate_prompt_tokens = to_i32(*v, "truncate_prompt_tokens", 1, 1 << 30);
  }
  p.stop = get_stop(j, "stop");
  p.stop_token_ids = get_token_ids(j, "stop_token_ids", "stop token ids", kMaxStopTokenIds,
                                   "kMaxStopTokenIds", "tools/server/request_limits.h");
  p.allowed_token_ids =  // vLLM's extension
      get_token_ids(j, "allowed_token_ids", "allowed token ids",
                    SamplingParams::kMaxAllowedTokenIds, "SamplingParams::kMaxAllowedTokenIds",
                    "include/deepinfer/sampling_params.h");
  if (const Json* lb = field(j, "logit_bias")) p.logit_bias = get_logit_bias(*lb);
  if (auto v = get_bool(j, "stream")) spec.stream = *v;
  if (const Json* so = field(j, "stream_options")) {
    if (!so->is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
    if (!spec.stream) {
      throw bad_request("'stream_options' is only allowed with 'stream': true", "stream_options");
    }
    if (auto v = get_bool(*so, "include_usage")) spec.include_usage = *v;
    if (auto v = get_bool(*so, "continuous_usage_stats")) spec.continuous_usage = *v;
  }
}

int64_t get_max_tokens(const Json& j, const char* key) {
  const std::optional<int64_t> v = get_int(j, key);
  if (!v) return -1;
  if (*v < 0) throw bad_request(std::string("'") + key + "' must be at least 1", key);
  return *v;
}

// Structured outputs: response_format, DeepInfer's so_args, vLLM's guided_* fields.
void parse_structured(const Json& j, GenerationSpec& spec) {
  std::vector<SamplingParams::StructuredOutput> found;
  std::string param;
  if (const Json* rf = field(j, "response_format")) {
    if (!rf->is_object())
      throw bad_request("'response_format' must be an object", "response_format");
    const std::string type = get_string(*rf, "type").value_or("");
    if (type == "json_object") {
      found.push_back({"json", R"({"type": "object"})"});
    } else if (type == "json_schema") {
      const Json* js = field(*rf, "json_schema");
      const Json* schema = js != nullptr && js->is_object() ? field(*js, "schema") : nullptr;
      if (schema == nullptr) {
        throw bad_request("'response_format.json_schema.schema' is required for type json_schema",
                          "response_format");
      }
      found.push_back({"json", schema->is_string() ? schema->get<std::string>() : dump(*schema)});
    } else if (type != "text") {
      throw bad_request(
          "'response_format.type' must be text, json_object or json_schema, got '" + type + "'",
          "response_format");
    }
    param = "response_format";
  }
  if (const Json* so = field(j, "so_args")) {
    if (!so->is_object() || !so->contains("schema_type") || !so->contains("schema") ||
        !(*so)["schema_type"].is_string()) {
      throw bad_request("'so_args' must be {\"schema_type\": ..., \"schema\": ...}", "so_args");
    }
    const Json& schema = (*so)["schema"];
    found.push_back({(*so)["schema_type"].get<std::string>(),
                     schema.is_string() ? schema.get<std::string>() : dump(schema)});
    param = "so_args";
  }
  if (const Json* g = field(j, "guided_json")) {
    found.push_back({"json", g->is_string() ? g->get<std::string>() : dump(*g)});
    param = "guided_json";
  }
  if (auto g = get_string(j, "guided_regex")) {
    found.push_back({"regex", *g});
    param = "guided_regex";
  }
  if (auto g = get_string(j, "guided_grammar")) {
    found.push_back({"ebnf", *g});
    param = "guided_grammar";
  }
  if (found.size() > 1) {
    throw bad_request(
        "give one of response_format, so_args, guided_json, guided_regex and "
        "guided_grammar",
        param);
  }
  if (!found.empty()) spec.params.structured = found.front();
}

void check_prompt_length(const GenerationSpec& spec, const ApiContext& ctx, const char* param) {
  const int64_t limit = ctx.loop->max_model_len();
  for (const PromptInput& p : spec.prompts) {
    const int64_t n = static_cast<int64_t>(p.ids.size());
    const int64_t kept = spec.params.truncate_prompt_tokens
                             ? std::min<int64_t>(n, *spec.params.truncate_prompt_tokens)
                             : n;
    if (kept == 0) throw bad_request("the prompt is empty", param);
    const int64_t want = spec.params.max_tokens ? *spec.params.max_tokens : 1;
    if (kept + want > limit) {
      throw ApiError(400, "invalid_request_error",
                     "This model's maximum context length is " + std::to_string(limit) +
                         " tokens. However, you requested " + std::to_string(kept + want) +
                         " tokens (" + std::to_string(kept) + " in the " + param + ", " +
                         std::to_string(want) +
                         " in the completion). Please reduce the length of the " + param +
                         " or the completion.",
                     param, "context_length_exceeded");
    }
    const int64_t vocab = ctx.loop->vocab_size();
    for (int32_t id : p.ids) {
      if (id < 0 || id >= vocab) {
        throw bad_request("prompt token id " + std::to_string(id) +
                              " is outside the model's vocabulary [0, " + std::to_string(vocab) +
                              ")",
                          param);
      }
    }
  }
}

void check_sampling(const GenerationSpec& spec) {
  const Status st = spec.params.validate();
  if (!st.ok()) {
    // "sampling parameter NAME = ..." -> param NAME.
    std::string param;
    const std::string& m = st.message();
    const std::string prefix = "sampling parameter ";
    if (m.rfind(prefix, 0) == 0)
      param = m.substr(prefix.size(), m.find(' ', prefix.size()) - prefix.size());
    if (param == "seq_seed") param = "seed";
    throw bad_request(m, param);
  }
}

// Thinking from chat_template_kwargs ({"thinking": b} or {"enable_thinking": b}) and
// reasoning_effort; "none"/"minimal" turn thinking off, other efforts turn it on.
void parse_thinking(const Json& j, GenerationSpec& spec, ChatRenderOptions& ro) {
  std::optional<bool> thinking;
  std::string effort;
  if (const Json* kw = field(j, "chat_template_kwargs")) {
    if (!kw->is_object()) {
      throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    }
    if (auto v = get_bool(*kw, "thinking")) thinking = *v;
    if (auto v = get_bool(*kw, "enable_thinking")) thinking = *v;
    if (auto v = get_string(*kw, "reasoning_effort")) effort = *v;
  }
  if (auto v = get_string(j, "reasoning_effort")) effort = *v;
  if (!effort.empty()) {
    if (effort == "none" || effort == "minimal") {
      if (!thinking) thinking = false;
      effort.clear();
    } else if (effort == "low" || effort == "medium") {
      if (!thinking) thinking = true;
      effort = ro.effort_profile == "0731" && effort == "low" ? "low" : "";
    } else if (effort == "high" || effort == "max") {
      if (!thinking) thinking = true;
    } else {
      throw bad_request(
          "'reasoning_effort' must be none, minimal, low, medium, high or max, got '" + effort +
              "'",
          "reasoning_effort");
    }
  }
  ro.thinking = thinking.value_or(false);
  ro.reasoning_effort = ro.thinking ? effort : "";
  spec.thinking = ro.thinking;
}

// tool_choice: "none" (tools not offered), "auto" (default), "required" or a named function
// (a grammar forces one call).
void apply_tool_choice(const Json& j, const Json* tools, GenerationSpec& spec, Json& render_tools) {
  std::string mode = tools != nullptr ? "auto" : "none";
  std::string only;
  if (const Json* tc = field(j, "tool_choice")) {
    if (tc->is_string()) {
      mode = tc->get<std::string>();
      if (mode != "none" && mode != "auto" && mode != "required") {
        throw bad_request("'tool_choice' must be none, auto, required or a function",
                          "tool_choice");
      }
    } else if (tc->is_object()) {
      const Json* fn = field(*tc, "function");
      const std::optional<std::string> name =
          fn != nullptr && fn->is_object() ? get_string(*fn, "name") : get_string(*tc, "name");
      if (!name) throw bad_request("'tool_choice.function.name' is required", "tool_choice");
      mode = "named";
      only = *name;
    } else {
      throw bad_request("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  if (mode != "none" && tools == nullptr) {
    throw bad_request("'tool_choice' needs 'tools'", "tool_choice");
  }
  if (tools != nullptr && mode != "none") {
    render_tools = *tools;
    spec.tools_given = true;
  }
  if (mode == "required" || mode == "named") {
    if (spec.params.structured) {
      throw bad_request(
          "a forced tool call (tool_choice " + mode + ") cannot be combined with response_format",
          "tool_choice");
    }
    if (!only.empty()) {
      bool found = false;
      for (const Json& t : *tools) {
        const Json* fn = t.is_object() ? field(t, "function") : nullptr;
        if (fn != nullptr && fn->is_object() && fn->value("name", "") == only) found = true;
      }
      if (!found)
        throw bad_request("tool_choice names '" + only + "', which is not in 'tools'",
                          "tool_choice");
    }
    spec.params.structured =
        SamplingParams::StructuredOutput{"ebnf", forced_tool_call_grammar(dump(*tools), only)};
  }
}

void render_chat(GenerationSpec& spec, const ApiContext& ctx, const Json& messages,
                 const Json& tools, const ChatRenderOptions& ro) {
  auto prompt = render_chat_prompt(dump(messages), tools.is_null() ? "" : dump(tools), ro);
  if (!prompt.ok()) throw bad_request(prompt.status().message(), "messages");
  PromptInput in;
  in.ids = ctx.loop->encode(*prompt);
  spec.prompts.push_back(std::move(in));
}

}  // namespace

GenerationSpec parse_chat_request(const std::string& body, const ApiContext& ctx) {
  const Json j = parse_body(body);
  GenerationSpec spec;
  spec.kind = ApiKind::kChat;
  spec.model = check_model(j, ctx, /*required=*/false);
  const Json* messages = field(j, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    throw bad_request("'messages' must be a non-empty array of messages", "messages");
  }
  parse_sampling(j, spec);
  int64_t max_tokens = get_max_tokens(j, "max_completion_tokens");
  if (max_tokens < 0) max_tokens = get_max_tokens(j, "max_tokens");
  if (max_tokens == 0) throw bad_request("'max_tokens' must be at least 1", "max_tokens");
  if (max_tokens < 0 && ctx.default_max_tokens > 0) max_tokens = ctx.default_max_tokens;
  spec.params.max_tokens =
      max_tokens > 0 ? std::optional<int32_t>(to_i32(max_tokens, "max_tokens", 1, 1 << 30))
                     : std::nullopt;
  spec.logprobs = get_bool(j, "logprobs").value_or(false);
  if (auto v = get_int(j, "top_logprobs")) {
    spec.top_logprobs = to_i32_limited(*v, "top_logprobs", 0, kMaxLogprobs, "kMaxLogprobs",
                                       "ask for fewer alternatives");
    if (!spec.logprobs && spec.top_logprobs > 0) {
      throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
  }
  if (spec.logprobs) spec.params.logprobs = spec.top_logprobs;
  parse_structured(j, spec);

  ChatRenderOptions ro;
  ro.effort_profile = ctx.effort_profile;
  parse_thinking(j, spec, ro);
  if (auto v = get_bool(j, "add_generation_prompt")) ro.add_generation_prompt = *v;
  if (auto v = get_bool(j, "continue_final_message")) ro.continue_final_message = *v;
  const Json* tools = field(j, "tools");
  if (tools != nullptr && (!tools->is_array()))
    throw bad_request("'tools' must be an array", "tools");
  if (tools != nullptr && tools->empty()) tools = nullptr;
  Json render_tools;
  apply_tool_choice(j, tools, spec, render_tools);
  // With a grammar the output is constrained from its first token: no reasoning comes first.
  spec.parse_output = true;
  if (spec.params.structured && !spec.tools_given) spec.thinking = ro.thinking = false;
  render_chat(spec, ctx, *messages, render_tools, ro);
  check_sampling(spec);
  check_prompt_length(spec, ctx, "messages");
  return spec;
}

GenerationSpec parse_completion_request(const std::string& body, const ApiContext& ctx) {
  const Json j = parse_body(body);
  GenerationSpec spec;
  spec.kind = ApiKind::kCompletion;
  spec.model = check_model(j, ctx, /*required=*/false);
  parse_sampling(j, spec);
  const Json* prompt = field(j, "prompt");
  if (prompt == nullptr) throw bad_request("'prompt' is required", "prompt");
  auto add_ids = [&](const Json& arr) {
    PromptInput in;
    for (const Json& t : arr) {
      if (!t.is_number_integer()) throw bad_request("token prompts must hold integers", "prompt");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
        throw bad_request("prompt token id " + std::to_string(id) + " is out of range", "prompt");
      }
      in.ids.push_back(static_cast<int32_t>(id));
    }
    spec.prompts.push_back(std::move(in));
  };
  auto add_text = [&](const std::string& text) {
    PromptInput in;
    in.text = text;
    in.ids = ctx.loop->encode(text);
    spec.prompts.push_back(std::move(in));
  };
  if (prompt->is_string()) {
    add_text(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    add_ids(*prompt);
  } else if (prompt->is_array() && !prompt->empty()) {
    if (!(*prompt)[0].is_number_integer() && prompt->size() > kMaxPrompts) {
      over_limit(format_count(prompt->size()) + " prompts", kMaxPrompts, "kMaxPrompts",
                 "send several requests instead", "prompt");
    }
    for (const Json& p : *prompt) {
      if (p.is_string()) {
        add_text(p.get<std::string>());
      } else if (p.is_array()) {
        add_ids(p);
      } else {
        throw bad_request(
            "'prompt' must be a string, an array of strings, an array of token "
            "ids or an array of such arrays",
            "prompt");
      }
    }
  } else {
    throw bad_request("'prompt' must be a non-empty string, array of strings or token ids",
                      "prompt");
  }
  if (spec.prompts.size() > kMaxPrompts) {
    over_limit(format_count(spec.prompts.size()) + " prompts", kMaxPrompts, "kMaxPrompts",
               "send several requests instead", "prompt");
  }
  if (auto s = get_string(j, "suffix"); s && !s->empty()) {
    throw bad_request("'suffix' is not supported by this model", "suffix");
  }
  if (auto b = get_int(j, "best_of"); b && *b != spec.params.n) {
    throw bad_request("'best_of' other than n is not supported", "best_of");
  }
  spec.echo = get_bool(j, "echo").value_or(false);
  int64_t max_tokens = get_max_tokens(j, "max_tokens");
  if (max_tokens < 0) max_tokens = ctx.default_max_tokens > 0 ? ctx.default_max_tokens : 16;
  if (max_tokens == 0) {
    if (!spec.echo)
      throw bad_request("'max_tokens' must be at least 1 (or 0 with echo)", "max_tokens");
    spec.echo_only = true;  // scoring: the prompt's logprobs, no completion
    max_tokens = 1;
  }
  spec.params.max_tokens = to_i32(max_tokens, "max_tokens", 1, 1 << 30);
  if (auto v = get_int(j, "logprobs")) {
    spec.logprobs = true;
    spec.top_logprobs = to_i32_limited(*v, "logprobs", 0, kMaxLogprobs, "kMaxLogprobs",
                                       "ask for fewer alternatives");
    spec.params.logprobs = spec.top_logprobs;
  }
  if (spec.echo && spec.logprobs) spec.params.prompt_logprobs = spec.top_logprobs;
  if (auto v = get_int(j, "prompt_logprobs")) {
    spec.params.prompt_logprobs = to_i32_limited(*v, "prompt_logprobs", 0, kMaxLogprobs,
                                                 "kMaxLogprobs", "ask for fewer alternatives");
  }
  parse_structured(j, spec);
  check_sampling(spec);
  check_prompt_length(spec, ctx, "prompt");
  return spec;
}

namespace {

// Anthropic content (a string or blocks) -> OpenAI text.
std::string anthropic_text(const Json& content, const char* where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw bad_request(std::string(where) + ": content must be a string or blocks");
  std::string out;
  for (const Json& b : content) {
    if (b.is_object() && b.value("type", "") == "text" && b.contains("text") &&
        b["text"].is_string()) {
      out += b["text"].get<std::string>();
    }
  }
  return out;
}

}  // namespace

GenerationSpec parse_messages_request(const std::string& body, const ApiContext& ctx) {
  const Json j = parse_body(body);
  GenerationSpec spec;
  spec.kind = ApiKind::kMessages;
  spec.parse_output = true;
  spec.model = check_model(j, ctx, /*required=*/false);
  const std::optional<int64_t> max_tokens = get_int(j, "max_tokens");
  if (!max_tokens) throw bad_request("'max_tokens' is required", "max_tokens");
  spec.params.max_tokens = to_i32(*max_tokens, "max_tokens", 1, 1 << 30);
  spec.params.temperature = 1.0f;
  if (auto v = get_number(j, "temperature")) spec.params.temperature = static_cast<float>(*v);
  if (auto v = get_number(j, "top_p")) spec.params.top_p = static_cast<float>(*v);
  if (auto v = get_int(j, "top_k")) spec.params.top_k = to_i32(*v, "top_k", -1, 1 << 30);
  spec.params.stop = get_stop(j, "stop_sequences");
  spec.stop_sequences = spec.params.stop;
  if (auto v = get_bool(j, "stream")) spec.stream = *v;
  spec.include_usage = true;

  Json messages = Json::array();
  if (const Json* sys = field(j, "system")) {
    messages.push_back({{"role", "system"}, {"content", anthropic_text(*sys, "system")}});
  }
  const Json* in = field(j, "messages");
  if (in == nullptr || !in->is_array() || in->empty()) {
    throw bad_request("'messages' must be a non-empty array", "messages");
  }
  for (size_t i = 0; i < in->size(); ++i) {
    const Json& m = (*in)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_request(where + " must be an object", "messages");
    const std::string role = m.value("role", "");
    if (role != "user" && role != "assistant") {
      throw bad_request(where + ".role must be user or assistant", "messages");
    }
    const Json* content = field(m, "content");
    if (content == nullptr) throw bad_request(where + ".content is required", "messages");
    if (content->is_string()) {
      messages.push_back({{"role", role}, {"content", *content}});
      continue;
    }
    if (!content->is_array())
      throw bad_request(where + ".content must be a string or blocks", "messages");
    Json msg = {{"role", role}, {"content", ""}};
    std::string text, thinking;
    Json calls = Json::array();
    for (const Json& b : *content) {
      const std::string type = b.is_object() ? b.value("type", "") : "";
      if (type == "text") {
        text += b.value("text", "");
      } else if (type == "thinking") {
        thinking += b.value("thinking", "");
      } else if (type == "tool_use") {
        calls.push_back(
            {{"id", b.value("id", "")},
             {"type", "function"},
             {"function",
              {{"name", b.value("name", "")},
               {"arguments", dump(b.contains("input") ? b["input"] : Json::object())}}}});
      } else if (type == "tool_result") {
        if (!text.empty()) {  // text before the results stays a user turn of its own
          messages.push_back({{"role", "user"}, {"content", text}});
          text.clear();
        }
        const Json c = b.contains("content") ? b["content"] : Json("");
        messages.push_back({{"role", "tool"},
                            {"tool_call_id", b.value("tool_use_id", "")},
                            {"content", anthropic_text(c, where.c_str())}});
      } else if (type == "image" || type == "document") {
        throw bad_request(where + ": " + type + " blocks are not supported by this model",
                          "messages");
      }
    }
    if (role == "assistant") {
      msg["content"] = text;
      if (!thinking.empty()) msg["reasoning_content"] = thinking;
      if (!calls.empty()) msg["tool_calls"] = calls;
      messages.push_back(std::move(msg));
    } else if (!text.empty()) {
      msg["content"] = text;
      messages.push_back(std::move(msg));
    }
  }
  ChatRenderOptions ro;
  ro.effort_profile = ctx.effort_profile;
  if (const Json* th = field(j, "thinking")) {
    if (!th->is_object()) throw bad_request("'thinking' must be an object", "thinking");
    ro.thinking = th->value("type", "") == "enabled";
  }
  spec.thinking = ro.thinking;
  Json tools;
  if (const Json* t = field(j, "tools"); t != nullptr && t->is_array() && !t->empty()) {
    tools = Json::array();
    for (const Json& tool : *t) {
      if (!tool.is_object() || !tool.contains("name")) {
        throw bad_request("each tool needs a 'name' and an 'input_schema'", "tools");
      }
      Json fn = {{"name", tool["name"]}};
      if (tool.contains("description")) fn["description"] = tool["description"];
      fn["parameters"] = tool.contains("input_schema") ? tool["input_schema"] : Json::object();
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    Json choice = Json::object();
    if (const Json* tc = field(j, "tool_choice"); tc != nullptr && tc->is_object()) {
      const std::string type = tc->value("type", "auto");
      if (type == "any") choice["tool_choice"] = "required";
      if (type == "none") choice["tool_choice"] = "none";
      if (type == "tool")
        choice["tool_choice"] = {{"type", "function"},
                                 {"function", {{"name", tc->value("name", "")}}}};
    }
    Json render_tools;
    apply_tool_choice(choice, &tools, spec, render_tools);
    tools = render_tools;
  }
  if (spec.params.structured && !spec.tools_given) spec.thinking = ro.thinking = false;
  render_chat(spec, ctx, messages, tools, ro);
  check_sampling(spec);
  check_prompt_length(spec, ctx, "messages");
  return spec;
}

}  // namespace deepinfer::server
