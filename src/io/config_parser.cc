// config.json -> ModelConfig for both spellings (spec §1.1 official ModelArgs names, §1.2 HF
// DeepseekV4Config names incl. the legacy keys HF folds in), then one shared validation.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/json_fields.h"
#include "io/model_config.h"

namespace deepinfer::io {
namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "DeepInfer supports model_type 'deepseek_v4' (DeepSeek-V4-Flash / V4-Pro; Hugging Face "
    "config.json) and the official DeepSeek-V4 inference/config.json";

// ---- pieces shared by both spellings ----------------------------------------------------------

Status parse_score_func(const JsonFields& f, const char* key, ScoreFunc& out) {
  std::string s = std::string(score_func_name(out));
  DI_TRY(f.string(key, s));
  if (s == "sqrtsoftplus")
    out = ScoreFunc::kSqrtSoftplus;
  else if (s == "softmax")
    out = ScoreFunc::kSoftmax;
  else if (s == "sigmoid")
    out = ScoreFunc::kSigmoid;
  else
    return f.invalid(key, "must be one of sqrtsoftplus, softmax, sigmoid; found '" + s + "'");
  return Status::ok_status();
}

Status parse_expert_dtype(const JsonFields& f, const char* key, ExpertFormat& out) {
  const json* v = f.get(key);
  if (v == nullptr) return Status::ok_status();
  if (!v->is_string()) return f.wrong_type(key, "a string (fp4, fp8) or null", *v);
  const std::string s = v->get<std::string>();
  if (s == "fp4")
    out = ExpertFormat::kFp4;
  else if (s == "fp8")
    out = ExpertFormat::kFp8;
  else if (s == "bf16" || s == "none")
    out = ExpertFormat::kSameAsDense;
  else
    return f.invalid(key, "must be fp4, fp8 or null; found '" + s + "'");
  return Status::ok_status();
}

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

Status parse_rope_dict(const JsonFields& f, RopeSpec& rope, bool theta_from_dict) {
  std::string type = "default";
  if (f.has("rope_type"))
    DI_TRY(f.string("rope_type", type));
  else if (f.has("type"))
    DI_TRY(f.string("type", type));
  if (theta_from_dict) DI_TRY(f.number("rope_theta", rope.theta));
  if (type == "default") {
    rope.yarn = false;
    return Status::ok_status();
  }
  if (type != "yarn") {
    return f.invalid(f.has("rope_type") ? "rope_type" : "type",
                     "is '" + type + "'; DeepSeek-V4 uses 'default' or 'yarn'");
  }
  rope.yarn = true;
  DI_TRY(f.number("factor", rope.factor, true));
  DI_TRY(f.integer("original_max_position_embeddings", rope.original_max_position, true));
  DI_TRY(f.number("beta_fast", rope.beta_fast));
  DI_TRY(f.number("beta_slow", rope.beta_slow));
  DI_TRY(f.number("attention_factor", rope.attention_factor));
  if (!(rope.factor > 0)) return f.invalid("factor", "must be positive");
  if (rope.original_max_position <= 0) {
    return f.invalid("original_max_position_embeddings", "must be positive");
  }
  return Status::ok_status();
}

Status parse_hf_rope(const JsonFields& f, ModelConfig& c) {
  c.main_rope = RopeSpec{};
  c.compress_rope = RopeSpec{};
  c.main_rope.theta = 10000.0;
  c.compress_rope.theta = 160000.0;
  DI_TRY(f.number("rope_theta", c.main_rope.theta));
  DI_TRY(f.number("compress_rope_theta", c.compress_rope.theta));
  const char* key = f.first_present({"rope_parameters", "rope_scaling"});
  if (key == nullptr) return Status::ok_status();
  const json& rp = *f.get(key);
  if (!rp.is_object()) return f.wrong_type(key, "an object", rp);
  const auto main_it = rp.find("main");
  const auto compress_it = rp.find("compress");
  if (main_it != rp.end() && compress_it != rp.end() && main_it->is_object() &&
      compress_it->is_object()) {
    // Nested per rope type (what DeepseekV4Config saves): each sub-dict carries its own theta.
    DI_TRY(parse_rope_dict(JsonFields(*main_it, f.source(), f.field(key) + ".main."), c.main_rope,
                           true));
    DI_TRY(parse_rope_dict(JsonFields(*compress_it, f.source(), f.field(key) + ".compress."),
                           c.compress_rope, true));
    return Status::ok_status();
  }
  // Flat (legacy rope_scaling, or un-nested rope_parameters): the scaling applies to the
  // compressed layers' rope only; thetas stay rope_theta / compress_rope_theta.
  return parse_rope_dict(JsonFields(rp, f.source(), f.field(key) + "."), c.compress_rope, false);
}

// `quantization_config` (either spelling may carry one). Expert format keys seen in the wild:
// expert_dtype (fp4/fp8), expert_fmt (e2m1/e4m3), expert_block_size (32 or [1, 32]); a
// top-level expert_dtype counts too.
Status parse_quantization_config(const JsonFields& f, ModelConfig& c) {
  QuantizationSpec& q = c.quantization;
  const json* qc = f.get("quantization_config");
  if (qc == nullptr) return Status::ok_status();
  if (!qc->is_object()) return f.wrong_type("quantization_config", "an object", *qc);
  const JsonFields g(*qc, f.source(), "quantization_config.");
  DI_TRY(g.string("quant_method", q.method, true));
  if (q.method != "fp8") {
    return unimplemented(f.source() + ": quantization_config.quant_method '" + q.method +
                         "' is not supported; DeepInfer reads fp8 checkpoints (E4M3 weights with "
                         "block scales, optional FP4 experts) and unquantized ones");
  }
  q.quantized = true;
  q.fmt = "e4m3";
  DI_TRY(g.string("fmt", q.fmt));
  if (q.fmt != "e4m3") return g.invalid("fmt", "is '" + q.fmt + "'; only e4m3 is supported");
  DI_TRY(g.string("scale_fmt", q.scale_fmt));
  if (!q.scale_fmt.empty() && q.scale_fmt != "ue8m0") {
    return g.invalid("scale_fmt", "is '" + q.scale_fmt + "'; expected ue8m0 or null");
  }
  auto block_dim = [](const json& v) {
    return v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= 65536;
  };
  if (const json* bs = g.get("weight_block_size")) {
    if (!bs->is_array() || bs->size() != 2 || !block_dim((*bs)[0]) || !block_dim((*bs)[1])) {
      return g.wrong_type("weight_block_size", "[rows, cols] with two positive integers", *bs);
    }
    q.weight_block_size = {static_cast<int>((*bs)[0].get<int64_t>()),
                           static_cast<int>((*bs)[1].get<int64_t>())};
  }
  if (g.has("expert_dtype")) {
    DI_TRY(parse_expert_dtype(g, "expert_dtype", q.expert_format));
  } else if (const json* fmt = g.get("expert_fmt")) {
    if (*fmt == "e2m1")
      q.expert_format = ExpertFormat::kFp4;
    else if (*fmt == "e4m3")
      q.expert_format = ExpertFormat::kFp8;
    else
      return g.invalid("expert_fmt", "is " + json_brief(*fmt) + "; expected e2m1 or e4m3");
  } else {
    DI_TRY(parse_expert_dtype(f, "expert_dtype", q.expert_format));
  }
  if (const json* eb = g.get("expert_block_size")) {
    if (block_dim(*eb)) {
      q.expert_block_size = static_cast<int>(eb->get<int64_t>());
    } else if (eb->is_array() && eb->size() == 2 && (*eb)[0] == 1 && block_dim((*eb)[1])) {
      q.expert_block_size = static_cast<int>((*eb)[1].get<int64_t>());
    } else {
      return g.wrong_type("expert_block_size", "a positive integer or [1, n]", *eb);
    }
  }
  return Status::ok_status();
}

Status parse_hf(const JsonFields& f, ModelConfig& c) {
  c.naming = ConfigNaming::kHuggingFace;
  DI_TRY(f.integer("vocab_size", c.vocab_size, true));
  DI_TRY(f.integer("hidden_size", c.hidden_size, true));
  DI_TRY(f.integer("num_hidden_layers", c.num_layers, true));
  DI_TRY(f.integer("num_attention_heads", c.num_heads, true));
  DI_TRY(f.integer("num_key_value_heads", c.num_kv_heads));
  DI_TRY(f.integer("head_dim", c.head_dim, true));
  DI_TRY(f.integer("q_lora_rank", c.q_lora_rank, true));
  DI_TRY(f.integer("o_groups", c.o_groups, true));
  DI_TRY(f.integer("o_lora_rank", c.o_lora_rank, true));
  DI_TRY(f.integer("moe_intermediate_size", c.moe_intermediate_size, true));
  DI_TRY(f.integer("n_routed_experts", c.n_routed_experts, true));
  DI_TRY(f.integer("num_experts_per_tok", c.num_experts_per_tok, true));
  DI_TRY(f.integer("n_shared_experts", c.n_shared_experts));
  DI_TRY(parse_score_func(f, "scoring_func", c.scoring_func));
  DI_TRY(f.boolean("norm_topk_prob", c.norm_topk_prob));
  DI_TRY(f.number("routed_scaling_factor", c.routed_scaling_factor));
  DI_TRY(f.number("swiglu_limit", c.swiglu_limit));
  DI_TRY(f.integer("sliding_window", c.sliding_window));
  DI_TRY(f.integer("index_n_heads", c.index_n_heads));
  DI_TRY(f.integer("index_head_dim", c.index_head_dim));
  DI_TRY(f.integer("index_topk", c.index_topk));
  DI_TRY(f.integer("hc_mult", c.hc_mult));
  DI_TRY(f.integer("hc_sinkhorn_iters", c.hc_sinkhorn_iters));
  DI_TRY(f.number("hc_eps", c.hc_eps));
  DI_TRY(f.number("rms_norm_eps", c.rms_norm_eps));
  DI_TRY(f.integer("max_position_embeddings", c.max_position_embeddings));
  DI_TRY(f.boolean("tie_word_embeddings", c.tie_word_embeddings));
  DI_TRY(f.integer("bos_token_id", c.bos_token_id));
  if (const json* eos = f.get("eos_token_id")) {
    c.eos_token_ids.clear();
    if (eos->is_number_integer()) {
      c.eos_token_ids.push_back(eos->get<int64_t>());
    } else if (eos->is_array()) {
      for (const json& e : *eos) {
        if (!e.is_number_integer())
          return f.wrong_type("eos_token_id", "an integer or a list of integers", *eos);
        c.eos_token_ids.push_back(e.get<int64_t>());
      }
    } else {
      return f.wrong_type("eos_token_id", "an integer or a list of integers", *eos);
    }
  }
  int num_mtp = 1;
  DI_TRY(f.integer("num_nextn_predict_layers", num_mtp));
  if (num_mtp < 0 || num_mtp > 64) {
    return f.invalid("num_nextn_predict_layers",
                     "must be between 0 and 64, found " + std::to_string(num_mtp));
  }
  if (c.num_layers <= 0 || c.num_layers > 100000) {
    return f.invalid("num_hidden_layers",
                     "must be a positive layer count, found " + std::to_string(c.num_layers));
  }

  // Rope width: partial_rotary_factor x head_dim, or the legacy qk_rope_head_dim.
  if (f.has("partial_rotary_factor")) {
    double factor = 0;
    DI_TRY(f.number("partial_rotary_factor", factor));
    const double width = factor * c.head_dim;
    if (!(factor > 0 && factor <= 1) || std::fabs(width - std::round(width)) > 1e-6) {
      return f.invalid("partial_rotary_factor",
                       "(" + std::to_string(factor) + ") x head_dim (" +
                           std::to_string(c.head_dim) +
                           ") must be a whole number of channels in (0, head_dim]");
    }
    c.rope_head_dim = static_cast<int>(std::lround(width));
  } else {
    DI_TRY(f.integer("qk_rope_head_dim", c.rope_head_dim));
  }

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

  DI_TRY(parse_hf_rope(f, c));
  DI_TRY(parse_quantization_config(f, c));
  return Status::ok_status();
}

// ---- official inference/config.json spelling ------------------------------------------------

Status parse_official(const JsonFields& f, ModelConfig& c) {
  c.naming = ConfigNaming::kOfficial;
  DI_TRY(f.integer("vocab_size", c.vocab_size, true));
  DI_TRY(f.integer("dim", c.hidden_size, true));
  DI_TRY(f.integer("n_layers", c.num_layers, true));
  DI_TRY(f.integer("n_heads", c.num_heads, true));
  DI_TRY(f.integer("head_dim", c.head_dim, true));
  DI_TRY(f.integer("q_lora_rank", c.q_lora_rank, true));
  DI_TRY(f.integer("o_groups", c.o_groups, true));
  DI_TRY(f.integer("o_lora_rank", c.o_lora_rank, true));
  DI_TRY(f.integer("moe_inter_dim", c.moe_intermediate_size, true));
  DI_TRY(f.integer("n_routed_experts", c.n_routed_experts, true));
  DI_TRY(f.integer("n_activated_experts", c.num_experts_per_tok, true));
  DI_TRY(f.integer("n_shared_experts", c.n_shared_experts));
  DI_TRY(parse_score_func(f, "score_func", c.scoring_func));
  DI_TRY(f.number("route_scale", c.routed_scaling_factor));
  DI_TRY(f.number("swiglu_limit", c.swiglu_limit));
  DI_TRY(f.integer("rope_head_dim", c.rope_head_dim));
  DI_TRY(f.integer("window_size", c.sliding_window));
  DI_TRY(f.integer("index_n_heads", c.index_n_heads));
  DI_TRY(f.integer("index_head_dim", c.index_head_dim));
  DI_TRY(f.integer("index_topk", c.index_topk));
  DI_TRY(f.integer("hc_mult", c.hc_mult));
  DI_TRY(f.integer("hc_sinkhorn_iters", c.hc_sinkhorn_iters));
  DI_TRY(f.number("hc_eps", c.hc_eps));
  DI_TRY(f.number("norm_eps", c.rms_norm_eps));
  int num_mtp = 1;
  DI_TRY(f.integer("n_mtp_layers", num_mtp));
  if (num_mtp < 0 || num_mtp > 64) {
    return f.invalid("n_mtp_layers", "must be between 0 and 64, found " + std::to_string(num_mtp));
  }
  if (c.num_layers <= 0 || c.num_layers > 100000) {
    return f.invalid("n_layers",
                     "must be a positive layer count, found " + std::to_string(c.num_layers));
  }
  if (!f.has("compress_ratios"))
    return f.missing("compress_ratios", "per-layer compression ratio, 0 = sliding window");
  DI_TRY(parse_ratio_list(f, "compress_ratios", c.num_layers, num_mtp, c.layers, c.mtp_layers));
  int n_hash = 3;
  DI_TRY(f.integer("n_hash_layers", n_hash));
  if (n_hash < 0) return f.invalid("n_hash_layers", "must not be negative");
  set_hash_layers(c.layers, n_hash);

  // Rope: sliding-window layers plain rope_theta; compressed layers compress_rope_theta with
  // YaRN whenever original_seq_len > 0 (the reference's precompute_freqs_cis rule).
  c.main_rope = RopeSpec{};
  c.main_rope.theta = 10000.0;
  DI_TRY(f.number("rope_theta", c.main_rope.theta));
  RopeSpec& r = c.compress_rope;
  r = RopeSpec{};
  r.theta = 160000.0;
  r.factor = 16.0;
  r.original_max_position = 65536;
  DI_TRY(f.number("compress_rope_theta", r.theta));
  DI_TRY(f.number("rope_factor", r.factor));
  DI_TRY(f.integer("original_seq_len", r.original_max_position));
  DI_TRY(f.number("beta_fast", r.beta_fast));
  DI_TRY(f.number("beta_slow", r.beta_slow));
  r.yarn = r.original_max_position > 0;
  if (!r.yarn) {  // unused parameters are not part of the model
    r.factor = 1.0;
    r.original_max_position = 0;
    r.beta_fast = 32.0;
    r.beta_slow = 1.0;
  } else if (!(r.factor > 0)) {
    return f.invalid("rope_factor", "must be positive");
  }

  // Quantization: dtype fp8 = E4M3 dense linears with 128x128 block scales; expert_dtype fp4
  // = FP4 E2M1 routed experts with 1x32 scales.
  // A quantization_config, when present, describes the blocks (e.g. 32x32 tiles).
  QuantizationSpec& q = c.quantization;
  std::string dtype = "bf16";
  DI_TRY(f.string("dtype", dtype));
  if (dtype != "bf16" && dtype != "fp16" && dtype != "fp32" && dtype != "fp8") {
    return f.invalid("dtype", "is '" + dtype + "'; expected bf16, fp16, fp32 or fp8");
  }
  DI_TRY(parse_expert_dtype(f, "expert_dtype", q.expert_format));
  if (f.has("quantization_config")) {
    DI_TRY(parse_quantization_config(f, c));
    if (q.scale_fmt.empty()) DI_TRY(f.string("scale_fmt", q.scale_fmt));
  } else if (dtype == "fp8" || q.expert_format != ExpertFormat::kSameAsDense) {
    q.quantized = true;
    q.method = "fp8";
    q.fmt = "e4m3";
    DI_TRY(f.string("scale_fmt", q.scale_fmt));
    if (!q.scale_fmt.empty() && q.scale_fmt != "ue8m0") {
      return f.invalid("scale_fmt", "is '" + q.scale_fmt + "'; expected ue8m0 or null");
    }
  }
  return Status::ok_status();
}

// ---- validation shared by both --------------------------------------------------------------

Status validate(const ModelConfig& c, const std::string& source) {
  const bool hf = c.naming == ConfigNaming::kHuggingFace;
  auto name = [&](const char* hf_name, const char* official_name) {
    return std::string(hf ? hf_name : official_name);
  };
  auto bad = [&](const std::string& field, const std::string& msg) {
    return invalid_argument(source + ": field '" + field + "' " + msg);
  };
  auto positive = [&](const std::string& field, int64_t v) -> Status {
    if (v <= 0) return bad(field, "must be positive, found " + std::to_string(v));
    return Status::ok_status();
  };
  DI_TRY(positive("vocab_size", c.vocab_size));
  DI_TRY(positive(name("hidden_size", "dim"), c.hidden_size));
  DI_TRY(positive(name("num_attention_heads", "n_heads"), c.num_heads));
  DI_TRY(positive("head_dim", c.head_dim));
  DI_TRY(positive("q_lora_rank", c.q_lora_rank));
  DI_TRY(positive("o_groups", c.o_groups));
  DI_TRY(positive("o_lora_rank", c.o_lora_rank));
  DI_TRY(positive(name("moe_intermediate_size", "moe_inter_dim"), c.moe_intermediate_size));
  DI_TRY(positive("n_routed_experts", c.n_routed_experts));
  DI_TRY(positive(name("num_experts_per_tok", "n_activated_experts"), c.num_experts_per_tok));
  DI_TRY(positive(name("sliding_window", "window_size"), c.sliding_window));
  DI_TRY(positive("index_n_heads", c.index_n_heads));
  DI_TRY(positive("index_head_dim", c.index_head_dim));
  DI_TRY(positive("index_topk", c.index_topk));
  DI_TRY(positive("hc_mult", c.hc_mult));
  DI_TRY(positive("hc_sinkhorn_iters", c.hc_sinkhorn_iters));
  DI_TRY(positive(name("max_position_embeddings", "max_position_embeddings"),
                  c.max_position_embeddings));
  if (c.n_shared_experts < 0) return bad("n_shared_experts", "must not be negative");
  if (c.num_kv_heads != 1) {
    return unimplemented(
        source + ": num_key_value_heads is " + std::to_string(c.num_kv_heads) +
        "; DeepSeek-V4 attention has one shared K=V head (num_key_value_heads = 1)");
  }
  if (c.num_experts_per_tok > c.n_routed_experts) {
    return bad(name("num_experts_per_tok", "n_activated_experts"),
               "(" + std::to_string(c.num_experts_per_tok) +
                   ") must not exceed n_routed_experts (" + std::to_string(c.n_routed_experts) +
                   ")");
  }
  if (c.num_heads % c.o_groups != 0) {
    return bad(name("num_attention_heads", "n_heads"),
               "(" + std::to_string(c.num_heads) + ") must be divisible by o_groups (" +
                   std::to_string(c.o_groups) + ") for the grouped output projection");
  }
  const std::string rope_field = hf ? "partial_rotary_factor" : "rope_head_dim";
  if (c.rope_head_dim <= 0 || c.rope_head_dim % 2 != 0 || c.rope_head_dim > c.head_dim) {
    return bad(rope_field, "gives a rope width of " + std::to_string(c.rope_head_dim) +
                               " channels; it must be even, positive and at most head_dim (" +
                               std::to_string(c.head_dim) + ")");
  }
  if (c.head_dim % 2 != 0)
    return bad("head_dim", "must be even, found " + std::to_string(c.head_dim));
  if (c.rope_head_dim > c.index_head_dim) {
    return bad("index_head_dim",
               "(" + std::to_string(c.index_head_dim) + ") must be at least the rope width (" +
                   std::to_string(c.rope_head_dim) + "): the indexer ropes its last channels too");
  }
  if (!(c.rms_norm_eps >= 0)) return bad(name("rms_norm_eps", "norm_eps"), "must not be negative");
  if (!(c.hc_eps >= 0)) return bad("hc_eps", "must not be negative");
  if (!(c.main_rope.theta > 0)) return bad("rope_theta", "must be positive");
  if (!(c.compress_rope.theta > 0)) return bad("compress_rope_theta", "must be positive");
  if (static_cast<int>(c.layers.size()) != c.num_layers) {
    return internal_error(source + ": layer list does not match the layer count");
  }
  for (const auto& l : c.layers) {
    if (l.attention != AttentionKind::kSWA && l.compress_ratio <= 0) {
      return bad("compress_rates", "a compressed layer needs a positive compression ratio");
    }
  }
  for (int64_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size)
      return bad("eos_token_id", "(" + std::to_string(id) + ") is outside the vocabulary");
  }
  if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size) {
    return bad("bos_token_id",
               "(" + std::to_string(c.bos_token_id) + ") is outside the vocabulary");
  }
  return Status::ok_status();
}

}  // namespace

Expected<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source) {
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
    if (c.model_type != "deepseek_v4") {
      return unimplemented(source + ": unsupported model_type '" + c.model_type + "'. " +
                           kSupported);
    }
    DI_TRY(parse_hf(f, c));
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
  DI_TRY(validate(c, source));
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
  std::ifstream in(p, std::ios::binary);
  if (!in) return failed_precondition("cannot read " + p.string());
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_model_config(buf.str(), p.string());
}

}  // namespace deepinfer::io
