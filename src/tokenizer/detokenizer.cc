// IncrementalDetokenizer: streaming ByteLevel decode that only ever emits whole characters.
//
// Why the deltas concatenate to decode(): decode() repairs the concatenated bytes in one
// left-to-right pass (maximal subparts -> U+FFFD). We emit a prefix of the pending bytes that
// ends before a trailing incomplete-but-valid sequence. That sequence starts with a lead byte,
// and no sequence (valid, or a maximal invalid subpart) that starts earlier can include a lead
// byte, so the one-pass repair is at a sequence boundary there: repairing the prefix and the
// rest separately gives the same text as repairing the whole.
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : data_(tokenizer.data()), skip_special_(skip_special) {}

void IncrementalDetokenizer::add(int32_t id, std::string& out) {
  const detail::TokenizerData& d = *data_;
  if (id < 0 || id >= d.vocab_size()) return;
  const uint8_t f = d.flags[id];
  if (!(f & detail::TokenizerData::kExists)) return;
  if (skip_special_ && (f & detail::TokenizerData::kSpecial)) return;
  pending_.append(d.bytes(id));
  const size_t hold = utf8::incomplete_tail(pending_);
  const size_t ready = pending_.size() - hold;
  if (ready == 0) return;
  utf8::append_lossy(std::string_view(pending_).substr(0, ready), out);
  pending_.erase(0, ready);
}

std::string IncrementalDetokenizer::add(int32_t id) {
  std::string out;
  add(id, out);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  utf8::append_lossy(pending_, out);
  pending_.clear();
  return out;
}

}  // namespace deepinfer::tokenizer
