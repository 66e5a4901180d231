// The DeepSeek-V4 chat format's special-token strings (encoding_dsv4.py, "Special Tokens").
//
// They are kept as text: the prompt is a string, and the tokenizer maps each of these strings to
// its added-token id (BOS 0, EOS 1, <｜User｜> 128803, <｜Assistant｜> 128804, <think> 128821,
// </think> 128822, ｜DSML｜ 128825, <｜latest_reminder｜> 128828).
#pragma once

#include <string_view>

namespace deepinfer::chat {

inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsmlToken = "｜DSML｜";
inline constexpr std::string_view kUserToken = "<｜User｜>";
inline constexpr std::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminderToken = "<｜latest_reminder｜>";

// DSML markup built from kDsmlToken (tool_calls_template / tool_call_template).
inline constexpr std::string_view kToolCallsOpen = "<｜DSML｜tool_calls";  // then ">\n"
inline constexpr std::string_view kToolCallsClose = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke";
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke";  // then ">\n"
inline constexpr std::string_view kParameterOpen = "<｜DSML｜parameter";
inline constexpr std::string_view kParameterEnd = "/｜DSML｜parameter";  // preceded by '<'

// Quick-instruction task tokens (DS_TASK_SP_TOKENS); empty view for an unknown task.
std::string_view task_token(std::string_view task);

}  // namespace deepinfer::chat
