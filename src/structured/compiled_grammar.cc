// Precompute of the context-independent token sets per scanning state; see compiled_grammar.h.
//
// For each state the byte trie of the sorted vocabulary is walked depth first: a dead prefix
// prunes its whole subtree, and a shared prefix is scanned once. While the walk is in states
// without rule references it is a plain DFA walk (one table lookup per trie node); from the
// first state with references on, it continues on a seeded Earley chart rebuilt along the path.
// First-byte subtrees that several states reach in the same DFA state are walked once and
// shared, and states are spread over the compiler's thread pool.
#include "structured/compiled_grammar.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <functional>
#include <unordered_map>
#include <vector>

#include "structured/earley.h"

namespace deepinfer::structured {
namespace {

// The walk of one first-byte subtree of the trie from DFA state q (in a reference-free rule).
// Many states reach the same q after one byte (every escape and UTF-8 state of a JSON string
// returns to the string's main loop), so these are computed once and shared.
struct SubtreeResult {
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> uncertain;
};
using SubtreeMemo = std::unordered_map<uint64_t, const SubtreeResult*>;

uint64_t subtree_key(int32_t q, int32_t child, bool unc) {
  return (static_cast<uint64_t>(q) << 32) | (static_cast<uint64_t>(child) << 1) | (unc ? 1 : 0);
}

class StateWalker {
 public:
  StateWalker(const Automaton& a, const TokenizerInfo& tok, const SubtreeMemo* memo = nullptr)
      : a_(a), tok_(tok), chart_(&a), memo_(memo) {
    root_child_.fill(-1);
    for (int32_t c = tok.trie()[0].first_child; c >= 0; c = tok.trie()[c].next_sibling) {
      root_child_[tok.trie()[c].byte] = c;
    }
  }

  SubtreeResult run_subtree(int32_t q, int32_t child, bool unc) {
    SubtreeResult r;
    follow_ = &a_.rule_follow[a_.state_rule[q]];
    collect_ = &r.accepted_ids;
    uncertain_.clear();
    const TrieNode& n = tok_.trie()[child];
    seed_ = q;
    accept(n);
    if (n.first_child >= 0) walk_dfa(child, q, a_.accepting[q] != 0, unc, 0);
    r.uncertain = std::move(uncertain_);
    uncertain_.clear();
    collect_ = nullptr;
    return r;
  }

  StateTokens run(int32_t state) {
    follow_ = &a_.rule_follow[a_.state_rule[state]];
    ids_.clear();
    using_bits_ = false;
    uncertain_.clear();
    seed_ = state;
    if (has_refs(state)) {
      chart_.reset_seeded(state);
      popped_.assign(1, chart_.popped(0));
      unc_.assign(1, 0);
      walk(0, 0);
    } else {
      walk_dfa_root(state);
    }
    StateTokens out;
    if (using_bits_) {
      out.accepted_bits = bits_;
    } else {
      out.accepted_ids = ids_;
    }
    out.uncertain = std::move(uncertain_);
    return out;
  }

 private:
  void walk(int32_t node, size_t depth) {
    const auto& trie = tok_.trie();
    for (int32_t c = trie[node].first_child; c >= 0; c = trie[c].next_sibling) {
      const TrieNode& n = trie[c];
      const bool unc = unc_[depth] || (popped_[depth] && follow_->test(n.byte));
      if (!chart_.advance(n.byte)) {
        if (unc) {
          for (int32_t p = n.sub_lo; p < n.sub_hi; ++p) uncertain_.push_back(p);
        }
        continue;
      }
      accept(n);
      popped_.resize(depth + 1);
      unc_.resize(depth + 1);
      popped_.push_back(chart_.popped(depth + 1));
      unc_.push_back(unc);
      walk(c, depth + 1);
      chart_.truncate(depth + 1);
    }
  }

  // A rule without references is a plain DFA: one item per set, so skip the chart. A pop is
  // reaching an accepting state (the rule may end there).
  void walk_dfa(int32_t node, int32_t state, bool popped, bool unc_in, size_t depth) {
    const auto& trie = tok_.trie();
    for (int32_t c = trie[node].first_child; c >= 0; c = trie[c].next_sibling) {
      const TrieNode& n = trie[c];
      const bool unc = unc_in || (popped && follow_->test(n.byte));
      const int32_t next = a_.next(state, n.byte);
      if (next < 0) {
        if (unc) {
          for (int32_t p = n.sub_lo; p < n.sub_hi; ++p) uncertain_.push_back(p);
        }
        continue;
      }
      accept(n);
      if (n.first_child >= 0) step_dfa(c, next, unc, depth);
    }
  }

  // Only the first bytes that can matter are visited: those with a transition and, where the
  // rule may end (popped), those that may follow it (uncertain); the rest are rejected.
  void walk_dfa_root(int32_t state) {
    const bool popped = a_.accepting[state] != 0;
    ByteSet first = a_.scan_bytes[state];
    if (popped) first |= *follow_;
    for (int w = 0; w < 4; ++w) {
      for (uint64_t bits = first.words[w]; bits; bits &= bits - 1) {
        const int32_t c = root_child_[w * 64 + std::countr_zero(bits)];
        if (c >= 0) walk_root_child(state, c, popped);
      }
    }
  }

  void walk_root_child(int32_t state, int32_t c, bool popped) {
    const TrieNode& n = tok_.trie()[c];
    const bool unc = popped && follow_->test(n.byte);
    const int32_t q = a_.next(state, n.byte);
    if (q >= 0 && memo_ && !memo_->empty()) {
      auto it = memo_->find(subtree_key(q, c, unc));
      if (it != memo_->end()) {
        for (int32_t id : it->second->accepted_ids) add_id(id);
        uncertain_.insert(uncertain_.end(), it->second->uncertain.begin(),
                          it->second->uncertain.end());
        return;
      }
    }
    if (q < 0) {
      if (unc) {
        for (int32_t p = n.sub_lo; p < n.sub_hi; ++p) uncertain_.push_back(p);
      }
      return;
    }
    accept(n);
    if (n.first_child >= 0) step_dfa(c, q, unc, 0);
  }

  bool has_refs(int32_t state) const { return a_.ref_begin[state + 1] > a_.ref_begin[state]; }

  // Continues below trie node c (at depth + 1, DFA state q): plain DFA while the state has no
  // references, else an Earley chart rebuilt from the seed along the path so far.
  void step_dfa(int32_t c, int32_t q, bool unc, size_t depth) {
    const TrieNode& n = tok_.trie()[c];
    if (path_.size() <= depth) path_.resize(depth + 1);
    path_[depth] = n.byte;
    if (!has_refs(q)) {
      walk_dfa(c, q, a_.accepting[q] != 0, unc, depth + 1);
      return;
    }
    chart_.reset_seeded(seed_);
    for (size_t k = 0; k <= depth; ++k) chart_.advance(path_[k]);
    popped_.assign(depth + 2, 0);
    unc_.assign(depth + 2, 0);
    popped_[depth + 1] = chart_.popped(depth + 1);
    unc_[depth + 1] = unc;
    walk(c, depth + 1);
  }

  void accept(const TrieNode& n) {
    if (collect_) {
      for (int32_t p = n.end_lo; p < n.end_hi; ++p) collect_->push_back(tok_.sorted()[p]);
      return;
    }
    for (int32_t p = n.end_lo; p < n.end_hi; ++p) add_id(tok_.sorted()[p]);
  }

  // Accepted ids: a list while short (most states accept few tokens), a bitmask once long.
  void add_id(int32_t id) {
    if (using_bits_) {
      bits_[id >> 5] |= 1u << (id & 31);
      return;
    }
    ids_.push_back(id);
    if (static_cast<int32_t>(ids_.size()) * 32 > tok_.mask_words()) {
      using_bits_ = true;
      bits_.assign(tok_.mask_words(), 0);
      for (int32_t x : ids_) bits_[x >> 5] |= 1u << (x & 31);
    }
  }

  const Automaton& a_;
  const TokenizerInfo& tok_;
  Chart chart_;
  const SubtreeMemo* memo_ = nullptr;
  std::array<int32_t, 256> root_child_;  // the trie's first-level node of each byte, or -1
  int32_t seed_ = -1;
  std::vector<uint8_t> path_;
  std::vector<int32_t>* collect_ = nullptr;
  const ByteSet* follow_ = nullptr;
  std::vector<uint32_t> bits_;
  std::vector<int32_t> ids_;
  bool using_bits_ = false;
  std::vector<int32_t> uncertain_;
  std::vector<uint8_t> popped_;
  std::vector<uint8_t> unc_;
};

// Groups the states whose token sets are necessarily equal. A reference-free state's walk of
// the vocabulary depends only on what its rule's DFA does over the next `depth` bytes (no token
// is longer), on which states there accept and on the rule's FOLLOW set, until it reaches a
// state with references (then it goes on in an Earley chart that is the same for both, given
// the same state and the same path). So: states with references are groups of their own, the
// others start grouped by (accepting, FOLLOW) and are refined `depth` times by their
// transitions' (class, group of target) lists (Moore's refinement, bounded; it stops early once
// stable). Each round is linear in states and transitions; where depth x states would pass
// kMaxGroupingWork, every state is its own group (the walks are then done one by one, as
// before grouping). Returns the group of every state.
inline constexpr int64_t kMaxGroupingWork = 16'000'000;

std::vector<int32_t> group_alike_states(const Automaton& a, int32_t depth) {
  const int32_t n = a.num_states;
  const int32_t nc = a.num_classes;
  std::vector<int32_t> group(n);
  if (static_cast<int64_t>(depth) * n > kMaxGroupingWork) {
    for (int32_t s = 0; s < n; ++s) group[s] = s;
    return group;
  }
  // Each state's byte transitions (class, target), from the packed rows.
  std::vector<int32_t> begin(n + 1, 0);
  std::vector<std::pair<int32_t, int32_t>> moves;
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t c = 0; c < nc; ++c) {
      const TransitionSlot& slot = a.slots[static_cast<size_t>(a.row_base[s]) + c];
      if (slot.owner == s) moves.push_back({c, slot.target});
    }
    begin[s + 1] = static_cast<int32_t>(moves.size());
  }
  auto has_refs = [&](int32_t s) { return a.ref_begin[s + 1] > a.ref_begin[s]; };
  auto mix = [](uint64_t h, uint64_t x) {
    h = (h ^ x) * 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 29);
  };
  // Numbers states by key: equal keys (by `hash` and then `same`) get one group id.
  std::vector<int32_t> table(std::bit_ceil(static_cast<size_t>(n) * 2 + 2));
  std::vector<uint64_t> hash(n);
  std::vector<int32_t> rep, next(n);
  auto number = [&](auto&& same) {
    std::fill(table.begin(), table.end(), -1);
    rep.clear();
    const size_t mask = table.size() - 1;
    for (int32_t s = 0; s < n; ++s) {
      for (size_t slot = hash[s] & mask;; slot = (slot + 1) & mask) {
        if (table[slot] < 0) {
          table[slot] = static_cast<int32_t>(rep.size());
          next[s] = static_cast<int32_t>(rep.size());
          rep.push_back(s);
          break;
        }
        const int32_t r = rep[table[slot]];
        if (hash[r] == hash[s] && same(r, s)) {
          next[s] = table[slot];
          break;
        }
      }
    }
    group.swap(next);
    return static_cast<int32_t>(rep.size());
  };
  for (int32_t s = 0; s < n; ++s) {
    uint64_t h = has_refs(s) ? mix(1, static_cast<uint64_t>(s)) : mix(2, a.accepting[s]);
    if (!has_refs(s)) {
      for (uint64_t w : a.rule_follow[a.state_rule[s]].words) h = mix(h, w);
    }
    hash[s] = h;
  }
  int32_t num_groups = number([&](int32_t r, int32_t s) {
    if (has_refs(r) || has_refs(s)) return r == s;
    return a.accepting[r] == a.accepting[s] &&
           a.rule_follow[a.state_rule[r]] == a.rule_follow[a.state_rule[s]];
  });
  for (int32_t round = 0; round < depth; ++round) {
    for (int32_t s = 0; s < n; ++s) {
      uint64_t h = mix(3, static_cast<uint64_t>(group[s]));
      if (!has_refs(s)) {
        for (int32_t k = begin[s]; k < begin[s + 1]; ++k) {
          h = mix(h, (static_cast<uint64_t>(moves[k].first) << 32) |
                         static_cast<uint32_t>(group[moves[k].second]));
        }
      }
      hash[s] = h;
    }
    // (`group` still holds the previous round's groups while the new ones are numbered.)
    const int32_t refined = number([&](int32_t r, int32_t s) {
      if (group[r] != group[s]) return false;
      if (has_refs(r) || has_refs(s)) return r == s;
      if (begin[r + 1] - begin[r] != begin[s + 1] - begin[s]) return false;
      for (int32_t i = 0; i < begin[r + 1] - begin[r]; ++i) {
        const auto [cr, tr] = moves[begin[r] + i];
        const auto [cs, ts] = moves[begin[s] + i];
        if (cr != cs || group[tr] != group[ts]) return false;
      }
      return true;
    });
    if (refined == num_groups) break;  // stable: more rounds split nothing
    num_groups = refined;
  }
  return group;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Expected<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::compile(
    const Grammar& grammar, std::shared_ptr<const TokenizerInfo> tokenizer, ThreadPool* pool) {
  auto t0 = std::chrono::steady_clock::now();
  auto out = std::make_shared<CompiledGrammar>();
  DI_ASSIGN_OR_RETURN(out->automaton_, build_automaton(grammar));
  out->stats_.automaton_ms = ms_since(t0);
  auto t1 = std::chrono::steady_clock::now();
  out->tokenizer_ = std::move(tokenizer);
  const Automaton& a = out->automaton_;
  const TokenizerInfo& tok = *out->tokenizer_;
  // One walk per group of alike scanning states (group_alike_states), over the longest token.
  int32_t max_token_bytes = 0;
  for (int32_t id : tok.sorted()) {
    max_token_bytes = std::max(max_token_bytes, static_cast<int32_t>(tok.bytes(id).size()));
  }
  const std::vector<int32_t> group = group_alike_states(a, max_token_bytes);
  out->token_set_.assign(a.num_states, 0);
  out->token_sets_.resize(1);  // 0: no tokens
  std::vector<int32_t> set_of_group(a.num_states, -1);
  std::vector<int32_t> scan_states;  // one per group: the state its walk starts from
  int64_t num_scan = 0;
  for (int32_t s = 0; s < a.num_states; ++s) {
    if (!a.has_bytes[s]) continue;
    ++num_scan;
    if (set_of_group[group[s]] < 0) {
      set_of_group[group[s]] = static_cast<int32_t>(scan_states.size()) + 1;
      scan_states.push_back(s);
    }
    out->token_set_[s] = set_of_group[group[s]];
  }
  out->token_sets_.resize(scan_states.size() + 1);
  auto parallel = [&](int64_t count, const std::function<void(int64_t, int64_t)>& fn) {
    if (pool && pool->size() > 1 && count > 1) {
      pool->parallel_for(count, fn, 1);
    } else {
      fn(0, count);
    }
  };
  // Shared first-byte subtrees: (state after one byte, trie child) pairs that two or more
  // reference-free scanning states reach, over subtrees big enough to be worth it.
  std::unordered_map<uint64_t, int32_t> key_count;
  std::array<int32_t, 256> big_root_child;  // first-level trie nodes over 64 tokens, or -1
  big_root_child.fill(-1);
  for (int32_t c = tok.trie()[0].first_child; c >= 0; c = tok.trie()[c].next_sibling) {
    if (tok.trie()[c].sub_hi - tok.trie()[c].sub_lo >= 64) big_root_child[tok.trie()[c].byte] = c;
  }
  for (int32_t s : scan_states) {
    if (a.ref_begin[s + 1] > a.ref_begin[s]) continue;
    const bool popped = a.accepting[s] != 0;
    const ByteSet& follow = a.rule_follow[a.state_rule[s]];
    const ByteSet& first = a.scan_bytes[s];
    for (int w = 0; w < 4; ++w) {
      for (uint64_t bits = first.words[w]; bits; bits &= bits - 1) {
        const int32_t c = big_root_child[w * 64 + std::countr_zero(bits)];
        if (c < 0) continue;
        const TrieNode& node = tok.trie()[c];
        const int32_t q = a.next(s, node.byte);
        if (a.ref_begin[q + 1] == a.ref_begin[q])
          ++key_count[subtree_key(q, c, popped && follow.test(node.byte))];
      }
    }
  }
  std::vector<uint64_t> shared_keys;
  for (auto [key, count] : key_count) {
    if (count >= 2) shared_keys.push_back(key);
  }
  std::vector<SubtreeResult> shared(shared_keys.size());
  parallel(static_cast<int64_t>(shared_keys.size()), [&](int64_t begin, int64_t end) {
    StateWalker walker(a, tok);
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t k = shared_keys[i];
      shared[i] = walker.run_subtree(static_cast<int32_t>(k >> 32),
                                     static_cast<int32_t>((k & 0xFFFFFFFFu) >> 1), k & 1);
    }
  });
  SubtreeMemo memo;
  for (size_t i = 0; i < shared_keys.size(); ++i) memo.emplace(shared_keys[i], &shared[i]);
  // Each state is independent; chunks of states run on the pool (one walker per chunk).
  auto run = [&](int64_t begin, int64_t end) {
    StateWalker walker(a, tok, &memo);
    for (int64_t i = begin; i < end; ++i) out->token_sets_[i + 1] = walker.run(scan_states[i]);
  };
  const int64_t n = static_cast<int64_t>(scan_states.size());
  parallel(n, run);
  for (int32_t s = 0; s < a.num_states; ++s) {
    out->stats_.num_uncertain += static_cast<int64_t>(out->tokens(s).uncertain.size());
  }
  out->stats_.num_scan_states = static_cast<int32_t>(num_scan);
  out->stats_.num_token_sets = static_cast<int32_t>(n);
  out->stats_.num_states = a.num_states;
  out->stats_.masks_ms = ms_since(t1);
  return std::shared_ptr<const CompiledGrammar>(std::move(out));
}

}  // namespace deepinfer::structured
