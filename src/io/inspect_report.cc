#include "io/inspect_report.h"

#include <map>

namespace deepinfer::io {
namespace {

using nlohmann::json;

json rope_to_json(const RopeSpec& r) {
  json j = {{"theta", r.theta}, {"yarn", r.yarn}};
  if (r.yarn) {
    j["factor"] = r.factor;
    j["original_max_position"] = r.original_max_position;
    j["beta_fast"] = r.beta_fast;
    j["beta_slow"] = r.beta_slow;
    j["attention_factor"] = r.attention_factor;
  }
  return j;
}

json layers_to_json(const std::vector<LayerSpec>& layers) {
  json out = json::array();
  for (const auto& l : layers) {
    json j = {{"attention", attention_kind_name(l.attention)},
              {"compress_ratio", l.compress_ratio},
              {"moe", moe_kind_name(l.moe)}};
    if (l.attention == AttentionKind::kCSA2) {
      j["role"] = csa2_role_name(l.role);
      j["kv_source"] = l.kv_source;
      j["index_source"] = l.index_source;
      j["candidate_source"] = l.candidate_source;
      j["uses_candidates"] = l.uses_candidates;
    }
    if (l.engram) j["engram"] = true;
    out.push_back(std::move(j));
  }
  return out;
}

// V4.1 layer roles as one line: "layers 0-1 SWA, 2,8,14 Full(2), 20 Full(1) + candidates, ...".
// Layers after the last KV source keep only their window ("decoder window-only", spec §6.3).
std::string describe_roles(const ModelConfig& c) {
  const int last_source = c.kv_source_layer_ids.empty() ? -1 : c.kv_source_layer_ids.back();
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerSpec& l = c.layers[static_cast<size_t>(i)];
    std::string k =
        l.attention == AttentionKind::kSWA ? "SWA" : std::string(csa2_role_name(l.role));
    if (l.compress_ratio > 0) {
      k += '(';  // piecewise: GCC 12 -Wrestrict misfires on "(" + to_string()
      k += std::to_string(l.compress_ratio);
      k += ')';
    }
    if (l.candidate_source) k += " candidate source";
    if (l.uses_candidates) k += " in candidates";
    if (i > last_source && l.attention == AttentionKind::kCSA2 && last_source >= 0) {
      k += " window-only";
    }
    auto it = groups.begin();
    while (it != groups.end() && it->first != k) ++it;
    if (it == groups.end()) {
      groups.push_back({k, {i}});
    } else {
      it->second.push_back(i);
    }
  }
  std::string out = "layers ";
  for (size_t g = 0; g < groups.size(); ++g) {
    out += (g ? ", " : "") + describe_index_set(groups[g].second) + " " + groups[g].first;
  }
  return out;
}

json engram_to_json(const EngramSpec& e) {
  return {{"layer_ids", e.layer_ids},
          {"num_embeddings", e.num_embeddings},
          {"max_ngram_size", e.max_ngram_size},
          {"n_heads", e.n_heads},
          {"head_dim", e.head_dim},
          {"vocab_size", e.vocab_size},
          {"pad_token_id", e.pad_token_id},
          {"compressed_vocab_size", e.compressed_vocab_size}};
}

json dspark_to_json(const DSparkSpec& d) {
  return {{"num_stages", d.num_stages},
          {"block_size", d.block_size},
          {"noise_token_id", d.noise_token_id},
          {"target_layer_ids", d.target_layer_ids},
          {"markov_rank", d.markov_rank},
          {"n_routed_experts", d.n_routed_experts},
          {"num_experts_per_tok", d.num_experts_per_tok}};
}

json quantization_to_json(const QuantizationSpec& q) {
  if (!q.quantized) return {{"quantized", false}};
  return {{"quantized", true},
          {"method", q.method},
          {"fmt", q.fmt},
          {"scale_fmt", q.scale_fmt.empty() ? json(nullptr) : json(q.scale_fmt)},
          {"weight_block_size", {q.weight_block_size[0], q.weight_block_size[1]}},
          {"expert_format", expert_format_name(q.expert_format)},
          {"expert_block_size", q.expert_block_size}};
}

std::string describe_quantization(const QuantizationSpec& q) {
  if (!q.quantized) return "none (unquantized BF16/F32 weights)";
  std::string s = q.method + " " + q.fmt + ", " + std::to_string(q.weight_block_size[0]) + "x" +
                  std::to_string(q.weight_block_size[1]) + " block scales";
  if (!q.scale_fmt.empty()) s += " (" + q.scale_fmt + ")";
  if (q.expert_format == ExpertFormat::kFp4) {
    s += "; routed experts fp4 e2m1, 1x" + std::to_string(q.expert_block_size) + " scales";
  } else if (q.expert_format == ExpertFormat::kFp8) {
    s += "; routed experts fp8";
  }
  return s;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

json kv_to_json(const ModelConfig& c) {
  const KvCacheSize kv = kv_cache_size(c);
  return {{"elements_per_token", kv.elements_per_token()},
          {"compressed_elements_per_token", kv.compressed_elements_per_token},
          {"indexer_elements_per_token", kv.indexer_elements_per_token},
          {"bytes_per_token_bf16", 2 * kv.elements_per_token()},
          {"window_elements_per_sequence", kv.window_elements_per_sequence},
          {"window_bytes_per_sequence_bf16", 2 * kv.window_elements_per_sequence},
          {"mtp_elements_per_token", kv.mtp_elements_per_token},
          {"mtp_window_bytes_per_sequence_bf16", 2 * kv.mtp_window_elements_per_sequence},
          {"compressor_state_bytes_per_sequence_f32", 4 * kv.compressor_state_floats_per_sequence}};
}

}  // namespace

json model_config_to_json(const ModelConfig& c) {
  json j = {
      {"model_type", c.model_type},
      {"family", model_family_name(c.family)},
      {"naming", config_naming_name(c.naming)},
      {"source", c.source},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_layers", c.num_layers},
      {"num_heads", c.num_heads},
      {"num_kv_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"rope_head_dim", c.rope_head_dim},
      {"q_lora_rank", c.q_lora_rank},
      {"o_groups", c.o_groups},
      {"o_lora_rank", c.o_lora_rank},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"n_routed_experts", c.n_routed_experts},
      {"n_shared_experts", c.n_shared_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"scoring_func", score_func_name(c.scoring_func)},
      {"routed_scaling_factor", c.routed_scaling_factor},
      {"norm_topk_prob", c.norm_topk_prob},
      {"swiglu_limit", c.swiglu_limit},
      {"sliding_window", c.sliding_window},
      {"main_rope", rope_to_json(c.main_rope)},
      {"compress_rope", rope_to_json(c.compress_rope)},
      {"index_n_heads", c.index_n_heads},
      {"index_head_dim", c.index_head_dim},
      {"index_topk", c.index_topk},
      {"hc_mult", c.hc_mult},
      {"hc_sinkhorn_iters", c.hc_sinkhorn_iters},
      {"hc_eps", c.hc_eps},
      {"rms_norm_eps", c.rms_norm_eps},
      {"max_position_embeddings", c.max_position_embeddings},
      {"num_mtp_layers", c.num_mtp_layers()},
      {"layers", layers_to_json(c.layers)},
      {"mtp_layers", layers_to_json(c.mtp_layers)},
      {"bos_token_id", c.bos_token_id},
      {"eos_token_ids", c.eos_token_ids},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"quantization", quantization_to_json(c.quantization)},
  };
  if (c.family == ModelFamily::kDeepseekV41) {
    j["gate_temp"] = c.gate_temp;
    j["kv_source_layer_ids"] = c.kv_source_layer_ids;
    j["index_source_layer_ids"] = c.index_source_layer_ids;
    j["candidate_source_layer_id"] = c.candidate_source_layer_id;
    j["candidate_topk_blocks"] = c.candidate_topk_blocks;
    j["candidate_block_size"] = c.candidate_block_size;
    j["engram"] = engram_to_json(c.engram);
    j["dspark"] = dspark_to_json(c.dspark);
    j["image_token_id"] = c.image_token_id;
  }
  return j;
}

json inspect_config(const ModelConfig& c) {
  int64_t params = 0, mtp_params = 0;
  for (const auto& t : expected_tensors(c)) {
    if (t.name == "head.weight" && c.tie_word_embeddings) continue;
    (t.mtp ? mtp_params : params) += numel(t.shape);
  }
  const bool v41 = c.family == ModelFamily::kDeepseekV41;
  std::string drafter = "none";
  if (v41 && c.dspark.num_stages > 0) {
    drafter = "dspark: " + std::to_string(c.dspark.num_stages) + " stage(s), block " +
              std::to_string(c.dspark.block_size) + ", target layers " +
              describe_index_set(c.dspark.target_layer_ids) + ", " +
              std::to_string(c.dspark.n_routed_experts) + " experts top-" +
              std::to_string(c.dspark.num_experts_per_tok) + ", Markov rank " +
              std::to_string(c.dspark.markov_rank);
  } else if (!v41 && !c.mtp_layers.empty()) {
    drafter = "mtp" + describe_attention_layout(c.mtp_layers).substr(6);
  }
  json kinds = {{"attention", describe_attention_layout(c.layers)},
                {"moe", describe_moe_layout(c.layers)},
                {"mtp", drafter},
                {"counts",
                 {{"SWA", c.count(AttentionKind::kSWA)},
                  {"CSA", c.count(AttentionKind::kCSA)},
                  {"HCA", c.count(AttentionKind::kHCA)},
                  {"hash", c.count(MoeKind::kHash)},
                  {"score", c.count(MoeKind::kScore)}}}};
  if (v41) {
    kinds["counts"]["CSA2"] = c.count(AttentionKind::kCSA2);
    kinds["roles"] = describe_roles(c);
    kinds["engram"] = c.engram.layer_ids.empty()
                          ? std::string("none")
                          : "layers " + describe_index_set(c.engram.layer_ids);
  }
  return {
      {"model_type", c.model_type},
      {"family", model_family_name(c.family)},
      {"config_naming", config_naming_name(c.naming)},
      {"config", model_config_to_json(c)},
      {"layer_kinds", kinds},
      {"quantization_declared", describe_quantization(c.quantization)},
      {"parameters_from_config",
       {{"main", params}, {"mtp", mtp_params}, {"total", params + mtp_params}}},
      {"kv_cache", kv_to_json(c)},
  };
}

json inspect_checkpoint(const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  json out = inspect_config(c);
  out["model_dir"] = ck.model_dir();
  out["name_family"] = name_family_name(ck.name_family());
  out["layout"] = store_layout_name(ck.store().layout());
  out["files"] = ck.store().files().size();

  struct Tally {
    int64_t tensors = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, Tally> by_dtype;
  std::map<std::string, Tally> by_group;
  std::map<std::string, int64_t> formats;  // "linear fp8", "expert fp4", ...
  int64_t total_params = 0, total_bytes = 0, found = 0;
  const Weight* embed = ck.find("embed.weight");
  for (const auto& t : ck.expected()) {
    const Weight* w = ck.find(t.name);
    if (w == nullptr) continue;
    if (t.name == "head.weight" && embed != nullptr && w->stored_name == embed->stored_name)
      continue;
    ++found;
    const int64_t params = numel(w->logical_shape);
    const std::string label = w->format == WeightFormat::kFp4Block
                                  ? std::string("FP4_E2M1")
                                  : std::string(dtype_name(w->data.dtype));
    Tally& d = by_dtype[label];
    d.tensors += 1;
    d.elements += params;
    d.bytes += w->data.nbytes();
    int64_t bytes = w->data.nbytes();
    if (w->scale) {
      Tally& s = by_dtype[std::string(dtype_name(w->scale->dtype)) + " (scales)"];
      s.tensors += 1;
      s.elements += w->scale->numel();
      s.bytes += w->scale->nbytes();
      bytes += w->scale->nbytes();
    }
    Tally& g = by_group[std::string(weight_group_name(t.group))];
    g.tensors += 1;
    g.elements += params;
    g.bytes += bytes;
    total_params += params;
    total_bytes += bytes;
    if (t.role == TensorRole::kLinear || t.role == TensorRole::kExpertLinear) {
      formats[std::string(t.role == TensorRole::kLinear ? "dense" : "experts") + " " +
              std::string(weight_format_name(w->format))] += 1;
    }
  }
  json dtypes = json::array();
  for (const auto& [k, v] : by_dtype) {
    dtypes.push_back(
        {{"dtype", k}, {"tensors", v.tensors}, {"elements", v.elements}, {"bytes", v.bytes}});
  }
  json groups = json::object();
  for (const auto& [k, v] : by_group) {
    groups[k] = {{"tensors", v.tensors}, {"params", v.elements}, {"bytes", v.bytes}};
  }
  out["parameters"] = {
      {"total", total_params}, {"bytes", total_bytes}, {"by_dtype", dtypes}, {"by_group", groups}};
  out["quantization_found"] = formats;
  out["mtp"] = {{"layers_in_config", c.num_mtp_layers()}, {"available", ck.mtp_available()}};
  if (c.family == ModelFamily::kDeepseekV41) {
    out["mtp"]["kind"] = "dspark";
    // The Engram tables stay memory-mapped in host memory on every backend (a step reads a few
    // rows per token): say how much that is.
    int64_t table_bytes = 0, tables = 0;
    for (const auto& t : ck.expected()) {
      const Weight* w = t.role == TensorRole::kEngramTable ? ck.find(t.name) : nullptr;
      if (w == nullptr) continue;
      ++tables;
      table_bytes += w->data.nbytes() + (w->scale ? w->scale->nbytes() : 0);
    }
    out["engram_tables"] = {{"tables", tables}, {"bytes", table_bytes}};
  }
  out["tensors"] = {{"stored", ck.store().size()},
                    {"expected", ck.expected().size()},
                    {"found", found},
                    {"unknown", ck.unknown_tensors().size()}};
  json unknown = json::array();
  for (size_t i = 0; i < ck.unknown_tensors().size() && i < 100; ++i)
    unknown.push_back(ck.unknown_tensors()[i]);
  out["unknown_tensors"] = unknown;
  out["warnings"] = ck.warnings();
  return out;
}

}  // namespace deepinfer::io
