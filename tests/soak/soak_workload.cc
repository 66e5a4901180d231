// The soak workload's random choices (soak_workload.h) and the structured outputs' checks.
#include "soak_workload.h"

#include <nlohmann/json.hpp>

#include <regex>

namespace deepinfer::soak {
namespace detail {

namespace {
const std::vector<std::string>& vocabulary() {
  static const std::vector<std::string> kWords = {
      "light", "darkness", "heaven", "earth", "water", "firmament", "seed",  "fruit",
      "night", "day",      "the",    "and",   "of",    "in",        "was",   "God",
      "said",  "let",      "there",  "be",    "good",  "evening",   "morning", "first",
      "tree",  "grass",    "herb",   "sea",   "land",  "stars",     "sun",   "moon"};
  return kWords;
}
}  // namespace

std::string words(std::mt19937_64& rng, int n) {
  const auto& v = vocabulary();
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += ' ';
    s += v[rng() % v.size()];
  }
  return s;
}

const std::vector<std::string>& system_prompts() {
  // Long enough for several 16-token KV blocks, so that requests sharing one hit the cache.
  static const std::vector<std::string> kSystem = [] {
    std::vector<std::string> out;
    for (uint64_t k = 0; k < 4; ++k) {
      std::mt19937_64 rng(1000 + k);
      out.push_back("System " + std::to_string(k) + ": " + words(rng, 40 + 15 * static_cast<int>(k)));
    }
    return out;
  }();
  return kSystem;
}

void pick_sampling(std::mt19937_64& rng, Plan& p) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  SamplingParams& s = p.params;
  static const float kTemps[] = {0.0f, 0.3f, 0.8f, 1.0f, 1.5f};
  s.temperature = kTemps[rng() % 5];
  s.max_tokens = 1 + static_cast<int32_t>(rng() % 24);
  if (u(rng) < 0.4) s.top_k = static_cast<int32_t>(std::vector<int>{1, 5, 50, -1}[rng() % 4]);
  if (u(rng) < 0.4) s.top_p = std::vector<float>{0.5f, 0.9f, 0.99f}[rng() % 3];
  if (u(rng) < 0.2) s.min_p = std::vector<float>{0.02f, 0.1f, 0.3f}[rng() % 3];
  if (u(rng) < 0.15) s.repetition_penalty = std::vector<float>{0.8f, 1.2f, 1.5f}[rng() % 3];
  if (u(rng) < 0.15) s.presence_penalty = std::vector<float>{-1.0f, 0.5f, 2.0f}[rng() % 3];
  if (u(rng) < 0.15) s.frequency_penalty = std::vector<float>{-0.5f, 0.7f, 1.5f}[rng() % 3];
  if (u(rng) < 0.6) s.seq_seed = rng();
  if (u(rng) < 0.2) s.min_tokens = static_cast<int32_t>(rng() % (*s.max_tokens + 1));
  if (u(rng) < 0.2) {
    s.stop = std::vector<std::vector<std::string>>{{"the"}, {"e", "a"}, {" and", "God"},
                                                   {"light darkness"}}[rng() % 4];
    s.include_stop_str_in_output = u(rng) < 0.3;
  }
  if (u(rng) < 0.1) s.stop_token_ids = {static_cast<int32_t>(3 + rng() % 200)};
  if (u(rng) < 0.15) s.ignore_eos = true;
  if (u(rng) < 0.15) s.logprobs = static_cast<int32_t>(rng() % 4);
  if (u(rng) < 0.04) s.prompt_logprobs = static_cast<int32_t>(rng() % 3);
  if (u(rng) < 0.1) s.skip_special_tokens = false;
  if (s.temperature > 0.0f && u(rng) < 0.2) s.n = 2 + static_cast<int32_t>(rng() % 3);
}

bool pick_structured(std::mt19937_64& rng, Plan& p) {
  SamplingParams& s = p.params;
  s.max_tokens = 48;
  s.min_tokens = 0;
  s.stop.clear();
  s.stop_token_ids.clear();
  s.ignore_eos = false;
  if (s.temperature == 0.0f) s.n = 1;
  struct Case {
    const char* type;
    const char* schema;
    Grammar g;
    bool valid;
  };
  static const Case kCases[] = {
      {"regex", "[A-Z][a-z]{2,8} [0-9]{1,3}", Grammar::kRegexName, true},
      {"regex", "(yes|no)", Grammar::kRegexYesNo, true},
      {"json",
       R"({"type":"object","properties":{"ok":{"type":"boolean"},)"
       R"("n":{"type":"integer","minimum":0,"maximum":99}},"required":["ok","n"]})",
       Grammar::kJsonOkN, true},
      {"json_schema",
       R"({"type":"object","properties":{"name":{"type":"string","maxLength":8}},)"
       R"("required":["name"]})",
       Grammar::kJsonName, true},
      {"ebnf", R"(root ::= ("yes" | "no") " " [0-9])", Grammar::kEbnfYesNo, true},
      {"regex", "([a-z", Grammar::kNone, false},
      {"json", R"({"type": "object", "properties": 5})", Grammar::kNone, false},
      {"json", "{not json", Grammar::kNone, false},
      {"ebnf", "root ::= undefined_rule", Grammar::kNone, false},
      {"lark", "start: \"x\"", Grammar::kNone, false},
  };
  // Valid grammars four times as often as invalid ones.
  const size_t pick = rng() % 25;
  const Case& c = kCases[pick < 20 ? pick % 5 : 5 + pick % 5];
  s.structured = SamplingParams::StructuredOutput{c.type, c.schema};
  p.grammar = c.g;
  p.expect = c.valid ? Expect::kOutput : Expect::kSubmitError;
  p.what = std::string(c.valid ? "structured " : "invalid structured ") + c.type;
  return true;
}

bool pick_invalid(std::mt19937_64& rng, Plan& p, int64_t vocab_size) {
  SamplingParams& s = p.params;
  p.expect = Expect::kSubmitError;
  switch (rng() % 10) {
    case 0: s.temperature = -0.5f; p.what = "temperature < 0"; break;
    case 1: s.top_p = 0.0f; p.what = "top_p = 0"; break;
    case 2: s.n = 0; p.what = "n = 0"; break;
    case 3: s.top_k = -7; p.what = "top_k = -7"; break;
    case 4: s.logprobs = 50; p.what = "logprobs = 50"; break;
    case 5: s.temperature = 0.0f; s.n = 3; p.what = "greedy with n = 3"; break;
    case 6:
      s.stop_token_ids = {static_cast<int32_t>(vocab_size + 5)};
      p.what = "stop token id outside the vocabulary";
      break;
    case 7: s.min_p = 1.5f; p.what = "min_p = 1.5"; break;
    case 8: s.max_tokens = -3; p.what = "max_tokens = -3"; break;
    default: s.presence_penalty = 3.0f; p.what = "presence_penalty = 3"; break;
  }
  return true;
}

}  // namespace detail

bool text_matches(Grammar g, const std::string& text) {
  switch (g) {
    case Grammar::kNone: return true;
    case Grammar::kRegexName:
      return std::regex_match(text, std::regex("[A-Z][a-z]{2,8} [0-9]{1,3}"));
    case Grammar::kRegexYesNo: return text == "yes" || text == "no";
    case Grammar::kEbnfYesNo: return std::regex_match(text, std::regex("(yes|no) [0-9]"));
    case Grammar::kJsonOkN: {
      const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      return j.is_object() && j.contains("ok") && j["ok"].is_boolean() && j.contains("n") &&
             j["n"].is_number_integer() && j["n"].get<int64_t>() >= 0 &&
             j["n"].get<int64_t>() <= 99;
    }
    case Grammar::kJsonName: {
      const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      return j.is_object() && j.contains("name") && j["name"].is_string();
    }
  }
  return false;
}

}  // namespace deepinfer::soak
