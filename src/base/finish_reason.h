// FinishReason: why a sequence ended. One name for the idea across the stop checker (which
// decides kStop and kLength), the scheduler (kModelLength, kAborted, kError) and the engine's
// API strings, so no layer maps one enum onto another.
#pragma once

#include <cstdint>
#include <string_view>

namespace deepinfer {

enum class FinishReason : uint8_t { kNone, kStop, kLength, kModelLength, kAborted, kError };

// "none", "stop", "length", "model_length", "abort", "error".
std::string_view finish_reason_name(FinishReason reason);
// The OpenAI-style finish_reason a client sees: "stop", "length" (the caller's max_tokens and
// the model's length alike), "abort", "error" (also for kNone: a sequence that ended without a
// reason is an error).
std::string_view api_finish_reason(FinishReason reason);

}  // namespace deepinfer
