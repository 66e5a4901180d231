// Each rule's minimal DFA, appended to the automaton (automaton_stages.h).
#include <algorithm>

#include "structured/automaton_stages.h"

namespace deepinfer::structured::automaton_stages {
namespace {

// A set partition that can be refined in time proportional to the marked elements (Valmari,
// "Fast brief practical DFA minimization", 2012): the elements of set s are
// elems[first[s] .. past[s]), marked ones first.
class Refinable {
 public:
  void init(int32_t n) {
    num_sets = n > 0 ? 1 : 0;
    elems.resize(n);
    loc.resize(n);
    set_of.assign(n, 0);
    first.assign(std::max(n, 1), 0);
    past.assign(std::max(n, 1), 0);
    for (int32_t i = 0; i < n; ++i) elems[i] = loc[i] = i;
    if (n > 0) past[0] = n;
  }
  // `marked` and `touched` are shared scratch, at least as long as the number of sets.
  void mark(int32_t e, std::vector<int32_t>& marked, std::vector<int32_t>& touched) {
    const int32_t s = set_of[e], i = loc[e], j = first[s] + marked[s];
    elems[i] = elems[j];
    loc[elems[i]] = i;
    elems[j] = e;
    loc[e] = j;
    if (marked[s]++ == 0) touched.push_back(s);
  }
  void split(std::vector<int32_t>& marked, std::vector<int32_t>& touched) {
    while (!touched.empty()) {
      const int32_t s = touched.back();
      touched.pop_back();
      const int32_t j = first[s] + marked[s];
      if (j == past[s]) {
        marked[s] = 0;
        continue;
      }
      const int32_t z = num_sets;
      if (marked[s] <= past[s] - j) {  // the marked part is the smaller: it moves
        first[z] = first[s];
        past[z] = first[s] = j;
      } else {
        past[z] = past[s];
        first[z] = past[s] = j;
      }
      for (int32_t i = first[z]; i < past[z]; ++i) set_of[elems[i]] = z;
      marked[s] = marked[z] = 0;
      ++num_sets;
    }
  }

  int32_t num_sets = 0;
  std::vector<int32_t> elems, loc, set_of, first, past;
};

}  // namespace

// Appends the minimal DFA of `in` (rule r's) to `a` from global id a.num_states on, its
// transitions to `edges` (the rows are packed once every rule is in): partition
// refinement over its transitions, O(m log n) for m transitions (Valmari 2012). States that
// cannot reach acceptance within the rule are dropped first (the automaton's trim would drop
// them anyway). The start stays the rule's first state; the rest are numbered breadth first
// over transitions in label order.
void append_minimal(RuleDfa in, int32_t r, Automaton& a, Transitions& edges) {
  const int32_t n = in.num_states;
  std::vector<int32_t> tail(in.label.size());
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t k = in.begin[s]; k < in.begin[s + 1]; ++k) tail[k] = s;
  }
  std::vector<int32_t>& label = in.label;
  std::vector<int32_t>& head = in.target;
  // The transitions into each state q: adj[adj_begin[q] .. adj_begin[q + 1]).
  std::vector<int32_t> adj, adj_begin(n + 1);
  auto index_heads = [&] {
    const int32_t m = static_cast<int32_t>(head.size());
    adj.resize(m);
    std::fill(adj_begin.begin(), adj_begin.end(), 0);
    for (int32_t t = 0; t < m; ++t) ++adj_begin[head[t] + 1];
    for (int32_t q = 0; q < n; ++q) adj_begin[q + 1] += adj_begin[q];
    std::vector<int32_t> fill(adj_begin.begin(), adj_begin.end() - 1);
    for (int32_t t = 0; t < m; ++t) adj[fill[head[t]]++] = t;
  };
  Refinable blocks;
  blocks.init(n);
  // Co-reachable states (those that reach an accepting one) to the front of set 0, accepting
  // ones first.
  int32_t reached = 0;
  auto reach = [&](int32_t q) {
    const int32_t i = blocks.loc[q];
    if (i >= reached) {
      blocks.elems[i] = blocks.elems[reached];
      blocks.loc[blocks.elems[i]] = i;
      blocks.elems[reached] = q;
      blocks.loc[q] = reached++;
    }
  };
  for (int32_t q = 0; q < n; ++q) {
    if (in.accepting[q]) reach(q);
  }
  const int32_t num_accepting = reached;
  index_heads();
  for (int32_t i = 0; i < reached; ++i) {
    const int32_t q = blocks.elems[i];
    for (int32_t j = adj_begin[q]; j < adj_begin[q + 1]; ++j) reach(tail[adj[j]]);
  }
  const int32_t live = reached;
  auto is_live = [&](int32_t q) { return blocks.loc[q] < live; };
  const int32_t base = a.num_states;
  a.rule_start[r] = base;
  auto add_state = [&](uint8_t accepting) {
    a.accepting.push_back(accepting);
    a.state_rule.push_back(r);
    ++a.num_states;
  };
  if (!is_live(0)) {  // the rule matches nothing
    add_state(0);
    edges.begin.push_back(static_cast<int32_t>(edges.label.size()));
    return;
  }
  {
    size_t k = 0;
    for (size_t t = 0; t < head.size(); ++t) {
      if (is_live(head[t])) {  // then its tail is live too
        tail[k] = tail[t];
        label[k] = label[t];
        head[k] = head[t];
        ++k;
      }
    }
    tail.resize(k);
    label.resize(k);
    head.resize(k);
  }
  const int32_t m = static_cast<int32_t>(tail.size());
  blocks.past[0] = live;
  std::vector<int32_t> marked(std::max(n, m) + 1, 0), touched;
  // Accepting states apart from the rest.
  marked[0] = num_accepting;
  touched.push_back(0);
  blocks.split(marked, touched);
  // Cords: transitions grouped by label (a counting sort, or a comparison sort where the
  // labels' range is much wider than the transitions: references to a few of many rules).
  Refinable cords;
  cords.init(m);
  if (m > 0) {
    const int32_t num_labels = *std::max_element(label.begin(), label.end()) + 1;
    if (num_labels <= 2 * m + 256) {
      std::vector<int32_t> fill(num_labels + 1, 0);
      for (int32_t t = 0; t < m; ++t) ++fill[label[t] + 1];
      for (int32_t l = 0; l < num_labels; ++l) fill[l + 1] += fill[l];
      for (int32_t t = 0; t < m; ++t) cords.elems[fill[label[t]]++] = t;
    } else {
      std::sort(cords.elems.begin(), cords.elems.end(),
                [&](int32_t x, int32_t y) { return label[x] < label[y]; });
    }
    cords.num_sets = 0;
    for (int32_t i = 0; i < m; ++i) {
      const int32_t t = cords.elems[i];
      if (i == 0 || label[t] != label[cords.elems[i - 1]]) {
        if (i > 0) cords.past[cords.num_sets - 1] = i;
        cords.first[cords.num_sets++] = i;
      }
      cords.set_of[t] = cords.num_sets - 1;
      cords.loc[t] = i;
    }
    cords.past[cords.num_sets - 1] = m;
  }
  index_heads();
  for (int32_t b = 1, c = 0; c < cords.num_sets; ++c) {
    for (int32_t i = cords.first[c]; i < cords.past[c]; ++i) {
      blocks.mark(tail[cords.elems[i]], marked, touched);
    }
    blocks.split(marked, touched);
    for (; b < blocks.num_sets; ++b) {
      for (int32_t i = blocks.first[b]; i < blocks.past[b]; ++i) {
        const int32_t q = blocks.elems[i];
        for (int32_t j = adj_begin[q]; j < adj_begin[q + 1]; ++j) {
          cords.mark(adj[j], marked, touched);
        }
      }
      cords.split(marked, touched);
    }
  }
  // One representative per block, and the live transitions of each state (still in label
  // order within a state: the compaction kept their order).
  const int32_t num_blocks = blocks.num_sets;
  std::vector<int32_t> rep(num_blocks, -1), new_id(num_blocks, -1), order;
  for (int32_t i = 0; i < live; ++i) {
    const int32_t q = blocks.elems[i];
    if (rep[blocks.set_of[q]] < 0) rep[blocks.set_of[q]] = q;
  }
  std::vector<int32_t> out_begin(n + 1, 0);
  for (int32_t t = 0; t < m; ++t) ++out_begin[tail[t] + 1];
  for (int32_t q = 0; q < n; ++q) out_begin[q + 1] += out_begin[q];
  new_id[blocks.set_of[0]] = 0;
  order.push_back(blocks.set_of[0]);
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t q = rep[order[k]];
    add_state(in.accepting[q]);
    for (int32_t t = out_begin[q]; t < out_begin[q + 1]; ++t) {
      const int32_t tb = blocks.set_of[head[t]];
      if (new_id[tb] < 0) {
        new_id[tb] = static_cast<int32_t>(order.size());
        order.push_back(tb);
      }
      edges.label.push_back(label[t]);
      edges.target.push_back(base + new_id[tb]);
    }
    edges.begin.push_back(static_cast<int32_t>(edges.label.size()));
  }
}

}  // namespace deepinfer::structured::automaton_stages
