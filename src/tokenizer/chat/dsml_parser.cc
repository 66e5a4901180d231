// DSML tool-calls block parser; see dsml_parser.h.
#include "tokenizer/chat/dsml_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/chat/python_json.h"
#include "tokenizer/chat/special_tokens.h"

namespace deepinfer::chat {
namespace {

// A short, printable excerpt for error messages.
std::string excerpt(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 48)) {
    if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  if (text.size() > 48) out += "...";
  return out;
}

Status malformed(std::string_view expected, std::string_view got) {
  return invalid_argument("malformed DSML tool call: expected " + std::string(expected) +
                          ", got '" + excerpt(got) + "'");
}

enum class Match { kYes, kNeedMore, kNo };

// Does `text` start with `literal` (kNeedMore when `text` is a shorter prefix of it)?
Match starts_with(std::string_view text, std::string_view literal) {
  const std::size_t n = std::min(text.size(), literal.size());
  if (text.substr(0, n) != literal.substr(0, n)) return Match::kNo;
  return n == literal.size() ? Match::kYes : Match::kNeedMore;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// `\s*name="(.*?)">\n$` of the official regex. Python's `$` also matches before one final
// newline, which is what lets a call without parameters ("...">\n\n</｜DSML｜invoke") parse.
bool parse_header(std::string_view s, std::string* name) {
  std::size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  s.remove_prefix(i);
  constexpr std::string_view kPrefix = "name=\"";
  if (s.substr(0, kPrefix.size()) != kPrefix) return false;
  s.remove_prefix(kPrefix.size());
  for (std::string_view suffix : {std::string_view("\">\n"), std::string_view("\">\n\n")}) {
    if (s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix) {
      *name = std::string(s.substr(0, s.size() - suffix.size()));
      return true;
    }
  }
  return false;
}

// `^ name="(.*?)" string="(true|false)">(.*?)<$` (DOTALL) of the official regex.
bool parse_param(std::string_view s, DsmlParameter* p) {
  constexpr std::string_view kPrefix = " name=\"";
  if (s.substr(0, kPrefix.size()) != kPrefix) return false;
  s.remove_prefix(kPrefix.size());
  // The non-greedy name ends at the first `" string="true">` or `" string="false">`.
  const std::size_t t = s.find("\" string=\"true\">");
  const std::size_t f = s.find("\" string=\"false\">");
  if (t == std::string_view::npos && f == std::string_view::npos) return false;
  const bool is_true = f == std::string_view::npos || (t != std::string_view::npos && t < f);
  const std::size_t at = is_true ? t : f;
  p->name = std::string(s.substr(0, at));
  p->is_string = is_true;
  s.remove_prefix(at + (is_true ? 16 : 17));
  if (s.size() >= 2 && s.substr(s.size() - 2) == "<\n") {
    s.remove_suffix(2);
  } else if (!s.empty() && s.back() == '<') {
    s.remove_suffix(1);
  } else {
    return false;
  }
  p->value = std::string(s);
  return true;
}

// python_json_string without its quotes: escaping is per character, so the pieces of a value
// split at character boundaries concatenate to the escaped whole.
std::string json_string_body(std::string_view text) {
  const std::string q = python_json_string(text);
  return q.substr(1, q.size() - 2);
}

// Bytes at the end of `text` that start a UTF-8 character not complete within it.
std::size_t incomplete_utf8_tail(std::string_view text) {
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;
    const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

std::string DsmlBlockParser::stream_string_value(std::string_view r) {
  std::string frag;
  if (!value_open_) {
    // ` name="KEY" string="true">`: the first of the two headers decides, as in parse_param.
    constexpr std::string_view kPrefix = " name=\"";
    if (r.substr(0, kPrefix.size()) != kPrefix) return frag;  // malformed: reported at its end
    const std::size_t t = r.find("\" string=\"true\">");
    const std::size_t f = r.find("\" string=\"false\">");
    if (t == std::string_view::npos || (f != std::string_view::npos && f < t)) return frag;
    value_open_ = true;
    value_start_ = t + 16;
    value_sent_ = 0;
    value_name_ = std::string(r.substr(kPrefix.size(), t - kPrefix.size()));
    frag = params_.empty() ? "{" : ", ";
    frag += python_json_string(value_name_);
    frag += ": \"";
  }
  // Hold back what may be the value's end ("<" or "<\n" then "/｜DSML｜parameter") and an
  // incomplete character.
  std::size_t end = r.size();
  const std::size_t window = 2 + kParameterEnd.size();
  const std::size_t from = std::max(end > window ? end - window : 0, value_start_ + value_sent_);
  if (const std::size_t lt = r.find('<', from); lt != std::string_view::npos) end = lt;
  const std::size_t begin = value_start_ + value_sent_;
  if (end > begin) {
    std::string_view piece = r.substr(begin, end - begin);
    piece.remove_suffix(incomplete_utf8_tail(piece));
    frag += json_string_body(piece);
    value_sent_ += piece.size();
  }
  streamed_args_ += frag;
  return frag;
}

Expected<DsmlBlockParser::Step> DsmlBlockParser::next(std::string_view text, std::size_t* consumed,
                                                      ParsedToolCall* call) {
  if (!queued_.empty()) {  // streaming: steps found by the previous call
    const Step step = queued_.front().first;
    *call = std::move(queued_.front().second);
    queued_.erase(queued_.begin());
    return step;
  }
  std::size_t pos = 0;
  auto rest = [&] { return text.substr(pos); };
  auto done = [&](Step step) {
    *consumed += pos;
    return step;
  };
  // Streaming: queue a step (returned by the next calls, after the one that found it).
  auto stream_arg = [&](const DsmlParameter& param) {
    std::string frag = params_.empty() ? "{" : ", ";
    frag += python_json_string(param.name);
    frag += ": ";
    if (param.is_string) {
      frag += python_json_string(param.value);
    } else if (dsml_value_depth_ok(param.value) && nlohmann::json::accept(param.value)) {
      frag += param.value;
    } else {
      frag += python_json_string(param.value);  // never invalid JSON in the arguments
    }
    streamed_args_ += frag;
    queued_.emplace_back(Step::kArguments, ParsedToolCall{name_, std::move(frag)});
  };
  auto stream_end = [&]() -> Step {
    std::string frag = params_.empty() ? "{}" : "}";
    streamed_args_ += frag;
    queued_.emplace_back(Step::kArguments, ParsedToolCall{name_, std::move(frag)});
    queued_.emplace_back(Step::kToolCall, ParsedToolCall{name_, std::move(streamed_args_)});
    streamed_args_.clear();
    *call = std::move(queued_.front().second);
    queued_.erase(queued_.begin());
    return Step::kArguments;
  };
  for (;;) {
    switch (state_) {
      case State::kOpenGt:
      case State::kParamGt:
      case State::kInvokeGt: {
        const Match m = starts_with(rest(), ">\n");
        if (m == Match::kNeedMore) return done(Step::kNeedMore);
        if (m == Match::kNo) return malformed("'>\\n'", rest());
        pos += 2;
        state_ = state_ == State::kParamGt ? State::kParamNext : State::kBetween;
        break;
      }
      case State::kBetween: {
        const Match inv = starts_with(rest(), kInvokeOpen);
        const Match end = starts_with(rest(), kToolCallsClose);
        if (inv == Match::kYes) {
          pos += kInvokeOpen.size();
          state_ = State::kHeader;
        } else if (end == Match::kYes) {
          pos += kToolCallsClose.size();
          state_ = State::kOpenGt;
          return done(Step::kClosed);
        } else if (inv == Match::kNeedMore || end == Match::kNeedMore) {
          return done(Step::kNeedMore);
        } else {
          return malformed("'<｜DSML｜invoke' or '</｜DSML｜tool_calls>'", rest());
        }
        break;
      }
      case State::kHeader: {
        const std::string_view r = rest();
        const std::size_t p = r.find(kParameterOpen, resume_from(r.size(), kParameterOpen.size()));
        const std::size_t e = r.find(kInvokeClose, resume_from(r.size(), kInvokeClose.size()));
        if (p == std::string_view::npos && e == std::string_view::npos) {
          scanned_ = r.size();
          return done(Step::kNeedMore);
        }
        scanned_ = 0;
        const bool param_first =
            e == std::string_view::npos || (p != std::string_view::npos && p < e);
        const std::size_t at = param_first ? p : e;
        if (!parse_header(r.substr(0, at), &name_)) {
          return malformed("' name=\"NAME\">\\n' after <｜DSML｜invoke", r.substr(0, at));
        }
        params_.clear();
        pos += at + (param_first ? kParameterOpen.size() : kInvokeClose.size());
        if (streaming_) {
          streamed_args_.clear();
          if (!param_first) {  // no parameters: begin, "{}", the call
            state_ = State::kInvokeGt;
            queued_.emplace_back(Step::kArguments, ParsedToolCall{name_, "{}"});
            queued_.emplace_back(Step::kToolCall, ParsedToolCall{name_, "{}"});
            *call = ParsedToolCall{name_, {}};
            return done(Step::kCallBegin);
          }
          state_ = State::kParam;
          *call = ParsedToolCall{name_, {}};
          return done(Step::kCallBegin);
        }
        if (!param_first) {
          *call = ParsedToolCall{name_, dsml_arguments_json(params_)};
          state_ = State::kInvokeGt;
          return done(Step::kToolCall);
        }
        state_ = State::kParam;
        break;
      }
      case State::kParam: {
        const std::string_view r = rest();
        const std::size_t at = r.find(kParameterEnd, resume_from(r.size(), kParameterEnd.size()));
        if (at == std::string_view::npos) {
          scanned_ = r.size();
          if (streaming_) {  // nothing consumed: the parameter's text is parsed whole at its end
            std::string frag = stream_string_value(r);
            if (!frag.empty()) {
              *call = ParsedToolCall{name_, std::move(frag)};
              return done(Step::kArguments);
            }
          }
          return done(Step::kNeedMore);
        }
        scanned_ = 0;
        DsmlParameter param;
        if (!parse_param(r.substr(0, at), &param)) {
          return malformed(
              "' name=\"KEY\" string=\"true|false\">VALUE</｜DSML｜parameter>' after "
              "<｜DSML｜parameter",
              r.substr(0, at));
        }
        if (std::any_of(params_.begin(), params_.end(),
                        [&](const DsmlParameter& q) { return q.name == param.name; })) {
          return invalid_argument("malformed DSML tool call: duplicate parameter '" + param.name +
                                  "' in a call of '" + name_ + "'");
        }
        if (streaming_ && value_open_) {  // the rest of a streamed string value
          std::string frag =
              json_string_body(
                  std::string_view(param.value).substr(std::min(value_sent_, param.value.size()))) +
              "\"";
          streamed_args_ += frag;
          queued_.emplace_back(Step::kArguments, ParsedToolCall{name_, std::move(frag)});
          value_open_ = false;
        } else if (streaming_) {
          stream_arg(param);
        }
        params_.push_back(std::move(param));
        pos += at + kParameterEnd.size();
        state_ = State::kParamGt;
        if (streaming_) {
          *call = std::move(queued_.front().second);
          queued_.erase(queued_.begin());
          return done(Step::kArguments);
        }
        break;
      }
      case State::kParamNext: {
        const Match p = starts_with(rest(), kParameterOpen);
        const Match e = starts_with(rest(), kInvokeClose);
        if (p == Match::kYes) {
          pos += kParameterOpen.size();
          state_ = State::kParam;
        } else if (e == Match::kYes) {
          pos += kInvokeClose.size();
          state_ = State::kInvokeGt;
          if (streaming_) return done(stream_end());
          *call = ParsedToolCall{name_, dsml_arguments_json(params_)};
          return done(Step::kToolCall);
        } else if (p == Match::kNeedMore || e == Match::kNeedMore) {
          return done(Step::kNeedMore);
        } else {
          return malformed("'<｜DSML｜parameter' or '</｜DSML｜invoke>'", rest());
        }
        break;
      }
    }
  }
}

}  // namespace deepinfer::chat
