// The limits of the server's request parsing, in one place; docs/limits.md lists them with
// every other parser's. The body and header sizes are ServerOptions (--max-body-bytes, 32 MiB;
// 64 KiB of headers), checked by the HTTP reader before any parsing; these bound what a body
// within them may ask for.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::server {

// Nesting of arrays and objects in a request body (checked on the text: see
// base/input_limits.h for why).
inline constexpr size_t kMaxRequestJsonDepth = 512;
// Choices per request ("n") and prompts per completions request.
inline constexpr int64_t kMaxN = 128;
inline constexpr size_t kMaxPrompts = 256;
// Stop strings (count, bytes each) and stop token ids: every generated token is checked
// against all of them.
inline constexpr size_t kMaxStopStrings = 64;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxStopTokenIds = 1024;
// Alternatives per position for logprobs, top_logprobs and prompt_logprobs (OpenAI's 20).
inline constexpr int64_t kMaxLogprobs = 20;

}  // namespace deepinfer::server
