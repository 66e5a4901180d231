// SWA bounded replay at the model level (docs/bounded_replay.md; model/bounded_replay.h), on the
// tiny random V4.1 checkpoints (tests/reference/model_v41/README.md): v41_tiny_a (window 8,
// KV sources 2, 4, 5, upper layers 6 (Reindex inside the candidates) and 7 (Reuse), DSpark
// targets 5, 6, 7) and v41_tiny_b (window 16, sources 0, 3, upper layer 4 (Reindex)).
//
// The oracle is the full prefill (no row skipped) and the receptive field: when the upper layers
// run only from position s, upper layer j (0 = the first) reads exact inputs from s + j·(W − 1)
// on, because a row's K=V is a function of its own input and its attention reads the W rows
// before it plus compressed rows the lower layers made from every token. So, bit for bit (the
// CPU opt backend is batch-invariant: a row's value does not depend on the other rows of its
// step):
//   * the lower layers' whole state (windows, compressed KV, index keys, compressor states,
//     Engram look-back) equals the full prefill's;
//   * upper layer j's window holds no row before s, and its rows from s + j·(W − 1) on equal the
//     full prefill's; the drafter's context rows likewise from the deepest target's horizon;
//   * once keep >= n_upper·(W − 1) + 1 (upper_exact_keep) the last row's logits, every decode
//     step after them and the DSpark drafts equal the full prefill's;
// and rows inside the horizon do differ (the test has teeth). Chunked truncated prefill (chunks
// wholly before the kept suffix, straddling it, inside it; several sequences in one step) equals
// one truncated step. A window replay (encoder side) from position 0 equals the full prefill;
// from a later position it keeps the compressed rows and rebuilds windows that are exact past
// their own horizon.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <string>
#include <vector>

#include "model/bounded_replay.h"
#include "model_test_util.h"

namespace deepinfer::model::testing {
namespace {

constexpr const char* kConfigs[] = {"v41_tiny_a", "v41_tiny_b"};

std::vector<int32_t> test_prompt(const char* cfg, const char* name) {
  Goldens g(cfg);
  EXPECT_TRUE(g.ok());
  return g.ok() ? g.prompt(name) : std::vector<int32_t>{};
}

// A prefill of `ids` whose rows before upper_kept_from(size, keep) skip the upper layers, in
// chunks of `chunk` tokens (0: one step). Returns the last row's logits.
std::vector<float> truncated_prefill(Model& m, SequenceCache& c, const std::vector<int32_t>& ids,
                                     int64_t keep, int64_t chunk = 0) {
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t from = upper_kept_from(n, keep);
  if (chunk <= 0) chunk = n;
  std::vector<float> logits;
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t k = std::min(chunk, n - at);
    const bool last = at + k == n;
    auto out = m.extend(c, {ids.data() + at, static_cast<size_t>(k)},
                        last ? LogitsWanted::kLast : LogitsWanted::kNone, false,
                        upper_skip_rows(at, k, from));
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (!out.ok()) return {};
    if (last) logits = deepinfer::backend::to_vector(out->logits);
  }
  return logits;
}

// Greedy decode of `steps` tokens after `last_logits`: every step's logits, concatenated.
std::vector<float> decode_logits(Model& m, SequenceCache& c, std::vector<float> last_logits,
                                 int steps) {
  const int64_t V = m.vocab_size();
  std::vector<float> all;
  for (int i = 0; i < steps; ++i) {
    const auto next =
        static_cast<int32_t>(std::max_element(last_logits.begin(), last_logits.begin() + V) -
                             last_logits.begin());
    auto out = m.decode(c, next);
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (!out.ok()) return all;
    last_logits = deepinfer::backend::to_vector(out->logits);
    all.insert(all.end(), last_logits.begin(), last_logits.end());
  }
  return all;
}

bool same_row(const float* a, const float* b, int64_t width) {
  return std::memcmp(a, b, static_cast<size_t>(width) * sizeof(float)) == 0;
}

// Rows [first, a.size()) of two rings, bit for bit.
void expect_ring_rows(const RowRing& a, const RowRing& b, int64_t first, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (int64_t r = first; r < a.size(); ++r) {
    EXPECT_TRUE(same_row(a.row(r), b.row(r), a.width())) << what << " row " << r;
  }
}

void expect_list_rows(const PagedRows& a, const PagedRows& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (int64_t r = 0; r < a.size(); ++r) {
    EXPECT_TRUE(same_row(a.row(r), b.row(r), a.width())) << what << " row " << r;
  }
}

// Everything layers [0, upto) keep, bit for bit (the windows from their oldest readable row).
void expect_lower_state(const SequenceCache& a, const SequenceCache& b, size_t upto,
                        const std::string& what) {
  for (size_t l = 0; l < upto; ++l) {
    const LayerCache &x = a.layer(l), &y = b.layer(l);
    const std::string at = what + " layer " + std::to_string(l);
    ASSERT_EQ(x.window.oldest(), y.window.oldest()) << at;
    expect_ring_rows(x.window, y.window, x.window.oldest(), at + " window");
    for (auto [s, t, name] : {std::tuple{&x.comp, &y.comp, "comp"}, {&x.idx, &y.idx, "idx"}}) {
      expect_list_rows(s->rows, t->rows, at + " " + name + " rows");
      if (s->kv.has_storage()) {
        expect_ring_rows(s->kv, t->kv, s->kv.oldest(), at + " " + name + " state kv");
        expect_ring_rows(s->gate, t->gate, s->gate.oldest(), at + " " + name + " state gate");
      }
    }
  }
  const auto ea = a.engram_history(), eb = b.engram_history();
  EXPECT_EQ(std::vector<int32_t>(ea.begin(), ea.end()), std::vector<int32_t>(eb.begin(), eb.end()))
      << what << " Engram look-back";
}

TEST(ModelV41Replay, KeepCoveringThePromptIsTheFullPrefill) {
  for (const char* cfg : kConfigs) {
    auto m = load_test_model(cfg, "official_bf16", opt_ops());
    ASSERT_NE(m, nullptr);
    const std::vector<int32_t> ids = test_prompt(cfg, "len40");
    for (int64_t keep : {int64_t{40}, int64_t{1000}}) {
      SequenceCache full = m->new_sequence(), cut = m->new_sequence();
      const std::vector<float> want = truncated_prefill(*m, full, ids, 1 << 30);
      const std::vector<float> got = truncated_prefill(*m, cut, ids, keep);
      ASSERT_FALSE(want.empty());
      EXPECT_EQ(got, want) << cfg << " keep " << keep;
      EXPECT_EQ(cut.upper_from(), 0);
      EXPECT_EQ(decode_logits(*m, cut, got, 6), decode_logits(*m, full, want, 6)) << cfg;
    }
  }
}

TEST(ModelV41Replay, LowerStateIsTheFullPrefillsAndUpperRowsFollowTheReceptiveField) {
  for (const char* cfg : kConfigs) {
    auto m = load_test_model(cfg, "official_bf16", opt_ops());
    ASSERT_NE(m, nullptr);
    const io::ModelConfig& c = m->config();
    const int64_t W = c.sliding_window;
    const size_t first = first_upper_layer(c), L = c.layers.size();
    ASSERT_GT(first, 0u);
    ASSERT_LT(first, L);
    const std::vector<int32_t> ids = test_prompt(cfg, "len40");
    const auto n = static_cast<int64_t>(ids.size());
    const int64_t keep = 10, s = n - keep;  // inside the horizon of both configs
    SequenceCache full = m->new_sequence(), cut = m->new_sequence();
    const std::vector<float> want = truncated_prefill(*m, full, ids, 1 << 30);
    const std::vector<float> got = truncated_prefill(*m, cut, ids, keep);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(cut.length(), n);
    EXPECT_EQ(cut.upper_from(), s);
    expect_lower_state(cut, full, first, cfg);
    int64_t differing = 0;
    for (size_t l = first; l < L; ++l) {
      const RowRing& x = cut.layer(l).window;
      const RowRing& y = full.layer(l).window;
      const int64_t exact_from = s + static_cast<int64_t>(l - first) * (W - 1);
      EXPECT_EQ(x.oldest(), s) << cfg << " layer " << l << ": skipped rows are not readable";
      EXPECT_EQ(x.size(), n);
      expect_ring_rows(x, y, std::min(exact_from, n), std::string(cfg) + " upper layer " +
                                                          std::to_string(l));
      for (int64_t r = s; r < std::min(exact_from, n); ++r) {
        differing += same_row(x.row(r), y.row(r), x.width()) ? 0 : 1;
      }
    }
    if (L - first > 1) {
      EXPECT_GT(differing, 0) << cfg << ": no row inside the horizon differs";
    }
    // The drafter's context: the deepest target's horizon.
    int64_t ctx_exact = s;
    for (int t : c.dspark.target_layer_ids) {
      if (static_cast<size_t>(t) >= first) {
        ctx_exact = std::max(ctx_exact, s + static_cast<int64_t>(t - first) * (W - 1));
      }
    }
    for (size_t d = 0; d < cut.num_draft_layers(); ++d) {
      EXPECT_EQ(cut.draft_layer(d).window.oldest(), s) << cfg << " draft layer " << d;
      expect_ring_rows(cut.draft_layer(d).window, full.draft_layer(d).window,
                       std::min(ctx_exact, n), std::string(cfg) + " draft layer");
    }
    // Decoding continues from the truncated state.
    const std::vector<float> next = decode_logits(*m, cut, got, 6);
    ASSERT_EQ(next.size(), static_cast<size_t>(6 * m->vocab_size()));
    for (float v : next) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(ModelV41Replay, PastTheHorizonLogitsDecodeAndDraftsAreExact) {
  for (const char* cfg : kConfigs) {
    for (const char* variant : {"official_bf16", "official_quant"}) {
      if (std::string(cfg) == "v41_tiny_b" && std::string(variant) == "official_quant") continue;
      auto m = load_test_model(cfg, variant, opt_ops());
      ASSERT_NE(m, nullptr);
      const int64_t keep = upper_exact_keep(m->config());
      EXPECT_EQ(keep, std::string(cfg) == "v41_tiny_a" ? 2 * 7 + 1 : 15 + 1);
      for (const char* p : {"len40", "len300"}) {
        const std::vector<int32_t> ids = test_prompt(cfg, p);
        SequenceCache full = m->new_sequence(), cut = m->new_sequence();
        const std::vector<float> want = truncated_prefill(*m, full, ids, 1 << 30);
        const std::vector<float> got = truncated_prefill(*m, cut, ids, keep);
        ASSERT_FALSE(got.empty());
        EXPECT_GT(cut.upper_from(), 0);
        EXPECT_EQ(got, want) << cfg << " " << variant << " " << p;
        SequenceCache short_keep = m->new_sequence();
        EXPECT_NE(truncated_prefill(*m, short_keep, ids, keep - 1), want)
            << cfg << " " << p << ": one token less than the horizon should change the logits";
        if (m->drafter() == DrafterKind::kDSpark) {
          const int k = m->config().dspark.block_size;
          auto a = m->dspark_draft(cut, 5, k), b = m->dspark_draft(full, 5, k);
          ASSERT_TRUE(a.ok() && b.ok());
          EXPECT_EQ(a->logits, b->logits) << cfg << " " << p << ": the drafter's context";
          EXPECT_EQ(a->confidence, b->confidence);
        }
        EXPECT_EQ(decode_logits(*m, cut, got, 8), decode_logits(*m, full, want, 8))
            << cfg << " " << variant << " " << p;
      }
    }
  }
}

// Chunks of 7 (wholly before the kept suffix, straddling it, inside it) and of 1, and two
// sequences with different skips in one step, equal one truncated step bit for bit.
TEST(ModelV41Replay, ChunkedAndBatchedEqualOneStep) {
  auto m = load_test_model("v41_tiny_a", "official_bf16", opt_ops());
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> ids = test_prompt("v41_tiny_a", "len40");
  const int64_t keep = 10;
  SequenceCache one = m->new_sequence();
  const std::vector<float> want = truncated_prefill(*m, one, ids, keep);
  ASSERT_FALSE(want.empty());
  const std::vector<float> want_next = decode_logits(*m, one, want, 5);
  for (int64_t chunk : {int64_t{7}, int64_t{1}}) {
    SequenceCache c = m->new_sequence();
    const std::vector<float> got = truncated_prefill(*m, c, ids, keep, chunk);
    EXPECT_EQ(got, want) << "chunks of " << chunk;
    EXPECT_EQ(decode_logits(*m, c, got, 5), want_next) << "chunks of " << chunk;
  }
  // Two sequences in one step: the prompt (skipping 30 rows) next to a 12-token prompt that
  // skips none.
  const std::vector<int32_t> other(ids.begin(), ids.begin() + 12);
  SequenceCache other_alone = m->new_sequence();
  const std::vector<float> other_want = truncated_prefill(*m, other_alone, other, 12);
  SequenceCache a = m->new_sequence(), b = m->new_sequence();
  std::vector<int32_t> tok(ids), pos;
  tok.insert(tok.end(), other.begin(), other.end());
  for (size_t i = 0; i < ids.size(); ++i) pos.push_back(static_cast<int32_t>(i));
  for (size_t i = 0; i < other.size(); ++i) pos.push_back(static_cast<int32_t>(i));
  const SequenceSpan spans[] = {{&a, 0, 40, LogitsWanted::kLast, 30},
                                {&b, 40, 12, LogitsWanted::kLast, 0}};
  StepInputs in{tok, pos, spans};
  StepOutputs out;
  ASSERT_TRUE(m->forward(in, out).ok());
  const int64_t V = m->vocab_size();
  ASSERT_EQ(out.logit_rows, 2);
  EXPECT_EQ(std::vector<float>(out.logits.begin(), out.logits.begin() + V), want);
  EXPECT_EQ(std::vector<float>(out.logits.begin() + V, out.logits.end()), other_want);
  EXPECT_EQ(decode_logits(*m, a, want, 5), want_next);
}

TEST(ModelV41Replay, RefusedInputsLeaveTheCacheAsItWas) {
  auto m = load_test_model("v41_tiny_a", "official_bf16", opt_ops());
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> ids = test_prompt("v41_tiny_a", "len40");
  SequenceCache c = m->new_sequence();
  // Every prompt row's logits, hidden streams, a skip past the span, the logits row skipped.
  EXPECT_FALSE(m->extend(c, ids, LogitsWanted::kAll, false, 5).ok());
  EXPECT_FALSE(m->extend(c, ids, LogitsWanted::kNone, true, 5).ok());
  EXPECT_FALSE(m->extend(c, ids, LogitsWanted::kNone, false, 41).ok());
  EXPECT_FALSE(m->extend(c, ids, LogitsWanted::kLast, false, 40).ok());
  EXPECT_EQ(c.length(), 0);
  EXPECT_TRUE(m->extend(c, ids, LogitsWanted::kNone, false, 40).ok());  // a chunk wholly before

  // keep below the window + the longest draft; a V4 model.
  const io::ModelConfig& cfg = m->config();
  const int k = cfg.dspark.block_size;
  EXPECT_TRUE(check_bounded_replay(cfg, cfg.sliding_window + k, k).ok());
  const Status low = check_bounded_replay(cfg, cfg.sliding_window + k - 1, k);
  EXPECT_FALSE(low.ok());
  EXPECT_NE(low.message().find("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS"), std::string::npos);
  EXPECT_NE(low.message().find("minimum " + std::to_string(cfg.sliding_window + k)),
            std::string::npos)
      << low.message();
  auto v4 = load_test_model("v4_tiny_a", "hf_fp32", opt_ops());
  ASSERT_NE(v4, nullptr);
  const Status st = check_bounded_replay(v4->config(), 1000, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("DeepSeek-V4.1 models only"), std::string::npos) << st.message();
  SequenceCache c4 = v4->new_sequence();
  const std::vector<int32_t> small = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const Status v4_skip = v4->extend(c4, small, LogitsWanted::kLast, false, 3).status();
  EXPECT_EQ(v4_skip.code(), StatusCode::kUnimplemented) << v4_skip.message();
  EXPECT_EQ(c4.length(), 0);
  EXPECT_FALSE(v4->window_replay_state(c4, {}, 0).ok());
}

// Encoder side: a state rebuilt from a snapshot's compressed part by recomputing its last
// tokens (Model::window_replay_state + extend).
TEST(ModelV41Replay, WindowReplayFromZeroIsExactAndLaterKeepsTheCompressedRows) {
  for (const char* cfg : kConfigs) {
    auto m = load_test_model(cfg, "official_bf16", opt_ops());
    ASSERT_NE(m, nullptr);
    const int64_t W = m->config().sliding_window;
    const std::vector<int32_t> ids = test_prompt(cfg, "len40");
    const int64_t h = 40;
    SequenceCache full = m->new_sequence();
    ASSERT_TRUE(m->extend(full, ids, LogitsWanted::kNone).ok());
    const SequenceCache part = full.compressed_part();
    EXPECT_FALSE(part.has_rings());
    EXPECT_LT(part.footprint_bytes(), full.footprint_bytes());
    const int32_t next = 7;
    auto want = m->decode(full, next);
    ASSERT_TRUE(want.ok());
    for (int64_t from : {int64_t{0}, int64_t{24}}) {
      auto st = m->window_replay_state(part, ids, from);
      ASSERT_TRUE(st.ok()) << st.status().message();
      SequenceCache c = std::move(*st);
      EXPECT_EQ(c.length(), from);
      EXPECT_EQ(c.compressed_until(), h);
      ASSERT_TRUE(m->extend(c, {ids.data() + from, static_cast<size_t>(h - from)},
                            LogitsWanted::kNone)
                      .ok());
      EXPECT_EQ(c.window_from(), from);
      // The compressed rows and index keys were taken (the same pages), not made again.
      for (size_t l = 0; l < c.num_layers(); ++l) {
        for (auto [got_rows, part_rows] :
             {std::pair{&c.layer(l).comp.rows, &part.layer(l).comp.rows},
              std::pair{&c.layer(l).idx.rows, &part.layer(l).idx.rows}}) {
          ASSERT_EQ(got_rows->size(), part_rows->size()) << cfg << " layer " << l;
          for (int64_t i = 0; i < got_rows->size(); ++i) {
            EXPECT_EQ(got_rows->row(i), part_rows->row(i)) << cfg << " layer " << l;
          }
        }
      }
      auto got = m->decode(c, next);
      ASSERT_TRUE(got.ok()) << got.status().message();
      if (from == 0) {
        EXPECT_EQ(got->logits, want->logits) << cfg << ": a replay from 0 is the full prefill";
        continue;
      }
      for (float v : got->logits) ASSERT_TRUE(std::isfinite(v));
      // Layer l's window rows are exact from from + l·(W − 1) on (its own receptive field);
      // layer 0's, whose input is the embedding (and Engram), all of them.
      for (size_t l = 0; l < c.num_layers(); ++l) {
        const int64_t exact = from + static_cast<int64_t>(l) * (W - 1);
        if (exact > h) break;
        expect_ring_rows(c.layer(l).window, full.layer(l).window, exact,
                         std::string(cfg) + " replayed layer " + std::to_string(l));
      }
    }
    // A hit that does not close a compression group cannot be replayed.
    SequenceCache odd = m->new_sequence();
    ASSERT_TRUE(m->extend(odd, {ids.data(), 41 - 2}, LogitsWanted::kNone).ok());
    const bool has_ratio2 = std::any_of(m->config().layers.begin(), m->config().layers.end(),
                                        [](const io::LayerSpec& s) { return s.compress_ratio == 2; });
    if (has_ratio2) {
      EXPECT_FALSE(m->window_replay_state(odd.compressed_part(), {ids.data(), 39}, 20).ok());
    }
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
