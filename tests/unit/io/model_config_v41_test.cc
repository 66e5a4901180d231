// DeepSeek-V4.1 config.json -> ModelConfig: the released composite layout (text_config), the
// flat text config, the official spelling, the CSA2 schedule derived from them (roles, sources,
// candidates, Engram, DSpark), the KV size of spec §6.3, and a message naming the field for
// every schedule that cannot run.
//
// tests/data/io/v41_flash_config.json is the released Flash text configuration as spec §1.3 /
// §6 (transformers' DeepseekV41TextConfig defaults) gives it, in the composite layout the
// released checkpoint's config.json has (quantization_config at the top, 32x32 FP8 tiles).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "io/expected_tensors.h"
#include "io/inspect_report.h"
#include "io/model_config.h"

namespace deepinfer::io {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string source_dir() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return d != nullptr ? d : DEEPINFER_TEST_SOURCE_DIR;
}

json released() {
  std::ifstream in(source_dir() + "/tests/data/io/v41_flash_config.json");
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

Expected<ModelConfig> parse(const json& j) { return parse_model_config(j.dump(), "config.json"); }

std::string error_of(const json& j) {
  auto c = parse(j);
  EXPECT_FALSE(c.ok()) << "parsed unexpectedly";
  return c.ok() ? std::string() : c.status().message();
}

// A tiny composite config whose text section the tests edit.
json tiny(const json& text_overrides) {
  json text = {{"hidden_size", 64},        {"num_hidden_layers", 6},   {"num_attention_heads", 4},
               {"head_dim", 64},           {"qk_rope_head_dim", 16},   {"q_lora_rank", 32},
               {"o_groups", 2},            {"o_lora_rank", 32},        {"moe_intermediate_size", 32},
               {"n_routed_experts", 4},    {"num_experts_per_tok", 2}, {"vocab_size", 256},
               {"index_n_heads", 4},       {"index_head_dim", 32},     {"index_topk", 6},
               {"sliding_window", 8},      {"num_nextn_predict_layers", 0},
               {"compress_ratios", {0, 2, 2, 1, 1, 1}},
               {"kv_source_layer_ids", {1, 3}},
               {"index_source_layer_ids", {1, 3, 4}},
               {"candidate_source_layer_id", 3}};
  for (auto& [k, v] : text_overrides.items()) text[k] = v;
  return {{"model_type", "deepseek_v41"}, {"text_config", text}};
}

TEST(ModelConfigV41, ReleasedComposite) {
  auto r = parse(released());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.family, ModelFamily::kDeepseekV41);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_layers, 40);
  EXPECT_EQ(c.q_lora_rank, 1280);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.index_n_heads, 32);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-20);
  EXPECT_TRUE(c.quantization.quantized);
  EXPECT_EQ(c.quantization.weight_block_size[1], 32);
  EXPECT_EQ(c.quantization.expert_format, ExpertFormat::kFp4);
  EXPECT_TRUE(c.compress_rope.yarn);
  EXPECT_FALSE(c.main_rope.yarn);
  EXPECT_EQ(c.image_token_id, 129264);
  // Roles (spec §6.2): 2 SWA, Full at 2/8/14 (ratio 2) and 20 (ratio 1, candidate source),
  // Reindex at 24..36 (inside the candidates), every other compressed layer Reuse.
  for (int i = 0; i < 40; ++i) {
    const LayerSpec& l = c.layers[static_cast<size_t>(i)];
    SCOPED_TRACE(i);
    if (i < 2) {
      EXPECT_EQ(l.attention, AttentionKind::kSWA);
      continue;
    }
    EXPECT_EQ(l.attention, AttentionKind::kCSA2);
    EXPECT_EQ(l.compress_ratio, i < 20 ? 2 : 1);
    const bool full = i == 2 || i == 8 || i == 14 || i == 20;
    const bool reindex = i >= 24 && i <= 36 && i % 4 == 0;
    EXPECT_EQ(l.role, full ? Csa2Role::kFull : reindex ? Csa2Role::kReindex : Csa2Role::kReuse);
    EXPECT_EQ(l.kv_source, i < 8 ? 2 : i < 14 ? 8 : i < 20 ? 14 : 20);
    EXPECT_EQ(l.index_source, full || reindex ? i : (i < 24 ? l.kv_source : i / 4 * 4));
    EXPECT_EQ(l.candidate_source, i == 20);
    EXPECT_EQ(l.uses_candidates, reindex);
    EXPECT_EQ(l.engram, i == 1 || i == 14);
  }
  EXPECT_EQ(c.engram.num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(c.engram.compressed_vocab_size, 99092);
  EXPECT_EQ(c.dspark.num_stages, 3);
  EXPECT_EQ(c.mtp_layers.size(), 3u);
  EXPECT_EQ(c.dspark.target_layer_ids, (std::vector<int>{37, 38, 39}));
  EXPECT_EQ(c.dspark.noise_token_id, 128799);
  // Spec §6.3: 3 x (512 + 128) / 2 + (512 + 128) = 1600 elements per token.
  EXPECT_DOUBLE_EQ(kv_cache_size(c).elements_per_token(), 1600.0);
}

TEST(ModelConfigV41, FlatTextAndOfficialSpellingsGiveTheSameModel) {
  const json composite = released();
  const auto a = parse(composite);
  ASSERT_TRUE(a.ok()) << a.status().message();

  json flat = composite["text_config"];
  flat["quantization_config"] = composite["quantization_config"];
  flat["image_token_id"] = composite["image_token_id"];
  const auto b = parse(flat);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(a->same_model(*b));

  const json& t = composite["text_config"];
  json off = {{"vocab_size", t["vocab_size"]}, {"dim", t["hidden_size"]},
              {"n_layers", t["num_hidden_layers"]}, {"n_heads", t["num_attention_heads"]},
              {"head_dim", t["head_dim"]}, {"rope_head_dim", 64}, {"q_lora_rank", 1280},
              {"o_groups", 8}, {"o_lora_rank", 1024}, {"moe_inter_dim", 2304},
              {"n_routed_experts", 384}, {"n_shared_experts", 1}, {"n_activated_experts", 6},
              {"score_func", "sqrtsoftplus"}, {"route_scale", 1.5}, {"swiglu_limit", 10.0},
              {"window_size", 128}, {"rope_theta", 10000.0}, {"compress_rope_theta", 160000.0},
              {"original_seq_len", 65536}, {"rope_factor", 16}, {"beta_fast", 32},
              {"beta_slow", 1}, {"index_n_heads", 32}, {"index_head_dim", 128},
              {"index_topk", 512}, {"hc_mult", 4}, {"hc_sinkhorn_iters", 20}, {"hc_eps", 1e-6},
              {"norm_eps", 1e-20}, {"n_mtp_layers", 3}, {"compress_ratios", t["compress_ratios"]},
              {"dtype", "fp8"}, {"quantization_config", composite["quantization_config"]}};
  for (const char* k : {"kv_source_layer_ids", "index_source_layer_ids",
                        "candidate_source_layer_id", "candidate_topk_blocks",
                        "candidate_block_size", "engram_layer_ids", "engram_num_embeddings",
                        "engram_max_ngram_size", "engram_n_heads", "engram_head_dim",
                        "engram_vocab_size", "engram_pad_id", "engram_compressed_vocab_size",
                        "dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
                        "dspark_markov_rank", "dspark_n_routed_experts",
                        "dspark_num_experts_per_tok"}) {
    off[k] = t[k];
  }
  const auto o = parse(off);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->naming, ConfigNaming::kOfficial);
  EXPECT_EQ(o->family, ModelFamily::kDeepseekV41);
  // Only image_token_id (top-level of the composite) differs.
  ModelConfig o2 = *o;
  o2.image_token_id = a->image_token_id;
  o2.eos_token_ids = a->eos_token_ids;
  o2.bos_token_id = a->bos_token_id;
  o2.max_position_embeddings = a->max_position_embeddings;
  EXPECT_TRUE(a->same_model(o2));
}

TEST(ModelConfigV41, DefaultsFollowTransformersDerivations) {
  // No sources given: the first layer of each same-ratio run is the KV source, the index
  // sources are the KV sources, the candidate source is the last KV source, DSpark targets the
  // last three non-source layers.
  json j = tiny({{"num_nextn_predict_layers", 1}, {"dspark_noise_token_id", 9}});
  j["text_config"].erase("kv_source_layer_ids");
  j["text_config"].erase("index_source_layer_ids");
  j["text_config"].erase("candidate_source_layer_id");
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->kv_source_layer_ids, (std::vector<int>{1, 3}));
  EXPECT_EQ(c->index_source_layer_ids, (std::vector<int>{1, 3}));
  EXPECT_EQ(c->candidate_source_layer_id, 3);
  EXPECT_EQ(c->dspark.target_layer_ids, (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(c->layers[5].role, Csa2Role::kReuse);
  EXPECT_EQ(c->layers[5].index_source, 3);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-20);
  // A negative candidate source disables the candidate level.
  auto d = parse(tiny({{"candidate_source_layer_id", -1}}));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->candidate_source_layer_id, -1);
  EXPECT_FALSE(d->layers[4].uses_candidates);
  auto e = parse(tiny({}));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->layers[3].candidate_source);
  EXPECT_TRUE(e->layers[4].uses_candidates);
  EXPECT_EQ(e->layers[4].role, Csa2Role::kReindex);
}

TEST(ModelConfigV41, ExpectedTensorsFollowTheRoles) {
  auto c = parse(tiny({{"engram_layer_ids", {2}},
                       {"engram_num_embeddings", {100}},
                       {"engram_max_ngram_size", 3},
                       {"engram_n_heads", 2},
                       {"engram_head_dim", 32},
                       {"num_nextn_predict_layers", 2},
                       {"dspark_target_layer_ids", {4, 5}},
                       {"dspark_markov_rank", 8},
                       {"dspark_n_routed_experts", 3},
                       {"dspark_num_experts_per_tok", 2},
                       {"dspark_noise_token_id", 7}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : expected_tensors(*c)) shapes[t.name] = t.shape;
  auto has = [&](const std::string& n) { return shapes.count(n) > 0; };
  EXPECT_FALSE(has("hc_head_fn"));
  EXPECT_TRUE(has("layers.1.attn.compressor.wgate.weight"));   // Full, ratio 2
  EXPECT_FALSE(has("layers.3.attn.compressor.wgate.weight"));  // Full, ratio 1: no pooling
  EXPECT_FALSE(has("layers.1.attn.compressor.ape"));
  EXPECT_EQ(shapes["layers.3.attn.indexer.wk.weight"], (std::vector<int64_t>{32, 64}));
  EXPECT_TRUE(has("layers.4.attn.indexer.wq_b.weight"));  // Reindex
  EXPECT_FALSE(has("layers.4.attn.indexer.wk.weight"));
  EXPECT_FALSE(has("layers.2.attn.indexer.wq_b.weight"));  // Reuse
  EXPECT_EQ(shapes["layers.2.engram.embed.weight"], (std::vector<int64_t>{100, 32}));
  EXPECT_EQ(shapes["layers.2.engram.wkv.weight"], (std::vector<int64_t>{5 * 64, 2 * 2 * 32}));
  EXPECT_EQ(shapes["mtp.0.main_proj.weight"], (std::vector<int64_t>{64, 128}));
  EXPECT_FALSE(has("mtp.1.main_proj.weight"));
  EXPECT_EQ(shapes["mtp.1.markov_head.head.weight"], (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(shapes["mtp.1.confidence_head.proj.weight"], (std::vector<int64_t>{1, 72}));
  EXPECT_TRUE(has("mtp.1.ffn.experts.2.w1.weight"));
  EXPECT_FALSE(has("mtp.1.ffn.experts.3.w1.weight"));
  // inspect reports the roles.
  const json r = inspect_config(*c);
  EXPECT_THAT(r["layer_kinds"]["roles"].get<std::string>(), HasSubstr("Full(2)"));
  EXPECT_THAT(r["layer_kinds"]["roles"].get<std::string>(), HasSubstr("candidate source"));
  EXPECT_THAT(r["layer_kinds"]["mtp"].get<std::string>(), HasSubstr("dspark: 2 stage(s)"));
}

TEST(ModelConfigV41, SchedulesThatCannotRunAreErrorsNamingTheField) {
  EXPECT_THAT(error_of(tiny({{"kv_source_layer_ids", {3}}, {"index_source_layer_ids", {3, 4}}})),
              HasSubstr("kv_source_layer_ids"));  // layer 1 has no source
  EXPECT_THAT(error_of(tiny({{"kv_source_layer_ids", {0, 3}},
                             {"index_source_layer_ids", {0, 3}},
                             {"candidate_source_layer_id", -1}})),
              HasSubstr("sliding-window layer"));
  EXPECT_THAT(error_of(tiny({{"compress_ratios", {0, 2, 1, 1, 1, 1}}})),
              HasSubstr("a compressed layer must follow a KV source of its own ratio"));
  EXPECT_THAT(error_of(tiny({{"index_source_layer_ids", {1, 4}}, {"candidate_source_layer_id", -1}})),
              HasSubstr("must also be an index source"));
  EXPECT_THAT(error_of(tiny({{"candidate_source_layer_id", 2}})),
              HasSubstr("candidate_source_layer_id"));
  EXPECT_THAT(error_of(tiny({{"candidate_source_layer_id", 1}})),
              HasSubstr("its candidate blocks would index other rows"));
  EXPECT_THAT(error_of(tiny({{"engram_layer_ids", {1, 2}}, {"engram_num_embeddings", {100}}})),
              HasSubstr("engram_num_embeddings"));
  EXPECT_THAT(error_of(tiny({{"engram_layer_ids", {7}}, {"engram_num_embeddings", {100}}})),
              HasSubstr("engram_layer_ids"));
  EXPECT_THAT(error_of(tiny({{"compress_ratios", {0, 2, 2, 1, 1}}})), HasSubstr("compress_ratios"));
  EXPECT_THAT(error_of(tiny({{"num_nextn_predict_layers", 1}, {"compress_ratios", {0, 2, 2, 1, 1, 1, 2}}})),
              HasSubstr("sliding-window only"));
  EXPECT_THAT(error_of(tiny({{"topk_method", "greedy"}})), HasSubstr("topk_method"));
  EXPECT_THAT(error_of(tiny({{"num_nextn_predict_layers", 1}, {"dspark_noise_token_id", 999}})),
              HasSubstr("dspark_noise_token_id"));
  EXPECT_THAT(error_of(tiny({{"gate_temp", 0}})), HasSubstr("gate_temp"));
  json bad = tiny({});
  bad["text_config"] = 3;
  EXPECT_THAT(error_of(bad), HasSubstr("text_config"));
}

}  // namespace
}  // namespace deepinfer::io
