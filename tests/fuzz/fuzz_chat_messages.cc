// Fuzz target: an OpenAI-style chat request (a messages array, or {"messages", "tools"}) as
// parse_chat_request_json reads it, then rendered into the DeepSeek-V4 prompt (render_prompt).
// Both must return a value or an error naming the message and field. The render options vary
// with the input's size (thinking, reasoning effort, effort profile, drop_thinking,
// continue_final_message, add_generation_prompt), so every combination is reached without a
// header byte that would break the seeds' JSON.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer/chat/chat_json.h"
#include "tokenizer/chat/render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::chat;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto req = parse_chat_request_json(text);
  if (!req.ok()) return 0;
  RenderOptions o;
  o.thinking = (size & 1) != 0;
  constexpr ReasoningEffort kEfforts[] = {ReasoningEffort::kNone, ReasoningEffort::kLow,
                                          ReasoningEffort::kHigh, ReasoningEffort::kMax};
  o.reasoning_effort = kEfforts[(size >> 1) & 3];
  o.effort_profile = (size & 8) ? EffortProfile::k0731 : EffortProfile::kPreview;
  o.drop_thinking = (size & 16) == 0;
  o.continue_final_message = (size & 32) != 0;
  o.add_generation_prompt = (size & 64) == 0;
  o.tools = req->tools;
  auto prompt = render_prompt(req->messages, o);
  (void)prompt;
  return 0;
}
