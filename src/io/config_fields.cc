// Shared config.json pieces (see config_fields.h).
#include "io/config_fields.h"

#include <cmath>
#include <string_view>
#include <variant>

namespace deepinfer::io {
namespace {

using nlohmann::json;

// One member, its Hugging Face and official names (nullptr: the official spelling has no such
// key), and whether every config must give it.
struct Field {
  const char* hf;
  const char* official;
  std::variant<int ModelConfig::*, int64_t ModelConfig::*, double ModelConfig::*> member;
  bool required;
};

constexpr Field kFields[] = {
    {"vocab_size", "vocab_size", &ModelConfig::vocab_size, true},
    {"hidden_size", "dim", &ModelConfig::hidden_size, true},
    {"num_hidden_layers", "n_layers", &ModelConfig::num_layers, true},
    {"num_attention_heads", "n_heads", &ModelConfig::num_heads, true},
    {"num_key_value_heads", nullptr, &ModelConfig::num_kv_heads, false},
    {"head_dim", "head_dim", &ModelConfig::head_dim, true},
    {"q_lora_rank", "q_lora_rank", &ModelConfig::q_lora_rank, true},
    {"o_groups", "o_groups", &ModelConfig::o_groups, true},
    {"o_lora_rank", "o_lora_rank", &ModelConfig::o_lora_rank, true},
    {"moe_intermediate_size", "moe_inter_dim", &ModelConfig::moe_intermediate_size, true},
    {"n_routed_experts", "n_routed_experts", &ModelConfig::n_routed_experts, true},
    {"num_experts_per_tok", "n_activated_experts", &ModelConfig::num_experts_per_tok, true},
    {"n_shared_experts", "n_shared_experts", &ModelConfig::n_shared_experts, false},
    {"routed_scaling_factor", "route_scale", &ModelConfig::routed_scaling_factor, false},
    {"swiglu_limit", "swiglu_limit", &ModelConfig::swiglu_limit, false},
    {"sliding_window", "window_size", &ModelConfig::sliding_window, false},
    {"index_n_heads", "index_n_heads", &ModelConfig::index_n_heads, false},
    {"index_head_dim", "index_head_dim", &ModelConfig::index_head_dim, false},
    {"index_topk", "index_topk", &ModelConfig::index_topk, false},
    {"hc_mult", "hc_mult", &ModelConfig::hc_mult, false},
    {"hc_sinkhorn_iters", "hc_sinkhorn_iters", &ModelConfig::hc_sinkhorn_iters, false},
    {"hc_eps", "hc_eps", &ModelConfig::hc_eps, false},
    {"rms_norm_eps", "norm_eps", &ModelConfig::rms_norm_eps, false},
    {"max_position_embeddings", nullptr, &ModelConfig::max_position_embeddings, false},
    {"bos_token_id", nullptr, &ModelConfig::bos_token_id, false},
};

const char* name_in(const Field& fd, ConfigNaming naming) {
  return naming == ConfigNaming::kOfficial && fd.official != nullptr ? fd.official : fd.hf;
}

}  // namespace

Status read_common_fields(const JsonFields& f, ConfigNaming naming, ModelConfig& c) {
  for (const Field& fd : kFields) {
    if (naming == ConfigNaming::kOfficial && fd.official == nullptr) continue;
    const char* key = name_in(fd, naming);
    DI_TRY(std::visit(
        [&](auto member) -> Status {
          using T = std::remove_reference_t<decltype(c.*member)>;
          if constexpr (std::is_same_v<T, double>) {
            return f.number(key, c.*member, fd.required);
          } else {
            return f.integer(key, c.*member, fd.required);
          }
        },
        fd.member));
  }
  return Status::ok_status();
}

std::string field_name(ConfigNaming naming, const char* hf_name) {
  for (const Field& fd : kFields) {
    if (std::string_view(fd.hf) == hf_name) return name_in(fd, naming);
  }
  return hf_name;
}

Status parse_score_func(const JsonFields& f, ConfigNaming naming, ScoreFunc& out) {
  const char* key = naming == ConfigNaming::kOfficial ? "score_func" : "scoring_func";
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

Status check_layer_count(const JsonFields& f, ConfigNaming naming, const ModelConfig& c) {
  if (c.num_layers <= 0 || c.num_layers > 100000) {
    return f.invalid(field_name(naming, "num_hidden_layers"),
                     "must be a positive layer count, found " + std::to_string(c.num_layers));
  }
  return Status::ok_status();
}

Status read_stage_count(const JsonFields& f, ConfigNaming naming, int& n) {
  const char* key = naming == ConfigNaming::kOfficial ? "n_mtp_layers" : "num_nextn_predict_layers";
  DI_TRY(f.integer(key, n));
  if (n < 0 || n > 64) {
    return f.invalid(key, "must be between 0 and 64, found " + std::to_string(n));
  }
  return Status::ok_status();
}

Status parse_eos(const JsonFields& f, ModelConfig& c) {
  const json* eos = f.get("eos_token_id");
  if (eos == nullptr) return Status::ok_status();
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
  return Status::ok_status();
}

namespace {

// partial_rotary_factor x head_dim, or qk_rope_head_dim.
Status parse_rope_width(const JsonFields& f, ModelConfig& c) {
  if (!f.has("partial_rotary_factor")) return f.integer("qk_rope_head_dim", c.rope_head_dim);
  double factor = 0;
  DI_TRY(f.number("partial_rotary_factor", factor));
  const double width = factor * c.head_dim;
  if (!(factor > 0 && factor <= 1) || std::fabs(width - std::round(width)) > 1e-6) {
    return f.invalid("partial_rotary_factor",
                     std::string("(") + std::to_string(factor) + ") x head_dim (" + std::to_string(c.head_dim) +
                         ") must be a whole number of channels in (0, head_dim]");
  }
  c.rope_head_dim = static_cast<int>(std::lround(width));
  return Status::ok_status();
}

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

}  // namespace

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
  if (rp.contains("main") && rp.contains("compress") && rp.at("main").is_object() &&
      rp.at("compress").is_object()) {
    // Nested per rope type (what DeepseekV4Config saves): each sub-dict carries its own theta.
    DI_TRY(parse_rope_dict(JsonFields(rp.at("main"), f.source(), f.field(key) + ".main."),
                           c.main_rope, true));
    DI_TRY(parse_rope_dict(JsonFields(rp.at("compress"), f.source(), f.field(key) + ".compress."),
                           c.compress_rope, true));
    return Status::ok_status();
  }
  // Flat (legacy rope_scaling, or un-nested rope_parameters): the scaling applies to the
  // compressed layers' rope only; thetas stay rope_theta / compress_rope_theta.
  return parse_rope_dict(JsonFields(rp, f.source(), f.field(key) + "."), c.compress_rope, false);
}

Status parse_official_rope(const JsonFields& f, ModelConfig& c) {
  // Sliding-window layers plain rope_theta; compressed layers compress_rope_theta with YaRN
  // whenever original_seq_len > 0 (the reference's precompute_freqs_cis rule).
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
  return Status::ok_status();
}

Status read_rope_width(const JsonFields& f, ConfigNaming naming, ModelConfig& c) {
  if (naming == ConfigNaming::kOfficial) return f.integer("rope_head_dim", c.rope_head_dim);
  return parse_rope_width(f, c);
}

Status parse_rope(const JsonFields& f, ConfigNaming naming, ModelConfig& c) {
  return naming == ConfigNaming::kOfficial ? parse_official_rope(f, c) : parse_hf_rope(f, c);
}

// Expert format keys seen in the wild: expert_dtype (fp4/fp8), expert_fmt (e2m1/e4m3),
// expert_block_size (32 or [1, 32]); a top-level expert_dtype counts too.
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

Status parse_official_quantization(const JsonFields& f, ModelConfig& c) {
  // dtype fp8 = E4M3 dense linears with 128x128 block scales; expert_dtype fp4 = FP4 E2M1 routed
  // experts with 1x32 scales. A quantization_config, when present, describes the blocks (e.g.
  // 32x32 tiles).
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

Status validate_common(const ModelConfig& c, const std::string& source) {
  auto name = [&](const char* hf_name) { return field_name(c.naming, hf_name); };
  auto bad = [&](const std::string& field, const std::string& msg) {
    return invalid_argument(source + ": field '" + field + "' " + msg);
  };
  for (const char* f : {"vocab_size", "hidden_size", "num_attention_heads", "head_dim",
                        "q_lora_rank", "o_groups", "o_lora_rank", "moe_intermediate_size",
                        "n_routed_experts", "num_experts_per_tok", "sliding_window",
                        "index_n_heads", "index_head_dim", "index_topk", "hc_mult",
                        "hc_sinkhorn_iters", "max_position_embeddings"}) {
    int64_t v = 0;
    for (const Field& fd : kFields) {
      if (std::string_view(fd.hf) != f) continue;
      std::visit([&](auto member) { v = static_cast<int64_t>(c.*member); }, fd.member);
    }
    if (v <= 0) return bad(name(f), "must be positive, found " + std::to_string(v));
  }
  if (c.n_shared_experts < 0) return bad("n_shared_experts", "must not be negative");
  if (c.num_kv_heads != 1) {
    return unimplemented(
        source + ": num_key_value_heads is " + std::to_string(c.num_kv_heads) +
        "; DeepSeek-V4 attention has one shared K=V head (num_key_value_heads = 1)");
  }
  if (c.num_experts_per_tok > c.n_routed_experts) {
    return bad(name("num_experts_per_tok"),
               std::string("(") + std::to_string(c.num_experts_per_tok) +
                   ") must not exceed n_routed_experts (" + std::to_string(c.n_routed_experts) +
                   ")");
  }
  if (c.num_heads % c.o_groups != 0) {
    return bad(name("num_attention_heads"),
               std::string("(") + std::to_string(c.num_heads) + ") must be divisible by o_groups (" +
                   std::to_string(c.o_groups) + ") for the grouped output projection");
  }
  const std::string rope_field =
      c.naming == ConfigNaming::kOfficial ? "rope_head_dim" : "partial_rotary_factor";
  if (c.rope_head_dim <= 0 || c.rope_head_dim % 2 != 0 || c.rope_head_dim > c.head_dim) {
    return bad(rope_field, "gives a rope width of " + std::to_string(c.rope_head_dim) +
                               " channels; it must be even, positive and at most head_dim (" +
                               std::to_string(c.head_dim) + ")");
  }
  if (c.head_dim % 2 != 0)
    return bad("head_dim", "must be even, found " + std::to_string(c.head_dim));
  if (c.rope_head_dim > c.index_head_dim) {
    return bad("index_head_dim",
               std::string("(") + std::to_string(c.index_head_dim) + ") must be at least the rope width (" +
                   std::to_string(c.rope_head_dim) + "): the indexer ropes its last channels too");
  }
  if (!(c.rms_norm_eps >= 0)) return bad(name("rms_norm_eps"), "must not be negative");
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
      return bad("eos_token_id", std::string("(") + std::to_string(id) + ") is outside the vocabulary");
  }
  if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size) {
    return bad("bos_token_id",
               std::string("(") + std::to_string(c.bos_token_id) + ") is outside the vocabulary");
  }
  return Status::ok_status();
}

}  // namespace deepinfer::io
