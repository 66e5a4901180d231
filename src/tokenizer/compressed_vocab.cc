// The Engram compressed token map (compressed_vocab.h).
#include "tokenizer/compressed_vocab.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

namespace deepinfer::tokenizer {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD
constexpr char kSentinel[] = "\xEE\x80\x80";                   // U+E000
// The key of a U+FFFD text whose id has no token string: Python's None, which equals no string.
// Invalid UTF-8, so no real key can be equal to it.
constexpr std::string_view kNoTokenKey = "\xFF<none>";

NormalizerStep step(NormalizerStep::Kind kind, std::string pattern = {}, std::string content = {},
                    bool regex = false) {
  NormalizerStep s;
  s.kind = kind;
  s.pattern = std::move(pattern);
  s.content = std::move(content);
  s.regex = regex;
  return s;
}

TextNormalizer make_engram_normalizer() {
  using K = NormalizerStep::Kind;
  std::vector<NormalizerStep> steps;
  steps.push_back(step(K::kNfkc));
  steps.push_back(step(K::kNfd));
  steps.push_back(step(K::kStripAccents));
  steps.push_back(step(K::kLowercase));
  steps.push_back(step(K::kReplace, "[ \t\r\n]+", " ", /*regex=*/true));
  steps.push_back(step(K::kReplace, "^ $", kSentinel, /*regex=*/true));
  steps.push_back(step(K::kStrip));
  steps.push_back(step(K::kReplace, kSentinel, " "));
  auto n = TextNormalizer::make(std::move(steps));
  if (!n.ok()) {  // a fixed pipeline of supported steps: cannot fail
    std::fprintf(stderr, "deepinfer: %s\n", n.status().to_string().c_str());
    std::abort();
  }
  return std::move(n).value();
}

std::string describe(const TokenTexts& texts, int32_t id) {
  using json = nlohmann::json;
  const std::string text(texts.text(id));
  const std::string key = engram_key(texts, id);
  std::ostringstream s;
  s << "id " << id << " text " << json(text).dump(-1, ' ', false, json::error_handler_t::replace);
  if (key != text) s << " key " << json(key).dump(-1, ' ', false, json::error_handler_t::replace);
  if (texts.is_added(id)) s << " (added token)";
  return s.str();
}

}  // namespace

const TextNormalizer& engram_normalizer() {
  static const TextNormalizer n = make_engram_normalizer();
  return n;
}

std::string engram_key(const TokenTexts& texts, int32_t id) {
  const std::string_view text = texts.text(id);
  if (text.find(kReplacementChar) != std::string_view::npos) {
    auto token = texts.token(id);
    return std::string(token ? *token : kNoTokenKey);
  }
  std::string normalized = engram_normalizer().normalize(text);
  return normalized.empty() ? std::string(text) : normalized;
}

CompressedVocab build_compressed_vocab(const TokenTexts& texts) {
  CompressedVocab v;
  const int32_t n = texts.size();
  v.map.resize(static_cast<size_t>(n));
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    auto [it, fresh] = ids.emplace(engram_key(texts, id), v.count);
    if (fresh) {
      ++v.count;
      v.first_id.push_back(id);
    }
    v.map[static_cast<size_t>(id)] = it->second;
  }
  return v;
}

Status check_compressed_vocab_size(const CompressedVocab& vocab, const TokenTexts& texts,
                                   int64_t expected) {
  if (vocab.count == expected) return Status();
  constexpr int64_t kShown = 5;
  std::ostringstream msg;
  msg << "Engram: the compressed token map of " << texts.path() << " has " << vocab.count
      << " entries, the config's engram_compressed_vocab_size is " << expected
      << " (every hash multiplier depends on it: the model needs the exact tokenizer it was "
         "trained with; "
      << texts.size() << " token ids read). ";
  int64_t first = 0;
  if (vocab.count > expected) {
    first = std::max<int64_t>(expected, 0);
    msg << "The first tokens that opened compressed ids from " << first << " on:";
  } else {
    first = std::max<int64_t>(0, vocab.count - kShown);
    msg << "The last tokens that opened compressed ids:";
  }
  for (int64_t c = first; c < std::min<int64_t>(vocab.count, first + kShown); ++c) {
    msg << "\n  compressed " << c << ": "
        << describe(texts, vocab.first_id[static_cast<size_t>(c)]);
  }
  const auto& moved = texts.reassigned_added_tokens();
  if (!moved.empty()) {
    msg << "\n  " << moved.size() << " added tokens get other ids than tokenizer.json says, e.g. "
        << moved[0];
  }
  return invalid_argument(msg.str());
}

}  // namespace deepinfer::tokenizer
