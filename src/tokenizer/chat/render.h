// render_prompt: a DeepSeek-V4 conversation as the exact prompt string the official renderer
// (encoding_dsv4.py, encode_messages) produces, BOS included as text.
//
// The steps mirror the official pipeline so each rule has one home: request-level tools are
// attached to the first message, tool results are merged into user turns
// (merge_tool_messages) and ordered by call order (sort_tool_results_by_call_order), earlier
// reasoning is dropped in thinking mode unless tools are present (_drop_thinking_messages), then
// each message is rendered with its role prefix and the transition that follows it
// (render_message).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/chat/chat_types.h"

namespace deepinfer::chat {

// Errors (InvalidArgument) name the message index and field: a tool message with no preceding
// assistant tool call, a tool_call_id that matches no call, malformed tool-call arguments, an
// empty developer message, an unknown task, tools on a role that cannot carry them, a reasoning
// effort the profile does not define, continue_final_message without a final assistant message.
Expected<std::string> render_prompt(const std::vector<ChatMessage>& messages,
                                    const RenderOptions& options);

// The preamble put before the first message in thinking mode (REASONING_EFFORT_MAX or
// REASONING_EFFORT_PROMPTS); empty when the effort adds none.
Expected<std::string> reasoning_effort_preamble(ReasoningEffort effort, EffortProfile profile);

}  // namespace deepinfer::chat
