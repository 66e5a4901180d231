// DeepSeek-V4.1 whole-model numerics vs the committed goldens (tests/data/model/v41_tiny_*,
// made by tests/reference/model_v41/make_goldens.py; README.md there says what each key means).
//
// Bounds:
//   FP32 semantics (official_bf16 weights, FP32 compute with the fake-quant points every V4.1
//     forward has; golden = NeMo AutoModel's forward): max |Δlogit| <= 1e-3 on every row the
//     goldens do not list as fragile (spec §6.7 items 6, 11: a 1e-6 difference can flip a
//     quantizer code or a pick, and the goldens record where their own 1e-6 noise moved the
//     logits). Observed ~1e-5. A prompt whose goldens record a near tie (a top-k gap in
//     (0, 1e-4): v41_tiny_a's 300 tokens, where no seed of 40 was clean) is fragile as a whole:
//     argmax on every robust row and max |Δ| <= kFragilePromptMaxAbs only. Greedy continuations
//     by cached decode equal the goldens' where the goldens list no fragile position.
//   Official semantics (official_quant, golden = official_ref41's official mode): every
//     rounding point is reproduced, so <= 7-token prompts match to 1e-3 (observed ~5e-7); longer
//     ones meet BF16 ties, where a 1-ulp FP32 difference before a rounding flips it now and then
//     (as in V4, model_golden_test.cc): 40 tokens median row <= 0.3 and argmax on >= 85% of the
//     rows no selection gap makes fragile (observed: median 5e-7, all agree); after 268
//     positions (the 300-token tail) flips have accumulated: median <= 1.0, argmax >= 80%.
//   Engram hash rows: exactly the reference's. DSpark draft logits and confidence logits (teacher
//     forced as the goldens are): the FP32 bound, except anchors the goldens list as fragile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "model/deepseek_v41/engram.h"
#include "model_test_util.h"

namespace deepinfer::model::testing {
namespace {

constexpr double kFp32MaxAbs = 1e-3;
constexpr double kFragilePromptMaxAbs = 0.1;
constexpr double kNearTie = 1e-4;
constexpr double kOfficialShortPrompt = 1e-3;
constexpr double kOfficialMedianRow = 0.3;
constexpr double kOfficialArgmaxAgreement = 0.85;
constexpr double kOfficialTailMedianRow = 1.0;
constexpr double kOfficialTailArgmaxAgreement = 0.8;

const char* const kConfigs[] = {"v41_tiny_a", "v41_tiny_b"};
const char* const kPrompts[] = {"len1", "len7", "len40", "len300"};

std::set<int64_t> fragile_rows(const Goldens& g, const char* semantics, const char* prompt) {
  std::set<int64_t> out;
  const auto& f = g.json()["fragile_positions"];
  if (f.contains(semantics) && f[semantics].contains(prompt)) {
    for (const auto& v : f[semantics][prompt]) out.insert(v.get<int64_t>());
  }
  return out;
}

// Whether the goldens record a near tie (0 < gap < 1e-4) in some selection of the prompt.
bool near_tie(const Goldens& g, const char* prompt) {
  const auto& gaps = g.json()["min_selection_gap"]["fp32"][prompt];
  for (const char* kind : {"moe_nonzero", "indexer_nonzero", "candidate_nonzero"}) {
    if (gaps.contains(kind) && gaps[kind].is_number() && gaps[kind].get<double>() < kNearTie) {
      return true;
    }
  }
  return false;
}

// The golden key of a prompt ("ref.len40", or "ref.len300_tail") and its first row.
std::string golden_key(const Goldens& g, const std::string& prefix, const char* prompt) {
  std::string key = prefix + "." + prompt;
  if (!g.has(key) && g.has(key + "_tail")) key += "_tail";
  return key;
}

TEST(ModelV41Golden, Fp32LogitsMatchNemo) {
  for (const char* cfg : kConfigs) {
    Goldens g(cfg);
    ASSERT_TRUE(g.ok());
    auto m = load_test_model(cfg, "official_bf16", opt_ops());
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(m->official_semantics());
    const int64_t V = g.vocab();
    for (const char* p : kPrompts) {
      const std::vector<int32_t> ids = g.prompt(p);
      const std::string key = golden_key(g, "ref", p);
      int64_t rows = 0;
      const std::vector<float> want = g.logits(key, &rows);
      const int64_t T = static_cast<int64_t>(ids.size()), first = T - rows;
      const std::vector<float> all = prefill_all(*m, ids);
      const std::set<int64_t> fragile = fragile_rows(g, "fp32", p);
      const double bound = near_tie(g, p) ? kFragilePromptMaxAbs : kFp32MaxAbs;
      double robust_max = 0, fragile_max = 0;
      int64_t robust = 0, mismatch = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const Diff d = compare_logits(std::span<const float>(all).subspan((first + r) * V, V),
                                      std::span<const float>(want).subspan(r * V, V), V);
        if (fragile.count(first + r)) {
          fragile_max = std::max(fragile_max, d.max_abs);
          continue;
        }
        ++robust;
        robust_max = std::max(robust_max, d.max_abs);
        mismatch += d.argmax_mismatch;
        EXPECT_LE(d.max_abs, bound) << cfg << " " << key << " row " << first + r;
      }
      std::printf("%s fp32 %s: max_abs %.3g over %lld robust rows (argmax mismatch %lld), "
                  "%.3g over %lld fragile rows\n",
                  cfg, key.c_str(), robust_max, static_cast<long long>(robust),
                  static_cast<long long>(mismatch), fragile_max,
                  static_cast<long long>(rows - robust));
      EXPECT_EQ(mismatch, 0) << cfg << " " << key;
    }
  }
}

// transformers main's names (hf_bf16: `model.` prefix, lm_head, no mtp.*, F32 mHC / sinks / gate
// biases, an Engram `scale` of ones, flat text config) describe the same model: same logits, bit
// for bit, as the official names (stored as a recipe over official_bf16, see derived_checkpoint.h).
TEST(ModelV41Golden, TransformersNamesGiveTheSameLogits) {
  Goldens g("v41_tiny_a");
  ASSERT_TRUE(g.ok());
  auto official = load_test_model("v41_tiny_a", "official_bf16", opt_ops());
  auto hf = load_test_model("v41_tiny_a", "hf_bf16", opt_ops());
  ASSERT_NE(official, nullptr);
  ASSERT_NE(hf, nullptr);
  EXPECT_EQ(official->drafter(), DrafterKind::kDSpark);
  EXPECT_EQ(hf->drafter(), DrafterKind::kNone);  // transformers' module tree has no DSpark stages
  for (const char* p : {"len7", "len40"}) {
    const std::vector<int32_t> ids = g.prompt(p);
    const std::vector<float> a = prefill_all(*official, ids), b = prefill_all(*hf, ids);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << p;
  }
}

TEST(ModelV41Golden, GreedyContinuationsByCachedDecode) {
  for (const char* cfg : kConfigs) {
    Goldens g(cfg);
    ASSERT_TRUE(g.ok());
    auto m = load_test_model(cfg, "official_bf16", opt_ops());
    ASSERT_NE(m, nullptr);
    const int64_t V = m->vocab_size();
    for (const char* p : kPrompts) {
      const std::string key = std::string("ref.") + p;
      const auto& c = g.json()["continuations"];
      if (!c.contains(key)) continue;
      if (!c[key]["fragile_positions"].empty()) continue;  // the goldens' own flips
      std::vector<int32_t> want;
      for (const auto& v : c[key]["tokens"]) want.push_back(v.get<int32_t>());
      SequenceCache seq = m->new_sequence();
      auto out = m->extend(seq, g.prompt(p));
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      std::vector<int32_t> got;
      for (size_t i = 0; i < want.size(); ++i) {
        const float* l = out->logits.data();
        const int32_t next = static_cast<int32_t>(std::max_element(l, l + V) - l);
        got.push_back(next);
        out = m->extend(seq, {&next, 1});
        ASSERT_TRUE(out.ok()) << out.status().to_string();
      }
      EXPECT_EQ(got, want) << cfg << " " << key;
    }
  }
}

TEST(ModelV41Golden, EngramHashRowsMatchTheReference) {
  for (const char* cfg : kConfigs) {
    Goldens g(cfg);
    ASSERT_TRUE(g.ok());
    auto c = io::load_model_config(model_dir(cfg, "official_bf16"));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    auto lookup = deepseek_v41::EngramLookup::create(*c, model_dir(cfg, "official_bf16"));
    ASSERT_TRUE(lookup.ok()) << lookup.status().to_string();
    const auto& layout = lookup->layout();
    EXPECT_EQ(layout.compressed_vocab_size, g.json()["engram_compressed_vocab_size"].get<int64_t>());
    for (const char* p : kPrompts) {
      std::vector<int64_t> shape;
      const std::vector<int64_t> want = g.ints(std::string("engram_hash.") + p, &shape);
      ASSERT_EQ(shape.size(), 3u);
      const std::vector<int32_t> ids = g.prompt(p);
      const int64_t T = static_cast<int64_t>(ids.size()), L = shape[1], C = shape[2];
      ASSERT_EQ(L, layout.num_layers());
      ASSERT_EQ(C, layout.columns());
      std::vector<int32_t> comp(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) comp[i] = lookup->compressed_id(ids[i]);
      // In two pieces (a prefill and its continuation through the look-back) and whole.
      for (int64_t j = 0; j < L; ++j) {
        std::vector<int64_t> rows(static_cast<size_t>(T * C));
        const int64_t cut = T / 3;
        deepseek_v41::hash_rows(layout, j, {}, std::span<const int32_t>(comp).first(cut),
                                rows.data());
        deepseek_v41::hash_rows(
            layout, j, std::span<const int32_t>(comp).first(cut),
            std::span<const int32_t>(comp).subspan(static_cast<size_t>(cut)), rows.data() + cut * C);
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t k = 0; k < C; ++k) {
            ASSERT_EQ(rows[static_cast<size_t>(t * C + k)],
                      want[static_cast<size_t>((t * L + j) * C + k)])
                << cfg << " " << p << " position " << t << " layer " << j << " column " << k;
          }
        }
      }
    }
  }
}

// DSpark draft logits and confidences, teacher-forced as the goldens are: the model has run the
// prompt's first A tokens, the anchor is token A, slot j's predecessor is token A + j.
void check_dspark(const char* cfg, const std::string& variant, const std::string& prefix,
                  double max_abs) {
  Goldens g(cfg);
  ASSERT_TRUE(g.ok());
  auto m = load_test_model(cfg, variant, opt_ops());
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->drafter(), DrafterKind::kDSpark);
  const int64_t V = g.vocab();
  for (auto& [prompt, anchors] : g.json()["dspark_anchors"].items()) {
    const std::vector<int32_t> ids = g.prompt(prompt);
    for (const auto& a_json : anchors) {
      const int64_t A = a_json.get<int64_t>();
      const std::string key = prefix + "." + prompt + ".a" + std::to_string(A);
      if (!g.has(key)) continue;
      std::vector<int64_t> shape;
      const std::vector<float> want = g.floats(key, &shape);
      const std::string conf_key =
          (prefix == "dspark" ? std::string("dspark_conf") : "dspark_conf" + prefix.substr(6)) +
          "." + prompt + ".a" + std::to_string(A);
      const std::vector<float> want_conf = g.floats(conf_key);
      const int k = static_cast<int>(shape[0]);
      SequenceCache seq = m->new_sequence();
      if (A > 0) {
        auto out = m->extend(seq, std::span<const int32_t>(ids).first(static_cast<size_t>(A)),
                             LogitsWanted::kNone);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
      }
      const auto forced = std::span<const int32_t>(ids).subspan(static_cast<size_t>(A + 1),
                                                                static_cast<size_t>(k - 1));
      auto d = m->dspark_draft(seq, ids[static_cast<size_t>(A)], k, forced);
      ASSERT_TRUE(d.ok()) << d.status().to_string();
      const Diff diff = compare_logits(d->logits, want, V);
      double conf = 0;
      for (int j = 0; j < k; ++j) {
        conf = std::max(conf, std::fabs(static_cast<double>(d->confidence[static_cast<size_t>(j)]) -
                                        want_conf[static_cast<size_t>(j)]));
      }
      std::printf("%s %s: logits max_abs %.3g (argmax mismatch %lld), confidence %.3g\n", cfg,
                  key.c_str(), diff.max_abs, static_cast<long long>(diff.argmax_mismatch), conf);
      bool fragile = false;  // anchors where the goldens' own 1e-6 noise moved the draft
      const auto& fa = g.json()["fragile_positions"]["fp32_dspark_anchors"];
      if (fa.contains(prompt)) {
        for (const auto& v : fa[prompt]) fragile |= v.get<int64_t>() == A;
      }
      if (max_abs > 0 && !fragile) {
        EXPECT_LE(diff.max_abs, max_abs) << cfg << " " << key;
        EXPECT_LE(conf, max_abs) << cfg << " " << conf_key;
      }
      // The cache is not changed by drafting.
      EXPECT_EQ(seq.length(), A);
    }
  }
}

TEST(ModelV41Golden, DSparkDraftFp32) {
  for (const char* cfg : kConfigs) check_dspark(cfg, "official_bf16", "dspark", kFp32MaxAbs);
}

TEST(ModelV41Golden, OfficialQuantLogits) {
  const char* cfg = "v41_tiny_a";
  Goldens g(cfg);
  ASSERT_TRUE(g.ok());
  auto m = load_test_model(cfg, "official_quant", opt_ops());
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->official_semantics());
  const int64_t V = g.vocab();
  for (const char* p : kPrompts) {
    const std::vector<int32_t> ids = g.prompt(p);
    const std::string key = golden_key(g, "official_quant", p);
    int64_t rows = 0;
    const std::vector<float> want = g.logits(key, &rows);
    const std::vector<float> all = prefill_all(*m, ids);
    const int64_t T = static_cast<int64_t>(ids.size()), first = T - rows;
    const std::set<int64_t> fragile = fragile_rows(g, "official_quant", p);
    std::vector<double> row_max;
    int64_t robust = 0, agree = 0;
    double robust_max = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const Diff d = compare_logits(std::span<const float>(all).subspan((first + r) * V, V),
                                    std::span<const float>(want).subspan(r * V, V), V);
      row_max.push_back(d.max_abs);
      if (fragile.count(first + r)) continue;
      ++robust;
      agree += d.argmax_mismatch == 0;
      robust_max = std::max(robust_max, d.max_abs);
    }
    std::vector<double> sorted = row_max;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2], worst = sorted.back();
    std::printf("%s official_quant %s: max_abs %.3g (robust rows %.3g), median row %.3g; argmax "
                "agrees on %lld of %lld robust rows\n",
                cfg, key.c_str(), worst, robust_max, median, static_cast<long long>(agree),
                static_cast<long long>(robust));
    const bool tail = first > 0;
    if (T <= 7) {
      EXPECT_LE(worst, kOfficialShortPrompt) << key;
    }
    EXPECT_LE(median, tail ? kOfficialTailMedianRow : kOfficialMedianRow) << key;
    EXPECT_GE(static_cast<double>(agree),
              (tail ? kOfficialTailArgmaxAgreement : kOfficialArgmaxAgreement) *
                  static_cast<double>(robust))
        << key;
  }
}

TEST(ModelV41Golden, DSparkDraftOfficialQuant) {
  check_dspark("v41_tiny_a", "official_quant", "dspark_official_quant", 0);
}

}  // namespace
}  // namespace deepinfer::model::testing
