// ModelConfig: the typed form of a DeepSeek-V4 config.json (spec §1).
//
// Two spellings reach here and give the same struct: the Hugging Face `DeepseekV4Config` names
// (model_type "deepseek_v4": hidden_size, num_hidden_layers, layer_types, rope_parameters, ...,
// plus the legacy keys HF folds in: compress_ratios, num_hash_layers, qk_rope_head_dim,
// rope_scaling, compress_rate_csa/hca) and the official `inference/config.json` (ModelArgs
// names: dim, n_layers, compress_ratios, ...; it has no model_type and is recognised by its
// keys). Defaults are the V4-Flash values of spec §1.1/§1.2. Every size the model needs comes
// from here, never from V4-Flash constants.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace deepinfer::io {

enum class ConfigNaming : uint8_t { kHuggingFace, kOfficial };
enum class AttentionKind : uint8_t {
  kSWA,
  kCSA,
  kHCA
};  // sliding / compressed sparse / heavily compressed
enum class MoeKind : uint8_t { kHash, kScore };
enum class ScoreFunc : uint8_t { kSqrtSoftplus, kSoftmax, kSigmoid };
// How routed experts are stored when the checkpoint is quantized.
enum class ExpertFormat : uint8_t { kSameAsDense, kFp4, kFp8 };

std::string_view config_naming_name(ConfigNaming n);    // "huggingface", "official"
std::string_view attention_kind_name(AttentionKind k);  // "SWA", "CSA", "HCA"
std::string_view moe_kind_name(MoeKind k);              // "hash", "score"
std::string_view score_func_name(ScoreFunc f);          // "sqrtsoftplus", ...
std::string_view expert_format_name(ExpertFormat f);    // "same", "fp4", "fp8"

struct LayerSpec {
  AttentionKind attention = AttentionKind::kSWA;
  int compress_ratio = 0;  // 0 for SWA; CSA layers overlap windows and own an indexer
  MoeKind moe = MoeKind::kScore;
  bool operator==(const LayerSpec&) const = default;
};

struct RopeSpec {
  double theta = 10000.0;
  bool yarn = false;  // the fields below apply only when yarn is set
  double factor = 1.0;
  int64_t original_max_position = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 1.0;  // YaRN magnitude scale; the V4 reference uses 1
  bool operator==(const RopeSpec&) const = default;
};

struct QuantizationSpec {
  bool quantized = false;  // false: a plain BF16/F16/F32 checkpoint
  std::string method;      // "fp8"
  std::string fmt;         // "e4m3"
  std::string scale_fmt;   // "ue8m0" or "" (any float scale)
  std::array<int, 2> weight_block_size{128, 128};
  ExpertFormat expert_format = ExpertFormat::kSameAsDense;
  int expert_block_size = 32;  // FP4 experts: one scale per 1 x 32 along the input dim
  bool operator==(const QuantizationSpec&) const = default;
};

struct ModelConfig {
  ConfigNaming naming = ConfigNaming::kHuggingFace;
  std::string source;  // the file it came from, for messages (not compared)
  std::string model_type = "deepseek_v4";

  int64_t vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 1;
  int head_dim = 0;
  int rope_head_dim = 64;  // the last rope_head_dim channels of each head get RoPE
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;

  int moe_intermediate_size = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int num_experts_per_tok = 0;
  ScoreFunc scoring_func = ScoreFunc::kSqrtSoftplus;
  double routed_scaling_factor = 1.5;
  bool norm_topk_prob = true;
  double swiglu_limit = 10.0;

  int sliding_window = 128;
  RopeSpec main_rope;      // SWA layers
  RopeSpec compress_rope;  // CSA and HCA layers (and their compressor / indexer)
  int index_n_heads = 64;
  int index_head_dim = 128;
  int index_topk = 512;

  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 1048576;

  std::vector<LayerSpec> layers;      // num_layers entries
  std::vector<LayerSpec> mtp_layers;  // num_nextn_predict_layers / n_mtp_layers entries
  int64_t bos_token_id = 0;
  std::vector<int64_t> eos_token_ids{1};
  bool tie_word_embeddings = false;
  QuantizationSpec quantization;

  int num_mtp_layers() const { return static_cast<int>(mtp_layers.size()); }
  const RopeSpec& rope_for(AttentionKind kind) const {
    return kind == AttentionKind::kSWA ? main_rope : compress_rope;
  }
  int count(AttentionKind kind) const;
  int count(MoeKind kind) const;

  // Everything but naming and source: the same model spelled two ways compares equal.
  bool same_model(const ModelConfig& other) const;
};

// Parses config.json text. `source` names the file in messages. Errors: kInvalidArgument for a
// malformed file or field (naming the field and what was expected), kUnimplemented for a valid
// config of another model_type.
Expected<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source);
// Reads `path`: a config.json file, or a model directory holding one.
Expected<ModelConfig> load_model_config(const std::string& path);

// "layers 0-1 SWA, 2,4,..,42 CSA(4), 3,5,..,41 HCA(128)".
std::string describe_attention_layout(const std::vector<LayerSpec>& layers);
// "layers 0-2 hash, 3-42 score".
std::string describe_moe_layout(const std::vector<LayerSpec>& layers);
// "0-1", "2,4,..,42", "0,3,7": compact text for a sorted list of layer ids.
std::string describe_index_set(const std::vector<int>& ids);

// KV cache footprint (spec §3), in elements (one element = one stored value of a row).
struct KvCacheSize {
  double compressed_elements_per_token = 0;  // attention compressed rows, main layers
  double indexer_elements_per_token = 0;     // indexer key rows (CSA layers)
  double elements_per_token() const {
    return compressed_elements_per_token + indexer_elements_per_token;
  }
  int64_t window_elements_per_sequence = 0;  // sliding-window ring of every main layer
  int64_t mtp_window_elements_per_sequence = 0;
  double mtp_elements_per_token = 0;
  int64_t compressor_state_floats_per_sequence = 0;  // FP32 running state (kv + score)
};
KvCacheSize kv_cache_size(const ModelConfig& config);

}  // namespace deepinfer::io
