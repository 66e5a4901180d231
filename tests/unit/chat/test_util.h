// Helpers shared by the chat tests: golden-file loading and chunked feeding of the parser.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/chat/output_parser.h"
#include "tokenizer/chat/python_json.h"

namespace deepinfer::chat::testing {

inline OrderedJson load_goldens() {
  const char* env = std::getenv("DEEPINFER_SOURCE_DIR");
  const std::string root = env ? env : DEEPINFER_CHAT_SOURCE_DIR;
  std::ifstream in(root + "/tests/data/chat/v4_goldens.json");
  EXPECT_TRUE(in.good()) << "cannot open tests/data/chat/v4_goldens.json under " << root;
  std::stringstream ss;
  ss << in.rdbuf();
  return OrderedJson::parse(ss.str());
}

// Feeds `text` in the given chunk sizes (cycled) and collects the result like the one-shot
// parse does; returns the first error.
inline Expected<AssistantOutput> parse_chunked(const std::string& text, bool thinking,
                                               const std::vector<std::size_t>& sizes,
                                               std::vector<OutputEvent>* all_events = nullptr) {
  AssistantOutputParser parser(thinking);
  std::vector<OutputEvent> events;
  std::size_t pos = 0;
  for (std::size_t k = 0; pos < text.size(); ++k) {
    const std::size_t n = std::min(sizes[k % sizes.size()], text.size() - pos);
    DI_TRY(parser.feed(std::string_view(text).substr(pos, n), &events));
    pos += n;
  }
  DI_TRY(parser.finish(&events));
  AssistantOutput out;
  for (const auto& e : events) {
    if (e.type == OutputEventType::kReasoning) out.reasoning_content += e.text;
    if (e.type == OutputEventType::kContent) out.content += e.text;
    if (e.type == OutputEventType::kToolCall) out.tool_calls.push_back(e.tool_call);
  }
  out.ended = parser.ended();
  if (all_events) *all_events = std::move(events);
  return out;
}

// Chunkings to try: one byte at a time, fixed small sizes, and seeded random sizes.
inline std::vector<std::vector<std::size_t>> chunkings(std::size_t text_size) {
  std::vector<std::vector<std::size_t>> out = {{1}, {2}, {3}, {5}, {7}, {text_size + 1}};
  std::mt19937 rng(1234);
  for (int r = 0; r < 20; ++r) {
    std::vector<std::size_t> sizes;
    for (int k = 0; k < 64; ++k) sizes.push_back(1 + rng() % 24);
    out.push_back(sizes);
  }
  return out;
}

}  // namespace deepinfer::chat::testing
