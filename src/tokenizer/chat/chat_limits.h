// The limits of the chat module's parsers (chat messages and tool definitions as JSON, and the
// model's DSML output), in one place; docs/limits.md lists them with every other parser's.
// A conversation or output within them holds far more than any context window.
#pragma once

#include <cstddef>

namespace deepinfer::chat {

// Nesting of arrays and objects in a messages or tools document, and in a tool call's
// arguments given as a JSON string (walkers and dump() recurse: see base/input_limits.h).
inline constexpr size_t kMaxChatJsonDepth = 512;
// Messages in one conversation, and tool definitions in one request.
inline constexpr size_t kMaxMessages = 65'536;
inline constexpr size_t kMaxTools = 1'024;
// Bytes of one message's content (after joining its text parts).
inline constexpr size_t kMaxContentBytes = size_t{16} << 20;
// Model output held back inside a DSML tool-calls block while waiting for a marker (a
// parameter value that never closes).
inline constexpr size_t kMaxPendingDsmlBytes = size_t{16} << 20;

}  // namespace deepinfer::chat
