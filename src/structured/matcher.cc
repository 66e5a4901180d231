// GrammarMatcher: accept/rollback/mask/jump-forward over the Earley chart; see matcher.h.
#include "structured/matcher.h"

#include <algorithm>

namespace deepinfer::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), chart_(&grammar_->automaton()) {
  chart_.reset();
}

void GrammarMatcher::reset() {
  chart_.reset();
  terminated_ = false;
  history_.clear();
}

bool GrammarMatcher::feed(std::string_view bytes) {
  const size_t base = chart_.num_sets();
  for (char c : bytes) {
    if (!chart_.advance(static_cast<uint8_t>(c))) {
      chart_.truncate(base);
      return false;
    }
  }
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenizerInfo& tok = grammar_->tokenizer();
  if (terminated_ || id < 0 || id >= tok.vocab_size()) return false;
  const Snapshot snap{chart_.num_sets(), terminated_};
  const auto& eos = tok.eos_ids();
  if (std::find(eos.begin(), eos.end(), id) != eos.end()) {
    if (!chart_.can_complete()) return false;
    terminated_ = true;
    history_.push_back(snap);
    return true;
  }
  if (tok.is_special(id) || tok.bytes(id).empty()) return false;
  if (!feed(tok.bytes(id))) return false;
  history_.push_back(snap);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  return feed(bytes);
}

bool GrammarMatcher::rollback(int32_t k) {
  if (k < 0 || k > static_cast<int32_t>(history_.size())) return false;
  if (k == 0) return true;
  const Snapshot snap = history_[history_.size() - k];
  history_.resize(history_.size() - k);
  chart_.truncate(snap.num_sets);
  terminated_ = snap.terminated;
  return true;
}

void GrammarMatcher::fill_next_token_bitmask(std::span<uint32_t> words) {
  const TokenizerInfo& tok = grammar_->tokenizer();
  std::fill(words.begin(), words.end(), 0u);
  auto set_bit = [&](int32_t id) { words[id >> 5] |= 1u << (id & 31); };
  if (terminated_) {
    for (int32_t id : tok.eos_ids()) set_bit(id);
    return;
  }
  const Automaton& a = grammar_->automaton();
  leaves_.clear();
  for (const Item& it : chart_.last_set()) {
    if (a.has_bytes[it.state]) leaves_.push_back(it.state);
  }
  std::sort(leaves_.begin(), leaves_.end());
  leaves_.erase(std::unique(leaves_.begin(), leaves_.end()), leaves_.end());
  candidates_.clear();
  for (int32_t s : leaves_) {
    const StateTokens& st = grammar_->tokens(s);
    if (!st.accepted_bits.empty()) {
      for (size_t w = 0; w < words.size(); ++w) words[w] |= st.accepted_bits[w];
    } else {
      for (int32_t id : st.accepted_ids) set_bit(id);
    }
    candidates_.insert(candidates_.end(), st.uncertain.begin(), st.uncertain.end());
  }
  if (leaves_.size() > 1) {
    std::sort(candidates_.begin(), candidates_.end());
    candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
  }
  // Check the uncertain tokens against the real chart, reusing the scan of the prefix shared
  // with the previous candidate (candidates are in sorted byte order).
  const size_t base = chart_.num_sets();
  const std::string* prev = nullptr;
  size_t valid = 0;  // bytes of `prev` scanned successfully (chart has base + valid sets)
  for (int32_t pos : candidates_) {
    const int32_t id = tok.sorted()[pos];
    if ((words[id >> 5] >> (id & 31)) & 1) continue;
    const std::string& s = tok.bytes(id);
    size_t lcp = 0;
    if (prev) {
      const size_t lim = std::min({s.size(), prev->size(), valid});
      while (lcp < lim && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    chart_.truncate(base + lcp);
    size_t d = lcp;
    while (d < s.size() && chart_.advance(static_cast<uint8_t>(s[d]))) ++d;
    if (d == s.size()) set_bit(id);
    prev = &s;
    valid = d;
  }
  chart_.truncate(base);
  if (chart_.can_complete()) {
    for (int32_t id : tok.eos_ids()) set_bit(id);
  }
}

std::string GrammarMatcher::find_jump_forward_string() {
  std::string out;
  if (terminated_) return out;
  const size_t base = chart_.num_sets();
  constexpr size_t kMaxJump = 1 << 14;
  while (out.size() < kMaxJump && !chart_.can_complete()) {
    ByteSet next = chart_.next_bytes();
    if (next.count() != 1) break;
    int b = 0;
    while (!next.test(static_cast<uint8_t>(b))) ++b;
    if (!chart_.advance(static_cast<uint8_t>(b))) break;
    out.push_back(static_cast<char>(b));
  }
  chart_.truncate(base);
  return out;
}

}  // namespace deepinfer::structured
