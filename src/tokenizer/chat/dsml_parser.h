// Incremental parser of one DSML tool-calls block in model output, fed whatever text has
// arrived so far. It starts right after "<｜DSML｜tool_calls" and stops after
// "</｜DSML｜tool_calls>", returning each call as soon as its "</｜DSML｜invoke" is seen.
//
// The grammar is the official parse_tool_calls (encoding_dsv4.py), which is strict: exact ">\n"
// separators, ` name="..." string="true|false">` parameter headers, no duplicate parameter names.
// Anything else is an error naming what was expected; the block is never guessed at.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/chat/dsml.h"

namespace deepinfer::chat {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON object text (decode_dsml_to_arguments)
  bool operator==(const ParsedToolCall&) const = default;
};

class DsmlBlockParser {
 public:
  // kCallBegin and kArguments only in streaming mode (set_streaming(true)): a call's name as
  // soon as its header is complete (call->name), then its arguments as JSON text fragments
  // (call->arguments) that concatenate to the call's arguments: "{" + the first parameter,
  // ", " + each next one, "}" at the end. A string value streams as it arrives (its key and
  // opening quote once its header is complete, then escaped pieces of whole characters, the
  // closing quote when it ends); other values are sent whole when complete. A non-string value that
  // is not valid JSON is given as a JSON string, so the concatenation is always a valid JSON object
  // (the kToolCall that follows carries that same text).
  enum class Step { kNeedMore, kToolCall, kClosed, kCallBegin, kArguments };

  void set_streaming(bool on) { streaming_ = on; }

  // Consumes from `text` (the unconsumed output, starting where the last call stopped) and adds
  // the number of bytes used to *consumed. kToolCall fills *call; kClosed means the block ended.
  Expected<Step> next(std::string_view text, std::size_t* consumed, ParsedToolCall* call);

 private:
  enum class State {
    kOpenGt,     // after "<｜DSML｜tool_calls": ">\n"
    kBetween,    // "<｜DSML｜invoke" or "</｜DSML｜tool_calls>"
    kHeader,     // ` name="NAME">\n` up to the first parameter or the invoke's end
    kParam,      // ` name="K" string="true|false">VALUE<` up to "/｜DSML｜parameter"
    kParamGt,    // ">\n" after a parameter
    kParamNext,  // "<｜DSML｜parameter" or "</｜DSML｜invoke"
    kInvokeGt,   // ">\n" after "</｜DSML｜invoke"
  };
  // Where a marker search may resume: text already scanned without finding the marker, less
  // the marker's length, so that feeding a long parameter value byte by byte stays linear.
  std::size_t resume_from(std::size_t available, std::size_t marker_size) const {
    const std::size_t safe = scanned_ >= marker_size ? scanned_ - marker_size + 1 : 0;
    return safe <= available ? safe : 0;
  }

  // Streaming mode: a string parameter's value streams as it arrives (the fragment to send,
  // possibly empty); value_* track the parameter being streamed.
  std::string stream_string_value(std::string_view param_text);
  bool value_open_ = false;
  std::size_t value_start_ = 0;  // offset of the value in the parameter's text
  std::size_t value_sent_ = 0;   // value bytes already sent
  std::string value_name_;
  // Streaming mode: steps found but not yet returned, and the arguments given so far.
  bool streaming_ = false;
  std::vector<std::pair<Step, ParsedToolCall>> queued_;
  std::string streamed_args_;

  State state_ = State::kOpenGt;
  std::size_t scanned_ = 0;  // bytes of the pending text known not to hold the awaited marker
  std::string name_;
  std::vector<DsmlParameter> params_;
};

}  // namespace deepinfer::chat
