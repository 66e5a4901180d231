// config.json -> ModelConfig: both spellings, the real V4-Flash config (spec §1.1), defaults,
// and a message naming the field for every malformed input.
#include "io/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "fixture_writer.h"
#include "io/inspect_report.h"

namespace deepinfer::io {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string source_dir() {
  const char* d = std::getenv("DEEPINFER_SOURCE_DIR");
  return d != nullptr ? d : DEEPINFER_TEST_SOURCE_DIR;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Expected<ModelConfig> parse(const json& j) { return parse_model_config(j.dump(), "config.json"); }

// The message of parsing `j` (which must fail).
std::string error_of(const json& j) {
  auto c = parse(j);
  EXPECT_FALSE(c.ok()) << "parsed unexpectedly";
  return c.ok() ? std::string() : c.status().message();
}

ModelConfig flash_official() {
  auto c = load_model_config(source_dir() + "/tests/data/io/v4_flash_inference_config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ModelConfig, V4FlashOfficialConfig) {
  const ModelConfig c = flash_official();
  EXPECT_EQ(c.naming, ConfigNaming::kOfficial);
  EXPECT_EQ(c.num_layers, 43);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.rope_head_dim, 64);
  EXPECT_EQ(c.count(AttentionKind::kSWA), 2);
  EXPECT_EQ(c.count(AttentionKind::kCSA), 21);
  EXPECT_EQ(c.count(AttentionKind::kHCA), 20);
  EXPECT_EQ(c.count(MoeKind::kHash), 3);
  EXPECT_EQ(c.count(MoeKind::kScore), 40);
  EXPECT_EQ(c.layers[2], (LayerSpec{AttentionKind::kCSA, 4, MoeKind::kHash}));
  EXPECT_EQ(c.layers[3], (LayerSpec{AttentionKind::kHCA, 128, MoeKind::kScore}));
  EXPECT_EQ(c.layers[42].attention, AttentionKind::kCSA);
  ASSERT_EQ(c.num_mtp_layers(), 1);
  EXPECT_EQ(c.mtp_layers[0], (LayerSpec{AttentionKind::kSWA, 0, MoeKind::kScore}));
  EXPECT_EQ(c.main_rope, (RopeSpec{10000.0, false, 1.0, 0, 32.0, 1.0, 1.0}));
  EXPECT_EQ(c.compress_rope, (RopeSpec{160000.0, true, 16.0, 65536, 32.0, 1.0, 1.0}));
  EXPECT_EQ(c.hc_eps, 1e-6);        // ModelArgs default, not in the json
  EXPECT_EQ(c.rms_norm_eps, 1e-6);  // ditto
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.scoring_func, ScoreFunc::kSqrtSoftplus);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_TRUE(c.quantization.quantized);
  EXPECT_EQ(c.quantization.scale_fmt, "ue8m0");
  EXPECT_EQ(c.quantization.expert_format, ExpertFormat::kFp4);
  EXPECT_EQ(c.quantization.weight_block_size, (std::array<int, 2>{128, 128}));
  EXPECT_EQ(describe_attention_layout(c.layers),
            "layers 0-1 SWA, 2,4,..,42 CSA(4), 3,5,..,41 HCA(128)");
  EXPECT_EQ(describe_moe_layout(c.layers), "layers 0-2 hash, 3-42 score");
}

TEST(ModelConfig, V4FlashKvCacheIs3440ElementsPerToken) {
  const KvCacheSize kv = kv_cache_size(flash_official());
  EXPECT_EQ(kv.compressed_elements_per_token, 21 * 512 / 4.0 + 20 * 512 / 128.0);
  EXPECT_EQ(kv.indexer_elements_per_token, 21 * 128 / 4.0);
  EXPECT_EQ(kv.elements_per_token(), 3440.0);
  EXPECT_EQ(kv.window_elements_per_sequence, 43 * 128 * 512);  // 5.5 MiB at BF16
  EXPECT_EQ(kv.mtp_window_elements_per_sequence, 128 * 512);
  // attn [8,1024] + indexer [8,256], kv and score each (CSA); [128,512] x2 (HCA).
  EXPECT_EQ(kv.compressor_state_floats_per_sequence,
            21 * (2 * 8 * 1024 + 2 * 8 * 256) + 20 * 2 * 128 * 512);
}

TEST(ModelConfig, V4FlashHfLegacyKeysMatchOfficial) {
  auto hf = load_model_config(source_dir() + "/tests/data/io/v4_flash_hf_legacy_config.json");
  ASSERT_TRUE(hf.ok()) << hf.status().message();
  EXPECT_EQ(hf->naming, ConfigNaming::kHuggingFace);
  EXPECT_TRUE(hf->same_model(flash_official()));
}

TEST(ModelConfig, V4FlashHfModernKeysMatchOfficial) {
  json j = json::parse(read(source_dir() + "/tests/data/io/v4_flash_hf_legacy_config.json"));
  json types = json::array();
  for (int r : j["compress_ratios"]) {
    if (types.size() == 43) break;
    types.push_back(r == 0   ? "sliding_attention"
                    : r == 4 ? "compressed_sparse_attention"
                             : "heavily_compressed_attention");
  }
  json mlp = json::array();
  for (int i = 0; i < 43; ++i) mlp.push_back(i < 3 ? "hash_moe" : "moe");
  j.erase("compress_ratios");
  j.erase("num_hash_layers");
  j.erase("qk_rope_head_dim");
  j.erase("rope_scaling");
  j["layer_types"] = types;
  j["mlp_layer_types"] = mlp;
  j["compress_rates"] = {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 128}};
  j["partial_rotary_factor"] = 0.125;
  j["rope_parameters"] = {{"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                          {"compress",
                           {{"rope_type", "yarn"},
                            {"rope_theta", 160000.0},
                            {"factor", 16},
                            {"original_max_position_embeddings", 65536},
                            {"beta_fast", 32},
                            {"beta_slow", 1},
                            {"attention_factor", 1.0}}}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->same_model(flash_official()));
}

TEST(ModelConfig, TinyOfficialAndHfNamingGiveEqualConfigs) {
  for (bool quantized : {false, true}) {
    auto hf = parse(testing::tiny_config_hf(quantized));
    auto off = parse(testing::tiny_config_official(quantized));
    ASSERT_TRUE(hf.ok()) << hf.status().message();
    ASSERT_TRUE(off.ok()) << off.status().message();
    EXPECT_TRUE(hf->same_model(*off)) << model_config_to_json(*hf).dump() << "\n"
                                      << model_config_to_json(*off).dump();
    EXPECT_EQ(describe_attention_layout(hf->layers), "layers 0 SWA, 1,3 CSA(4), 2,4 HCA(8)");
    EXPECT_EQ(describe_moe_layout(hf->layers), "layers 0-1 hash, 2-4 score");
    EXPECT_EQ(hf->rope_head_dim, 16);
    EXPECT_EQ(hf->quantization.quantized, quantized);
  }
}

TEST(ModelConfig, HfDefaultsAndAlternatives) {
  json j = testing::tiny_config_hf(false);
  // Without layer_types / mlp_layer_types / rope: HF's own defaults.
  for (const char* k : {"layer_types", "mlp_layer_types", "rope_parameters", "compress_rates",
                        "partial_rotary_factor", "num_nextn_predict_layers", "eos_token_id"}) {
    j.erase(k);
  }
  j["qk_rope_head_dim"] = 16;  // legacy spelling of the rope width
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  // DeepseekV4Config's default schedule: 2x HCA, then HCA/CSA alternating; 3 hash layers.
  EXPECT_EQ(describe_attention_layout(c->layers), "layers 0-2,4 HCA(128), 3 CSA(4)");
  EXPECT_EQ(describe_moe_layout(c->layers), "layers 0-2 hash, 3-4 score");
  EXPECT_EQ(c->rope_head_dim, 16);
  EXPECT_FALSE(c->compress_rope.yarn);
  EXPECT_EQ(c->num_mtp_layers(), 1);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{1}));

  j["eos_token_id"] = {1, 7};
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 4096}};
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{1, 7}));
  EXPECT_TRUE(c->compress_rope.yarn);
  EXPECT_FALSE(c->main_rope.yarn);
  EXPECT_EQ(c->compress_rope.factor, 4.0);
  EXPECT_EQ(c->compress_rope.theta, 160000.0);
}

TEST(ModelConfig, DescribeIndexSets) {
  EXPECT_EQ(describe_index_set({0}), "0");
  EXPECT_EQ(describe_index_set({0, 1}), "0-1");
  EXPECT_EQ(describe_index_set({1, 3}), "1,3");
  EXPECT_EQ(describe_index_set({1, 3, 5, 7}), "1,3,..,7");
  EXPECT_EQ(describe_index_set({0, 1, 2, 5, 9}), "0-2,5,9");
}

TEST(ModelConfig, UnsupportedModelType) {
  json j = testing::tiny_config_hf(false);
  j["model_type"] = "llama";
  auto c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(c.status().message(), HasSubstr("unsupported model_type 'llama'"));
  EXPECT_THAT(c.status().message(), HasSubstr("deepseek_v4"));
}

TEST(ModelConfig, NotAModelConfig) {
  EXPECT_THAT(error_of(json{{"foo", 1}}), HasSubstr("not a model config"));
  EXPECT_THAT(error_of(json::array()), HasSubstr("expected a JSON object, found an array"));
  json j = testing::tiny_config_hf(false);
  j.erase("model_type");
  EXPECT_THAT(error_of(j), HasSubstr("missing required field 'model_type'"));
}

TEST(ModelConfig, MalformedJsonNamesFileLineAndColumn) {
  auto c = parse_model_config("{\n  \"model_type\": \"deepseek_v4\",\n  \"hidden_size\": ,\n}",
                              "/m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("/m/config.json is not valid JSON"));
  EXPECT_THAT(c.status().message(), HasSubstr("line 3, column"));
}

TEST(ModelConfig, MissingRequiredField) {
  json j = testing::tiny_config_hf(false);
  j.erase("hidden_size");
  EXPECT_THAT(error_of(j), HasSubstr("config.json: missing required field 'hidden_size'"));
  json o = testing::tiny_config_official(false);
  o.erase("compress_ratios");
  EXPECT_THAT(error_of(o), HasSubstr("missing required field 'compress_ratios'"));
  o = testing::tiny_config_official(false);
  o.erase("n_heads");
  EXPECT_THAT(error_of(o), HasSubstr("missing required field 'n_heads'"));
}

TEST(ModelConfig, WrongJsonTypes) {
  json j = testing::tiny_config_hf(false);
  j["hidden_size"] = "64";
  EXPECT_THAT(error_of(j),
              HasSubstr("field 'hidden_size' must be an integer, found a string \"64\""));
  j = testing::tiny_config_hf(false);
  j["num_attention_heads"] = 4.5;
  EXPECT_THAT(error_of(j), HasSubstr("field 'num_attention_heads' must be an integer"));
  j = testing::tiny_config_hf(false);
  j["hidden_size"] = 64.0;  // integral floats are fine
  EXPECT_TRUE(parse(j).ok());
  j = testing::tiny_config_hf(false);
  j["tie_word_embeddings"] = "no";
  EXPECT_THAT(error_of(j), HasSubstr("field 'tie_word_embeddings' must be true or false"));
  j = testing::tiny_config_hf(false);
  j["rms_norm_eps"] = "small";
  EXPECT_THAT(error_of(j), HasSubstr("field 'rms_norm_eps' must be a number"));
  j = testing::tiny_config_hf(false);
  j["layer_types"] = "sliding_attention";
  EXPECT_THAT(error_of(j), HasSubstr("field 'layer_types' must be an array"));
  j = testing::tiny_config_hf(true);
  j["quantization_config"]["weight_block_size"] = {128};
  EXPECT_THAT(error_of(j),
              HasSubstr("field 'quantization_config.weight_block_size' must be [rows, cols]"));
}

TEST(ModelConfig, NonPositiveSizes) {
  for (const char* key : {"hidden_size", "vocab_size", "head_dim", "q_lora_rank",
                          "n_routed_experts", "sliding_window"}) {
    json j = testing::tiny_config_hf(false);
    j[key] = 0;
    EXPECT_THAT(error_of(j), HasSubstr(std::string("field '") + key + "' must be positive")) << key;
  }
  json j = testing::tiny_config_hf(false);
  j["num_hidden_layers"] = -1;
  EXPECT_THAT(error_of(j), HasSubstr("field 'num_hidden_layers' must be a positive layer count"));
  json o = testing::tiny_config_official(false);
  o["dim"] = -64;
  EXPECT_THAT(error_of(o), HasSubstr("field 'dim' must be positive"));
}

TEST(ModelConfig, LayerTypesMustMatchLayerCount) {
  json j = testing::tiny_config_hf(false);
  j["layer_types"].erase(0);
  EXPECT_THAT(error_of(j),
              HasSubstr("field 'layer_types' has 4 entries but num_hidden_layers is 5"));
  j = testing::tiny_config_hf(false);
  j["mlp_layer_types"].push_back("moe");
  EXPECT_THAT(error_of(j),
              HasSubstr("field 'mlp_layer_types' has 6 entries but num_hidden_layers is 5"));
  json o = testing::tiny_config_official(false);
  o["compress_ratios"] = {0, 4, 8};
  EXPECT_THAT(error_of(o),
              HasSubstr("field 'compress_ratios' has 3 entries, expected 5 (one per layer) or 6"));
}

TEST(ModelConfig, UnknownLayerTypeString) {
  json j = testing::tiny_config_hf(false);
  j["layer_types"][2] = "full_attention";
  EXPECT_THAT(
      error_of(j),
      HasSubstr("field 'layer_types' entry 2 is \"full_attention\"; expected sliding_attention"));
  j = testing::tiny_config_hf(false);
  j["mlp_layer_types"][0] = "dense";
  EXPECT_THAT(error_of(j),
              HasSubstr("field 'mlp_layer_types' entry 0 is \"dense\"; expected hash_moe or moe"));
  j = testing::tiny_config_hf(false);
  j["scoring_func"] = "relu";
  EXPECT_THAT(error_of(j), HasSubstr("field 'scoring_func' must be one of sqrtsoftplus"));
  j = testing::tiny_config_hf(false);
  j["rope_parameters"]["compress"]["rope_type"] = "longrope";
  EXPECT_THAT(error_of(j), HasSubstr("field 'rope_parameters.compress.rope_type' is 'longrope'"));
}

TEST(ModelConfig, DivisibilityAndRopeWidth) {
  json j = testing::tiny_config_hf(false);
  j["o_groups"] = 3;
  EXPECT_THAT(error_of(j),
              HasSubstr("field 'num_attention_heads' (4) must be divisible by o_groups (3)"));
  j = testing::tiny_config_hf(false);
  j["partial_rotary_factor"] = 0.3;  // 19.2 channels
  EXPECT_THAT(error_of(j), HasSubstr("field 'partial_rotary_factor'"));
  json o = testing::tiny_config_official(false);
  o["rope_head_dim"] = 15;
  EXPECT_THAT(
      error_of(o),
      HasSubstr("field 'rope_head_dim' gives a rope width of 15 channels; it must be even"));
  o = testing::tiny_config_official(false);
  o["rope_head_dim"] = 128;
  EXPECT_THAT(error_of(o), HasSubstr("at most head_dim (64)"));
  o = testing::tiny_config_official(false);
  o["index_head_dim"] = 8;
  EXPECT_THAT(error_of(o),
              HasSubstr("field 'index_head_dim' (8) must be at least the rope width (16)"));
  j = testing::tiny_config_hf(false);
  j["num_key_value_heads"] = 4;
  EXPECT_THAT(error_of(j), HasSubstr("num_key_value_heads is 4"));
  j = testing::tiny_config_hf(false);
  j["num_experts_per_tok"] = 9;
  EXPECT_THAT(error_of(j), HasSubstr("must not exceed n_routed_experts (8)"));
}

TEST(ModelConfig, Quantization) {
  json j = testing::tiny_config_hf(true);
  auto c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->quantization.method, "fp8");
  EXPECT_EQ(c->quantization.expert_format, ExpertFormat::kFp4);
  j["quantization_config"]["quant_method"] = "gptq";
  auto bad = parse(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(bad.status().message(), HasSubstr("quant_method 'gptq' is not supported"));
  json o = testing::tiny_config_official(false);
  o["dtype"] = "int4";
  EXPECT_THAT(error_of(o), HasSubstr("field 'dtype' is 'int4'; expected bf16, fp16, fp32 or fp8"));
  o = testing::tiny_config_official(true);
  o.erase("expert_dtype");  // V4-Base: FP8 everywhere
  c = parse(o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->quantization.expert_format, ExpertFormat::kSameAsDense);
}

TEST(ModelConfig, LoadFromDirectoryAndMissingFile) {
  testing::TempDir dir;
  auto missing = load_model_config(dir.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.file("config.json")));
  testing::write_text(dir.file("config.json"), testing::tiny_config_official(false).dump());
  auto c = load_model_config(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->source, dir.file("config.json"));
}

TEST(ModelConfig, ToJsonHasEveryKind) {
  auto c = parse(testing::tiny_config_hf(true));
  ASSERT_TRUE(c.ok());
  const json j = model_config_to_json(*c);
  EXPECT_EQ(j["layers"][1]["attention"], "CSA");
  EXPECT_EQ(j["layers"][2]["compress_ratio"], 8);
  EXPECT_EQ(j["layers"][0]["moe"], "hash");
  EXPECT_EQ(j["compress_rope"]["yarn"], true);
  EXPECT_EQ(j["quantization"]["expert_format"], "fp4");
  EXPECT_EQ(j["num_mtp_layers"], 1);
}

// Random edits of a valid config.json text: parsing returns OK or an error naming the file,
// never crashes. Fixed seed.
TEST(ModelConfig, FuzzedConfigsNeverCrash) {
  const std::string valid = testing::tiny_config_hf(true).dump();
  const std::string official = testing::tiny_config_official(true).dump();
  std::mt19937 rng(99);
  int errors = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text = iter % 2 ? valid : official;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[pos] = "0123456789-.,:[]{}\"e"[rng() % 20];
          break;
        case 1:
          text.erase(pos, 1 + rng() % 8);
          break;
        default:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(pos), rng() % 2 ? '0' : '-');
          break;
      }
      if (text.empty()) text.push_back('{');
    }
    auto c = parse_model_config(text, "fuzz/config.json");
    if (!c.ok()) {
      ++errors;
      EXPECT_THAT(c.status().message(), HasSubstr("fuzz/config.json")) << text;
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace deepinfer::io
