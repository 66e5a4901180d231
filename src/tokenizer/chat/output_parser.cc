// Incremental model-output parser; see output_parser.h for the grammar and the choices.
#include "tokenizer/chat/output_parser.h"

#include <algorithm>
#include <array>

#include "base/input_limits.h"
#include "tokenizer/chat/chat_limits.h"
#include "tokenizer/chat/special_tokens.h"

namespace deepinfer::chat {
namespace {

// The official tool_calls_start_token: the block opener with the two newlines before it. Only
// used to hold those newlines back until we know whether a block follows.
constexpr std::string_view kToolCallsStart = "\n\n<｜DSML｜tool_calls";

// Length of the longest proper prefix of `marker` that `text` ends with.
std::size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (std::size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

// Bytes at the end of text[0, n) that start a UTF-8 character not complete within it.
std::size_t incomplete_utf8_tail(std::string_view text, std::size_t n) {
  for (std::size_t back = 1; back <= std::min<std::size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead byte
    const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

AssistantOutputParser::AssistantOutputParser(bool thinking, bool stream_tool_calls)
    : state_(thinking ? State::kReasoning : State::kContent),
      stream_tool_calls_(stream_tool_calls) {}

Status AssistantOutputParser::fail(Status status) {
  state_ = State::kFailed;
  error_ = std::move(status);
  return error_;
}

void AssistantOutputParser::consume(std::size_t n) {
  buf_.erase(0, n);
  offset_ += n;
}

Status AssistantOutputParser::feed(std::string_view text, std::vector<OutputEvent>* events) {
  if (state_ == State::kFailed) return error_;
  if (state_ == State::kFinished) {
    return fail(failed_precondition("assistant output parser: feed() after finish()"));
  }
  buf_.append(text);
  return process(/*final=*/false, events);
}

Status AssistantOutputParser::finish(std::vector<OutputEvent>* events) {
  if (state_ == State::kFailed) return error_;
  if (state_ == State::kFinished) return Status::ok_status();
  DI_TRY(process(/*final=*/true, events));
  state_ = State::kFinished;
  return Status::ok_status();
}

Status AssistantOutputParser::process(bool final, std::vector<OutputEvent>* events) {
  bool progressed = true;
  while (progressed) {
    progressed = false;
    Status st;
    switch (state_) {
      case State::kReasoning:
      case State::kContent:
        st = process_text(final, events, &progressed);
        break;
      case State::kToolBlock:
        st = process_block(final, events, &progressed);
        break;
      case State::kAfterTools:
      case State::kEnded:
        st = process_tail(final, &progressed);
        break;
      case State::kFinished:
      case State::kFailed:
        break;
    }
    if (!st.ok()) {
      return fail(st.with_context("assistant output at byte " + std::to_string(offset_)));
    }
  }
  return Status::ok_status();
}

Status AssistantOutputParser::process_text(bool final, std::vector<OutputEvent>* events,
                                           bool* progressed) {
  const bool reasoning = state_ == State::kReasoning;
  const OutputEventType type = reasoning ? OutputEventType::kReasoning : OutputEventType::kContent;
  auto emit = [&](std::size_t n) {
    if (n == 0) return;
    events->push_back(OutputEvent{type, buf_.substr(0, n), {}, 0});
  };

  // Reasoning ends at "</think>" (or, leniently, at EOS or a tool-calls block); content ends at
  // EOS or a tool-calls block. The earliest marker wins.
  std::array<std::string_view, 3> markers = {kEosToken, kToolCallsOpen, kThinkEnd};
  const std::size_t n_markers = reasoning ? 3 : 2;
  std::size_t best = std::string::npos;
  std::string_view hit;
  for (std::size_t m = 0; m < n_markers; ++m) {
    const std::size_t at = buf_.find(markers[m]);
    if (at < best) {
      best = at;
      hit = markers[m];
    }
  }
  if (best != std::string::npos) {
    std::size_t text_len = best;
    if (hit == kToolCallsOpen && text_len >= 2 && buf_.compare(text_len - 2, 2, "\n\n") == 0) {
      text_len -= 2;  // the newlines belong to the block opener (tool_calls_start_token)
    }
    emit(text_len);
    consume(best + hit.size());
    if (hit == kThinkEnd) {
      state_ = State::kContent;
    } else if (hit == kEosToken) {
      state_ = State::kEnded;
      saw_eos_ = true;
    } else {
      state_ = State::kToolBlock;
      block_ = DsmlBlockParser();
      block_.set_streaming(stream_tool_calls_);
    }
    *progressed = true;
    return Status::ok_status();
  }

  std::size_t keep = 0;
  if (!final) {
    for (std::size_t m = 0; m < n_markers; ++m)
      keep = std::max(keep, partial_suffix(buf_, markers[m]));
    keep = std::max(keep, partial_suffix(buf_, kToolCallsStart));
    keep += incomplete_utf8_tail(buf_, buf_.size() - keep);
  }
  emit(buf_.size() - keep);
  consume(buf_.size() - keep);
  return Status::ok_status();
}

Status AssistantOutputParser::process_block(bool final, std::vector<OutputEvent>* events,
                                            bool* progressed) {
  std::size_t used = 0;
  ParsedToolCall call;
  auto step = block_.next(buf_, &used, &call);
  if (!step.ok()) return step.status();
  consume(used);
  switch (*step) {
    case DsmlBlockParser::Step::kToolCall:
      events->push_back(
          OutputEvent{OutputEventType::kToolCall, {}, std::move(call), tool_count_++});
      *progressed = true;
      break;
    case DsmlBlockParser::Step::kCallBegin:
      events->push_back(
          OutputEvent{OutputEventType::kToolCallBegin, {}, std::move(call), tool_count_});
      *progressed = true;
      break;
    case DsmlBlockParser::Step::kArguments:
      events->push_back(
          OutputEvent{OutputEventType::kToolCallArguments, {}, std::move(call), tool_count_});
      *progressed = true;
      break;
    case DsmlBlockParser::Step::kClosed:
      state_ = State::kAfterTools;
      *progressed = true;
      break;
    case DsmlBlockParser::Step::kNeedMore:
      if (final) {
        return invalid_argument(
            "the output ended inside a <｜DSML｜tool_calls> block (expected "
            "</｜DSML｜tool_calls>)");
      }
      if (buf_.size() > kMaxPendingDsmlBytes) {
        return invalid_argument(
            "inside a <｜DSML｜tool_calls> block: " +
            limit_message(format_count(buf_.size()) + " bytes held waiting for a DSML marker",
                          kMaxPendingDsmlBytes,
                          "kMaxPendingDsmlBytes in src/tokenizer/chat/chat_limits.h",
                          "the model's tool call does not close; lower max_tokens"));
      }
      break;
  }
  return Status::ok_status();
}

// After the tool-calls block only EOS may follow (whitespace is tolerated); after EOS, nothing.
Status AssistantOutputParser::process_tail(bool final, bool* progressed) {
  if (state_ == State::kEnded) {
    if (!buf_.empty()) {
      return invalid_argument("unexpected text after <｜end▁of▁sentence｜>: '" +
                              buf_.substr(0, 48) + "'");
    }
    return Status::ok_status();
  }
  std::size_t i = 0;
  while (i < buf_.size() &&
         (buf_[i] == ' ' || buf_[i] == '\n' || buf_[i] == '\t' || buf_[i] == '\r'))
    ++i;
  consume(i);
  if (buf_.empty()) return Status::ok_status();
  if (buf_.compare(0, kEosToken.size(), kEosToken) == 0) {
    consume(kEosToken.size());
    state_ = State::kEnded;
    saw_eos_ = true;
    *progressed = true;
    return Status::ok_status();
  }
  const bool eos_prefix =
      buf_.size() < kEosToken.size() && kEosToken.substr(0, buf_.size()) == buf_;
  if (eos_prefix && !final) return Status::ok_status();
  return invalid_argument(
      "unexpected text after </｜DSML｜tool_calls> (expected "
      "<｜end▁of▁sentence｜> or the end): '" +
      buf_.substr(0, 48) + "'");
}

Expected<AssistantOutput> parse_assistant_output(std::string_view text, bool thinking) {
  AssistantOutputParser parser(thinking);
  std::vector<OutputEvent> events;
  DI_TRY(parser.feed(text, &events));
  DI_TRY(parser.finish(&events));
  AssistantOutput out;
  for (auto& e : events) {
    switch (e.type) {
      case OutputEventType::kReasoning:
        out.reasoning_content += e.text;
        break;
      case OutputEventType::kContent:
        out.content += e.text;
        break;
      case OutputEventType::kToolCall:
        out.tool_calls.push_back(std::move(e.tool_call));
        break;
      case OutputEventType::kToolCallBegin:
      case OutputEventType::kToolCallArguments:
        break;  // not produced without stream_tool_calls
    }
  }
  out.ended = parser.ended();
  return out;
}

}  // namespace deepinfer::chat
