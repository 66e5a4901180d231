#include "io/model_config.h"

#include <map>
#include <tuple>
#include <utility>

namespace deepinfer::io {

std::string_view config_naming_name(ConfigNaming n) {
  return n == ConfigNaming::kHuggingFace ? "huggingface" : "official";
}

std::string_view model_family_name(ModelFamily f) {
  return f == ModelFamily::kDeepseekV41 ? "deepseek_v41" : "deepseek_v4";
}

std::string_view attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::kSWA:
      return "SWA";
    case AttentionKind::kCSA:
      return "CSA";
    case AttentionKind::kHCA:
      return "HCA";
    case AttentionKind::kCSA2:
      return "CSA2";
  }
  return "?";
}

std::string_view csa2_role_name(Csa2Role r) {
  switch (r) {
    case Csa2Role::kNone:
      return "-";
    case Csa2Role::kFull:
      return "Full";
    case Csa2Role::kReindex:
      return "Reindex";
    case Csa2Role::kReuse:
      return "Reuse";
  }
  return "?";
}

std::string_view moe_kind_name(MoeKind k) { return k == MoeKind::kHash ? "hash" : "score"; }

std::string_view score_func_name(ScoreFunc f) {
  switch (f) {
    case ScoreFunc::kSqrtSoftplus:
      return "sqrtsoftplus";
    case ScoreFunc::kSoftmax:
      return "softmax";
    case ScoreFunc::kSigmoid:
      return "sigmoid";
  }
  return "?";
}

std::string_view expert_format_name(ExpertFormat f) {
  switch (f) {
    case ExpertFormat::kSameAsDense:
      return "same";
    case ExpertFormat::kFp4:
      return "fp4";
    case ExpertFormat::kFp8:
      return "fp8";
  }
  return "?";
}

int ModelConfig::count(AttentionKind kind) const {
  int n = 0;
  for (const auto& l : layers) n += l.attention == kind;
  return n;
}

int ModelConfig::count(MoeKind kind) const {
  int n = 0;
  for (const auto& l : layers) n += l.moe == kind;
  return n;
}

bool ModelConfig::same_model(const ModelConfig& o) const {
  auto key = [](const ModelConfig& c) {
    return std::tie(
        c.model_type, c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads,
        c.head_dim, c.rope_head_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank,
        c.moe_intermediate_size, c.n_routed_experts, c.n_shared_experts, c.num_experts_per_tok,
        c.scoring_func, c.routed_scaling_factor, c.norm_topk_prob, c.swiglu_limit, c.sliding_window,
        c.main_rope, c.compress_rope, c.index_n_heads, c.index_head_dim, c.index_topk, c.hc_mult,
        c.hc_sinkhorn_iters, c.hc_eps, c.rms_norm_eps, c.max_position_embeddings, c.layers,
        c.mtp_layers, c.bos_token_id, c.eos_token_ids, c.tie_word_embeddings, c.quantization,
        c.family, c.gate_temp, c.kv_source_layer_ids, c.index_source_layer_ids,
        c.candidate_source_layer_id, c.candidate_topk_blocks, c.candidate_block_size, c.engram,
        c.dspark, c.image_token_id);
  };
  return key(*this) == key(o);
}

std::string describe_index_set(const std::vector<int>& ids) {
  std::string out;
  size_t i = 0;
  while (i < ids.size()) {
    if (!out.empty()) out += ",";
    size_t j = i;
    if (i + 1 < ids.size()) {
      const int step = ids[i + 1] - ids[i];
      while (j + 1 < ids.size() && ids[j + 1] - ids[j] == step) ++j;
      const size_t run = j - i + 1;
      if (step == 1 && run >= 2) {
        out += std::to_string(ids[i]) + "-" + std::to_string(ids[j]);
        i = j + 1;
        continue;
      }
      if (run >= 3) {
        out += std::to_string(ids[i]) + "," + std::to_string(ids[i + 1]) + ",..," +
               std::to_string(ids[j]);
        i = j + 1;
        continue;
      }
    }
    out += std::to_string(ids[i]);
    ++i;
  }
  return out;
}

namespace {

template <typename Key, typename Label>
std::string describe_groups(const std::vector<LayerSpec>& layers, Key key, Label label) {
  // Groups in order of first appearance.
  std::vector<std::pair<decltype(key(layers[0])), std::vector<int>>> groups;
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    const auto k = key(layers[static_cast<size_t>(i)]);
    auto it = groups.begin();
    while (it != groups.end() && !(it->first == k)) ++it;
    if (it == groups.end())
      groups.push_back({k, {i}});
    else
      it->second.push_back(i);
  }
  std::string out = "layers ";
  for (size_t g = 0; g < groups.size(); ++g) {
    if (g > 0) out += ", ";
    out += describe_index_set(groups[g].second) + " " + label(groups[g].first);
  }
  return out;
}

}  // namespace

std::string describe_attention_layout(const std::vector<LayerSpec>& layers) {
  if (layers.empty()) return "no layers";
  return describe_groups(
      layers, [](const LayerSpec& l) { return std::pair(l.attention, l.compress_ratio); },
      [](const std::pair<AttentionKind, int>& k) {
        std::string s(attention_kind_name(k.first));
        if (k.first != AttentionKind::kSWA) {
          s += '(';  // appended piecewise: GCC 12 -Wrestrict misfires on "(" + to_string()
          s += std::to_string(k.second);
          s += ')';
        }
        return s;
      });
}

std::string describe_moe_layout(const std::vector<LayerSpec>& layers) {
  if (layers.empty()) return "no layers";
  return describe_groups(
      layers, [](const LayerSpec& l) { return l.moe; },
      [](MoeKind k) { return std::string(moe_kind_name(k)); });
}

namespace {

// V4.1 (spec §6.3): the KV sources hold the compressed KV and index keys every later layer
// reads, so a token costs (d + d_I) / m elements per source; every layer (and DSpark stage)
// keeps a window; a ratio-2 source keeps one pending FP32 (kv, gate) row pair per token of its
// unfinished group.
KvCacheSize kv_cache_size_v41(const ModelConfig& c) {
  KvCacheSize s;
  for (const auto& l : c.layers) {
    s.window_elements_per_sequence += static_cast<int64_t>(c.sliding_window) * c.head_dim;
    if (l.role != Csa2Role::kFull) continue;
    s.compressed_elements_per_token += static_cast<double>(c.head_dim) / l.compress_ratio;
    s.indexer_elements_per_token += static_cast<double>(c.index_head_dim) / l.compress_ratio;
    if (l.compress_ratio > 1) s.compressor_state_floats_per_sequence += 2 * l.compress_ratio * c.head_dim;
  }
  s.mtp_window_elements_per_sequence =
      static_cast<int64_t>(c.mtp_layers.size()) * c.sliding_window * c.head_dim;
  return s;
}

}  // namespace

KvCacheSize kv_cache_size(const ModelConfig& c) {
  if (c.family == ModelFamily::kDeepseekV41) return kv_cache_size_v41(c);
  KvCacheSize s;
  auto per_token = [&](const LayerSpec& l, double& compressed, double& indexer) {
    if (l.attention == AttentionKind::kSWA || l.compress_ratio <= 0) return;
    compressed += static_cast<double>(c.head_dim) / l.compress_ratio;
    if (l.attention == AttentionKind::kCSA) {
      indexer += static_cast<double>(c.index_head_dim) / l.compress_ratio;
    }
  };
  // Running compressor state (reference Compressor.kv_state + score_state, FP32): overlapping
  // (CSA) windows keep 2m slots of 2d channels, others m slots of d.
  auto state = [&](const LayerSpec& l) -> int64_t {
    if (l.attention == AttentionKind::kSWA) return 0;
    const int64_t m = l.compress_ratio;
    if (l.attention == AttentionKind::kCSA) {
      return 2 * (2 * m) * (2 * c.head_dim) + 2 * (2 * m) * (2 * c.index_head_dim);
    }
    return 2 * m * c.head_dim;
  };
  for (const auto& l : c.layers) {
    per_token(l, s.compressed_elements_per_token, s.indexer_elements_per_token);
    s.window_elements_per_sequence += static_cast<int64_t>(c.sliding_window) * c.head_dim;
    s.compressor_state_floats_per_sequence += state(l);
  }
  for (const auto& l : c.mtp_layers) {
    double idx = 0;
    per_token(l, s.mtp_elements_per_token, idx);
    s.mtp_elements_per_token += idx;
    s.mtp_window_elements_per_sequence += static_cast<int64_t>(c.sliding_window) * c.head_dim;
  }
  return s;
}

}  // namespace deepinfer::io
