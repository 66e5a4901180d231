// The pre-tokenizer: splits a piece of text (no added tokens in it) into the words that BPE
// encodes one by one.
//
// Hugging Face runs a Sequence of Split(Regex, Isolated) steps with Oniguruma; each step
// applies to every piece the previous step produced (a regex never sees across a piece
// boundary). Here every supported regex is a hand-written scanner over code points and
// their class bits (unicode_classes.h) that returns exactly Oniguruma's leftmost,
// first-alternative-wins, backtracking match:
//
//   kDigits    \p{N}{1,3}
//   kCjkKana   [一-龥぀-ゟ゠-ヿ]+
//   kDeepSeek [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//              ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kGpt2      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//              (ByteLevel with use_regex: true)
//
// Isolated behaviour: the matches and the stretches between them all become pieces; empty
// pieces are dropped. The byte-level mapping that follows is implicit: BPE works on bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

enum class SplitKind : uint8_t { kDigits, kCjkKana, kDeepSeek, kGpt2 };

// The SplitKind whose regex is exactly `pattern` (as written in tokenizer.json), if any.
std::optional<SplitKind> split_kind_for_regex(std::string_view pattern);
extern const char* const kGpt2Pattern;

// Per-thread scratch buffers, reused across calls to avoid allocations.
struct PreTokenizerScratch {
  std::vector<uint32_t> cps;
  std::vector<uint8_t> cls;
  std::vector<uint32_t> offsets;  // byte offset of each code point, plus the end
  std::vector<uint32_t> a, b;     // piece boundaries as [begin, end) code point index pairs
};

struct ByteRange {
  uint32_t begin, end;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<SplitKind> steps) : steps_(std::move(steps)) {}

  // Appends the pieces of `text` (well-formed UTF-8) as byte ranges relative to text.
  void split(std::string_view text, PreTokenizerScratch& scratch,
             std::vector<ByteRange>& out) const;

  const std::vector<SplitKind>& steps() const { return steps_; }

 private:
  std::vector<SplitKind> steps_;
};

}  // namespace deepinfer::tokenizer
