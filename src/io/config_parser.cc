// config.json -> ModelConfig for both spellings (spec §1.1 official ModelArgs names, §1.2 HF
// DeepseekV4Config names incl. the legacy keys HF folds in), then one shared validation.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/config_fields.h"
#include "io/json_fields.h"
#include "io/model_config.h"

namespace deepinfer::io {
namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "DeepInfer supports model_type 'deepseek_v4' (DeepSeek-V4-Flash / V4-Pro), 'deepseek_v41' "
    "(DeepSeek-V4.1-Flash, with its text_config) and 'deepseek_v41_text' (Hugging Face "
    "config.json), and the official inference/config.json of both";

// Keys only a V4.1 official config has (its ModelArgs extend V4's).
bool has_v41_keys(const JsonFields& f) {
  for (const char* k : {"kv_source_layer_ids", "index_source_layer_ids", "engram_layer_ids",
                        "candidate_source_layer_id", "dspark_block_size"}) {
    if (f.has(k)) return true;
  }
  return false;
}

// ---- V4 layer schedules ----------------------------------------------------------------

// Layer kind of a per-layer compression ratio (official rule: 0 sliding window, 4 CSA with
// overlapping windows and an indexer, any other ratio HCA).
LayerSpec layer_from_ratio(int ratio) {
  LayerSpec l;
  l.compress_ratio = ratio;
  l.attention = ratio == 0   ? AttentionKind::kSWA
                : ratio == 4 ? AttentionKind::kCSA
                             : AttentionKind::kHCA;
  return l;
}

Status parse_ratio_list(const JsonFields& f, const char* key, int num_layers, int num_mtp,
                        std::vector<LayerSpec>& layers, std::vector<LayerSpec>& mtp) {
  const json* v = f.get(key);
  if (!v->is_array()) return f.wrong_type(key, "an array of integers (0 = sliding window)", *v);
  const int n = static_cast<int>(v->size());
  if (n < num_layers || n > num_layers + num_mtp) {
    return f.invalid(key, "has " + std::to_string(n) + " entries, expected " +
                              std::to_string(num_layers) + " (one per layer)" +
                              (num_mtp > 0 ? " or " + std::to_string(num_layers + num_mtp) +
                                                 " (layers + MTP layers)"
                                           : std::string()));
  }
  layers.clear();
  mtp.assign(static_cast<size_t>(num_mtp), LayerSpec{});
  for (int i = 0; i < n; ++i) {
    const json& r = (*v)[static_cast<size_t>(i)];
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > (1 << 20)) {
      return f.invalid(key, "entry " + std::to_string(i) +
                                " must be a non-negative integer ratio, found " + json_brief(r));
    }
    const LayerSpec l = layer_from_ratio(static_cast<int>(r.get<int64_t>()));
    if (i < num_layers)
      layers.push_back(l);
    else
      mtp[static_cast<size_t>(i - num_layers)] = l;
  }
  return Status::ok_status();
}

void set_hash_layers(std::vector<LayerSpec>& layers, int n_hash) {
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].moe = static_cast<int>(i) < n_hash ? MoeKind::kHash : MoeKind::kScore;
  }
}

// ---- Hugging Face spelling ------------------------------------------------------------------

Status parse_hf(const JsonFields& f, ModelConfig& c) {
  c.naming = ConfigNaming::kHuggingFace;
  DI_TRY(read_common_fields(f, c.naming, c));
  DI_TRY(parse_score_func(f, c.naming, c.scoring_func));
  DI_TRY(f.boolean("norm_topk_prob", c.norm_topk_prob));
  DI_TRY(f.boolean("tie_word_embeddings", c.tie_word_embeddings));
  DI_TRY(parse_eos(f, c));
  int num_mtp = 1;
  DI_TRY(read_stage_count(f, c.naming, num_mtp));
  DI_TRY(check_layer_count(f, c.naming, c));

  DI_TRY(read_rope_width(f, c.naming, c));

  // Attention kind per layer: layer_types > legacy compress_ratios > HF's default schedule.
  int csa_rate = 4, hca_rate = 128;
  if (const json* rates = f.get("compress_rates")) {
    if (!rates->is_object())
      return f.wrong_type("compress_rates", "an object {layer type: ratio}", *rates);
    const JsonFields r(*rates, f.source(), "compress_rates.");
    DI_TRY(r.integer("compressed_sparse_attention", csa_rate));
    DI_TRY(r.integer("heavily_compressed_attention", hca_rate));
  }
  DI_TRY(f.integer("compress_rate_csa", csa_rate));
  DI_TRY(f.integer("compress_rate_hca", hca_rate));
  if (csa_rate <= 0)
    return f.invalid("compress_rates",
                     "CSA ratio must be positive, found " + std::to_string(csa_rate));
  if (hca_rate <= 0)
    return f.invalid("compress_rates",
                     "HCA ratio must be positive, found " + std::to_string(hca_rate));

  const int n = c.num_layers;
  if (const json* types = f.get("layer_types")) {
    if (!types->is_array())
      return f.wrong_type("layer_types", "an array of layer type names", *types);
    if (static_cast<int>(types->size()) != n) {
      return f.invalid("layer_types", "has " + std::to_string(types->size()) +
                                          " entries but num_hidden_layers is " + std::to_string(n) +
                                          "; they must be equal");
    }
    c.layers.clear();
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      LayerSpec l;
      if (t == "sliding_attention") {
        l.attention = AttentionKind::kSWA;
      } else if (t == "compressed_sparse_attention") {
        l.attention = AttentionKind::kCSA;
        l.compress_ratio = csa_rate;
      } else if (t == "heavily_compressed_attention") {
        l.attention = AttentionKind::kHCA;
        l.compress_ratio = hca_rate;
      } else {
        return f.invalid("layer_types",
                         "entry " + std::to_string(i) + " is " + json_brief(t) +
                             "; expected sliding_attention, compressed_sparse_attention or "
                             "heavily_compressed_attention");
      }
      c.layers.push_back(l);
    }
    c.mtp_layers.assign(static_cast<size_t>(num_mtp), LayerSpec{});
  } else if (f.has("compress_ratios")) {
    DI_TRY(parse_ratio_list(f, "compress_ratios", n, num_mtp, c.layers, c.mtp_layers));
  } else {
    // DeepseekV4Config's default (the V4-Pro schedule): 2x HCA, then HCA/CSA alternating.
    c.layers.clear();
    for (int i = 0; i < n; ++i) {
      LayerSpec l;
      const bool csa = i >= 2 && (i - 2) % 2 == 1;
      l.attention = csa ? AttentionKind::kCSA : AttentionKind::kHCA;
      l.compress_ratio = csa ? csa_rate : hca_rate;
      c.layers.push_back(l);
    }
    c.mtp_layers.assign(static_cast<size_t>(num_mtp), LayerSpec{});
  }

  // MoE kind per layer: mlp_layer_types > legacy num_hash_layers > 3 hash layers.
  if (const json* types = f.get("mlp_layer_types")) {
    if (!types->is_array())
      return f.wrong_type("mlp_layer_types", "an array of 'hash_moe' / 'moe'", *types);
    if (static_cast<int>(types->size()) != n) {
      return f.invalid("mlp_layer_types", "has " + std::to_string(types->size()) +
                                              " entries but num_hidden_layers is " +
                                              std::to_string(n) + "; they must be equal");
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (t == "hash_moe")
        c.layers[i].moe = MoeKind::kHash;
      else if (t == "moe")
        c.layers[i].moe = MoeKind::kScore;
      else
        return f.invalid("mlp_layer_types", "entry " + std::to_string(i) + " is " + json_brief(t) +
                                                "; expected hash_moe or moe");
    }
  } else {
    int n_hash = 3;
    DI_TRY(f.integer("num_hash_layers", n_hash));
    if (n_hash < 0) return f.invalid("num_hash_layers", "must not be negative");
    set_hash_layers(c.layers, n_hash);
  }

  DI_TRY(parse_rope(f, c.naming, c));
  DI_TRY(parse_quantization_config(f, c));
  return Status::ok_status();
}

// ---- official inference/config.json spelling ------------------------------------------------

Status parse_official(const JsonFields& f, ModelConfig& c) {
  c.naming = ConfigNaming::kOfficial;
  DI_TRY(read_common_fields(f, c.naming, c));
  DI_TRY(parse_score_func(f, c.naming, c.scoring_func));
  DI_TRY(read_rope_width(f, c.naming, c));
  int num_mtp = 1;
  DI_TRY(read_stage_count(f, c.naming, num_mtp));
  DI_TRY(check_layer_count(f, c.naming, c));
  if (!f.has("compress_ratios"))
    return f.missing("compress_ratios", "per-layer compression ratio, 0 = sliding window");
  DI_TRY(parse_ratio_list(f, "compress_ratios", c.num_layers, num_mtp, c.layers, c.mtp_layers));
  int n_hash = 3;
  DI_TRY(f.integer("n_hash_layers", n_hash));
  if (n_hash < 0) return f.invalid("n_hash_layers", "must not be negative");
  set_hash_layers(c.layers, n_hash);

  DI_TRY(parse_rope(f, c.naming, c));
  return parse_official_quantization(f, c);
}

}  // namespace

Expected<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source) {
  DI_TRY(check_checkpoint_json(json_text, source));  // nesting depth (io_limits.h)
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    // nlohmann's message carries "at line L, column C".
    return invalid_argument(source + " is not valid JSON: " + e.what());
  } catch (const json::exception& e) {
    return invalid_argument(source + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) {
    return invalid_argument(source + ": expected a JSON object, found " + json_type_name(j));
  }
  const JsonFields f(j, source);
  ModelConfig c;
  c.source = source;
  if (const json* mt = f.get("model_type")) {
    if (!mt->is_string()) return f.wrong_type("model_type", "a string", *mt);
    c.model_type = mt->get<std::string>();
    if (c.model_type == "deepseek_v41" || c.model_type == "deepseek_v41_text") {
      // The released layout nests the text model under text_config; a flat text config (what
      // transformers' DeepseekV41TextConfig saves) has its fields at the top level.
      const json* tc = f.get("text_config");
      if (tc != nullptr && !tc->is_object()) return f.wrong_type("text_config", "an object", *tc);
      if (tc != nullptr) {
        DI_TRY(parse_v41(JsonFields(*tc, source, "text_config."), f, ConfigNaming::kHuggingFace,
                         c));
      } else {
        DI_TRY(parse_v41(f, f, ConfigNaming::kHuggingFace, c));
      }
    } else if (c.model_type == "deepseek_v4") {
      DI_TRY(parse_hf(f, c));
    } else {
      return unimplemented(source + ": unsupported model_type '" + c.model_type + "'. " +
                           kSupported);
    }
  } else if ((f.has("dim") || f.has("n_layers")) && has_v41_keys(f)) {
    c.model_type = "deepseek_v41";
    DI_TRY(parse_v41(f, f, ConfigNaming::kOfficial, c));
  } else if (f.has("dim") || f.has("n_layers")) {
    DI_TRY(parse_official(f, c));
  } else if (f.has("hidden_size") || f.has("num_hidden_layers")) {
    return invalid_argument(source +
                            ": missing required field 'model_type' (expected \"deepseek_v4\")");
  } else {
    return invalid_argument(source +
                            ": not a model config: no 'model_type' and none of the official "
                            "inference/config.json keys ('dim', 'n_layers'). " +
                            kSupported);
  }
  DI_TRY(validate_common(c, source));
  return c;
}

Expected<ModelConfig> load_model_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path);
  if (fs::is_directory(p, ec)) p /= "config.json";
  if (!fs::exists(p, ec)) {
    return not_found("config not found: " + p.string() +
                     " (a model directory needs config.json next to its safetensors files)");
  }
  if (fs::is_directory(p, ec))
    return invalid_argument(p.string() + " is a directory, expected config.json");
  DI_ASSIGN_OR_RETURN(std::string text, read_config_json(p.string()));  // size (io_limits.h)
  return parse_model_config(text, p.string());
}

}  // namespace deepinfer::io
