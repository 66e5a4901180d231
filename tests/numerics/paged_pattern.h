// Scripted checks of the paged KV cache (model/cache.h), shared by the CPU test
// (model_cache_test.cc) and its GPU twin (cuda/model_cuda_test.cc): what a model computes
// must not depend on how its rows are paged, and a prefix snapshot that shares pages with the
// live sequence must leave both exactly where recomputation would.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace deepinfer::model::testing {

inline std::vector<int32_t> paged_ids(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return v;
}

// Every logits row of 150 tokens run as chunks of 70 and 37 and then 43 decodes, with pages of
// `page_tokens` source tokens. On a failed step, sets *error.
inline std::vector<float> paged_run(Model& m, int page_tokens, std::string* error) {
  const std::vector<int32_t> ids = paged_ids(150, m.vocab_size(), 3);
  SequenceCache seq = m.new_sequence(CacheOptions{16, page_tokens});
  std::vector<float> all;
  auto take = [&](const Expected<StepOutputs>& out) {
    if (!out.ok()) {
      if (error->empty()) *error = out.status().to_string();
      return;
    }
    all.insert(all.end(), out->logits.begin(), out->logits.end());
  };
  take(m.extend(seq, std::span<const int32_t>(ids).subspan(0, 70), LogitsWanted::kAll));
  take(m.extend(seq, std::span<const int32_t>(ids).subspan(70, 37), LogitsWanted::kAll));
  for (size_t i = 107; i < ids.size(); ++i) take(m.decode(seq, ids[i]));
  return all;
}

struct SnapshotRun {
  std::string error;
  int64_t copied_bytes = 0;             // pages the snapshot took (backend memory newly in use)
  int64_t ring_bytes = 0;               // the live sequence's ring pages: what a snapshot must copy
  int64_t held_bytes = 0;               // every page the live sequence holds
  std::vector<float> live, live_fresh;  // the live sequence's tail vs recomputed
  std::vector<float> restored, restored_fresh;  // a restore of the snapshot, another tail
  std::vector<float> restored_again;            // a second restore given the live tail
};

// 90 prefix tokens in pages of 16 tokens (the boundary inside a shared, partly filled page),
// a snapshot (SequenceCache::clone, what the engine's prefix cache keeps), then the live
// sequence and restores of the snapshot continue with different tails, interleaved so that a
// holder writing into a page another holder still reads would show.
inline SnapshotRun snapshot_run(Model& m) {
  SnapshotRun r;
  const CacheOptions opts{16, 16};
  const int64_t V = m.vocab_size();
  const std::vector<int32_t> prefix = paged_ids(90, V, 5);
  const std::vector<int32_t> tail_a = paged_ids(30, V, 6), tail_b = paged_ids(25, V, 7);
  auto extend = [&](SequenceCache& seq, const std::vector<int32_t>& ids) {
    auto out = m.extend(seq, ids, LogitsWanted::kAll);
    if (!out.ok()) {
      if (r.error.empty()) r.error = out.status().to_string();
      return std::vector<float>{};
    }
    return deepinfer::backend::to_vector(out->logits);
  };
  // A tail in two chunks: the second reads rows the first wrote into the shared page.
  const std::vector<int32_t> a1(tail_a.begin(), tail_a.begin() + 15),
      a2(tail_a.begin() + 15, tail_a.end());
  auto fresh = [&](std::vector<const std::vector<int32_t>*> chunks) {
    SequenceCache seq = m.new_sequence(opts);
    extend(seq, prefix);
    std::vector<float> all;
    for (const auto* c : chunks) {
      const std::vector<float> l = extend(seq, *c);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  auto append = [](std::vector<float>& to, const std::vector<float>& l) {
    to.insert(to.end(), l.begin(), l.end());
  };
  SequenceCache live = m.new_sequence(opts);
  extend(live, prefix);
  const int64_t before = m.cache_memory().bytes_in_use;
  SequenceCache snap = live.clone();
  r.copied_bytes = m.cache_memory().bytes_in_use - before;
  r.held_bytes = live.page_bytes();
  for (size_t i = 0; i < live.num_layers() + live.num_draft_layers(); ++i) {
    const size_t n = live.num_layers();
    const LayerCache& l = i < n ? live.layer(i) : live.draft_layer(i - n);
    for (const RowRing* ring : {&l.window, &l.comp.kv, &l.comp.gate, &l.idx.kv, &l.idx.gate}) {
      r.ring_bytes += ring->page_bytes();
    }
  }
  // Interleaved: a restore writes its own rows between the live sequence's two chunks.
  append(r.live, extend(live, a1));
  SequenceCache restored = snap.clone();
  r.restored = extend(restored, tail_b);
  append(r.live, extend(live, a2));
  r.live_fresh = fresh({&a1, &a2});
  r.restored_fresh = fresh({&tail_b});
  SequenceCache again = snap.clone();
  append(r.restored_again, extend(again, a1));
  append(r.restored_again, extend(again, a2));
  return r;
}

}  // namespace deepinfer::model::testing
