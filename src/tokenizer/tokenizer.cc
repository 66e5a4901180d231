// Tokenizer: encode, decode and the accessors (loading is in tokenizer_load.cc).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <memory>

#include "tokenizer/tokenizer_data.h"
#include "tokenizer/utf8.h"
#include "tokenizer/word_cache.h"

namespace deepinfer::tokenizer {
namespace detail {

ThreadState& thread_state(uint64_t uid) {
  // The caches of this thread's most recently used tokenizers, most recent first.
  constexpr size_t kMaxInstances = 4;
  thread_local std::array<std::unique_ptr<ThreadState>, kMaxInstances> states;
  size_t k = 0;
  while (k < kMaxInstances && states[k] && states[k]->uid != uid) ++k;
  if (k == kMaxInstances) {
    k = kMaxInstances - 1;
    states[k].reset();  // evict the least recently used
  }
  if (!states[k]) {
    states[k] = std::make_unique<ThreadState>();
    states[k]->uid = uid;
  }
  std::rotate(states.begin(), states.begin() + static_cast<std::ptrdiff_t>(k),
              states.begin() + static_cast<std::ptrdiff_t>(k) + 1);
  return *states[0];
}

const ByteLevelMap& ByteLevelMap::get() {
  static const ByteLevelMap map = [] {
    ByteLevelMap m;
    for (auto& v : m.cp_to_byte) v = -1;
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? b : 256 + extra++;
      m.byte_to_cp[b] = cp;
      m.cp_to_byte[cp] = static_cast<int16_t>(b);
    }
    return m;
  }();
  return map;
}

}  // namespace detail

void Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& out,
                            bool allow_special) const {
  const detail::TokenizerData& d = *data_;
  detail::ThreadState& st = detail::thread_state(d.uid);
  if (!utf8::is_valid(text)) {
    st.repaired.clear();
    utf8::append_lossy(text, st.repaired);
    text = st.repaired;
  }
  st.segments.clear();
  d.added.split(text, allow_special, st.segments);
  for (const Segment& seg : st.segments) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
      continue;
    }
    std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    st.pieces.clear();
    d.pre.split(part, st.pre, st.pieces);
    for (const ByteRange& r : st.pieces) {
      std::string_view word = part.substr(r.begin, r.end - r.begin);
      if (word.size() == 1) {  // a single byte never merges: skip the cache
        d.bpe.encode_word(word, st.bpe, out);
        continue;
      }
      const uint64_t h = detail::hash_bytes(word);
      uint32_t n = 0;
      if (const int32_t* cached = st.cache.find(word, h, &n)) {
        out.insert(out.end(), cached, cached + n);
        continue;
      }
      const size_t before = out.size();
      d.bpe.encode_word(word, st.bpe, out);
      st.cache.insert(word, h, out.data() + before, static_cast<uint32_t>(out.size() - before));
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  encode_into(text, out, allow_special);
  return out;
}

std::vector<std::string> Tokenizer::pieces(std::string_view text, bool allow_special) const {
  const detail::TokenizerData& d = *data_;
  std::string repaired;
  if (!utf8::is_valid(text)) {
    utf8::append_lossy(text, repaired);
    text = repaired;
  }
  std::vector<Segment> segments;
  d.added.split(text, allow_special, segments);
  std::vector<std::string> out;
  PreTokenizerScratch scratch;
  for (const Segment& seg : segments) {
    std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    if (seg.id >= 0) {
      out.emplace_back(part);
      continue;
    }
    std::vector<ByteRange> ranges;
    d.pre.split(part, scratch, ranges);
    for (const ByteRange& r : ranges) out.emplace_back(part.substr(r.begin, r.end - r.begin));
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const detail::TokenizerData& d = *data_;
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= d.vocab_size()) continue;
    const uint8_t f = d.flags[id];
    if (!(f & detail::TokenizerData::kExists)) continue;
    if (skip_special && (f & detail::TokenizerData::kSpecial)) continue;
    bytes.append(d.bytes(id));
  }
  if (utf8::is_valid(bytes)) return bytes;
  std::string out;
  utf8::append_lossy(bytes, out);
  return out;
}

int32_t Tokenizer::vocab_size() const { return data_->vocab_size(); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  int32_t id = data_->token_ids.find(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= data_->vocab_size() || !(data_->flags[id] & detail::TokenizerData::kExists)) {
    return std::nullopt;
  }
  return std::string(data_->token(id));
}

std::string_view Tokenizer::id_to_bytes(int32_t id) const {
  if (id < 0 || id >= data_->vocab_size()) return {};
  return data_->bytes(id);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < data_->vocab_size() &&
         (data_->flags[id] & detail::TokenizerData::kSpecial);
}

std::optional<int32_t> Tokenizer::bos_id() const { return data_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return data_->eos; }
const std::string& Tokenizer::path() const { return data_->path; }

}  // namespace deepinfer::tokenizer
