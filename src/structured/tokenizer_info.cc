// TokenizerInfo: vocabulary bytes, special/EOS ids and the sorted-token byte trie.
#include "structured/tokenizer_info.h"

#include <algorithm>

namespace deepinfer::structured {

std::shared_ptr<const TokenizerInfo> TokenizerInfo::from_vocab(std::vector<std::string> token_bytes,
                                                               std::vector<int32_t> special_ids,
                                                               std::vector<int32_t> eos_ids) {
  auto info = std::make_shared<TokenizerInfo>();
  const int32_t n = static_cast<int32_t>(token_bytes.size());
  info->bytes_ = std::move(token_bytes);
  info->special_.assign(n, 0);
  for (int32_t id : special_ids) {
    if (id >= 0 && id < n) info->special_[id] = 1;
  }
  for (int32_t id : eos_ids) {
    if (id >= 0 && id < n) {
      info->special_[id] = 1;
      info->eos_ids_.push_back(id);
    }
  }
  for (int32_t id = 0; id < n; ++id) {
    if (!info->special_[id] && !info->bytes_[id].empty()) info->sorted_.push_back(id);
  }
  std::stable_sort(info->sorted_.begin(), info->sorted_.end(),
                   [&](int32_t a, int32_t b) { return info->bytes_[a] < info->bytes_[b]; });
  info->pos_.assign(n, -1);
  for (size_t p = 0; p < info->sorted_.size(); ++p)
    info->pos_[info->sorted_[p]] = static_cast<int32_t>(p);

  // Trie: sorted order makes every subtree a contiguous range, and a token that ends at a
  // node sorts before the longer tokens below it.
  auto& trie = info->trie_;
  trie.push_back(TrieNode{});
  std::vector<int32_t> path{0};  // path[d] = node at depth d for the previous token
  std::vector<int32_t> last_child{-1};
  const std::string* prev = nullptr;
  for (size_t p = 0; p < info->sorted_.size(); ++p) {
    const std::string& s = info->bytes_[info->sorted_[p]];
    size_t lcp = 0;
    if (prev) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    path.resize(lcp + 1);
    last_child.resize(lcp + 1);
    for (size_t d = lcp; d < s.size(); ++d) {
      int32_t id = static_cast<int32_t>(trie.size());
      TrieNode node;
      node.byte = static_cast<uint8_t>(s[d]);
      node.sub_lo = static_cast<int32_t>(p);
      node.end_lo = node.end_hi = -1;
      trie.push_back(node);
      int32_t parent = path[d];
      if (last_child[d] < 0) {
        trie[parent].first_child = id;
      } else {
        trie[last_child[d]].next_sibling = id;
      }
      last_child[d] = id;
      path.push_back(id);
      last_child.push_back(-1);
    }
    TrieNode& leaf = trie[path[s.size()]];
    if (leaf.end_lo < 0) leaf.end_lo = static_cast<int32_t>(p);
    leaf.end_hi = static_cast<int32_t>(p + 1);
    for (size_t d = 0; d <= s.size(); ++d) trie[path[d]].sub_hi = static_cast<int32_t>(p + 1);
    prev = &s;
  }
  for (TrieNode& node : trie) {
    if (node.end_lo < 0) node.end_lo = node.end_hi = 0;
  }
  return info;
}

std::shared_ptr<const TokenizerInfo> TokenizerInfo::from_tokenizer(
    const tokenizer::Tokenizer& tok) {
  const int32_t n = tok.vocab_size();
  std::vector<std::string> bytes(n);
  std::vector<int32_t> special;
  for (int32_t id = 0; id < n; ++id) {
    bytes[id] = std::string(tok.id_to_bytes(id));
    if (tok.is_special(id)) special.push_back(id);
  }
  std::vector<int32_t> eos;
  if (auto e = tok.eos_id()) eos.push_back(*e);
  return from_vocab(std::move(bytes), std::move(special), std::move(eos));
}

}  // namespace deepinfer::structured
