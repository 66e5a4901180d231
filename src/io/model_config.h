// ModelConfig: the typed form of a DeepSeek-V4 family config.json (spec §1, §6).
//
// Two families reach here. DeepSeek-V4 in two spellings that give the same struct: the Hugging
// Face `DeepseekV4Config` names (model_type "deepseek_v4": hidden_size, num_hidden_layers,
// layer_types, rope_parameters, ..., plus the legacy keys HF folds in: compress_ratios,
// num_hash_layers, qk_rope_head_dim, rope_scaling, compress_rate_csa/hca) and the official
// `inference/config.json` (ModelArgs names: dim, n_layers, compress_ratios, ...; it has no
// model_type and is recognised by its keys). DeepSeek-V4.1 (config_parser_v41.cc): the released
// composite layout (model_type "deepseek_v41" with a `text_config` section), the flat text
// config (model_type "deepseek_v41_text"), and official ModelArgs names plus V4.1's own keys.
// Defaults are the released Flash values of each family. Every size the model needs comes
// from here, never from Flash constants.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace deepinfer::io {

enum class ConfigNaming : uint8_t { kHuggingFace, kOfficial };
enum class ModelFamily : uint8_t { kDeepseekV4, kDeepseekV41 };
enum class AttentionKind : uint8_t {
  kSWA,   // sliding window only
  kCSA,   // V4 compressed sparse (ratio 4, overlapping windows, own indexer)
  kHCA,   // V4 heavily compressed (every compressed row)
  kCSA2,  // V4.1 compressed sparse (ratio 1 or 2, KV and picks shared across layers)
};
// A V4.1 compressed layer's part in the shared compressed KV (spec §6.2).
enum class Csa2Role : uint8_t {
  kNone,     // SWA, or a V4 layer
  kFull,     // KV source: compressor, compressed KV, index keys, and its own top-k
  kReindex,  // index source that is no KV source: its own top-k over its source's keys
  kReuse,    // reads the KV of its source and the picks of the latest index source
};
enum class MoeKind : uint8_t { kHash, kScore };
enum class ScoreFunc : uint8_t { kSqrtSoftplus, kSoftmax, kSigmoid };
// How routed experts are stored when the checkpoint is quantized.
enum class ExpertFormat : uint8_t { kSameAsDense, kFp4, kFp8 };

std::string_view config_naming_name(ConfigNaming n);    // "huggingface", "official"
std::string_view model_family_name(ModelFamily f);      // "deepseek_v4", "deepseek_v41"
std::string_view attention_kind_name(AttentionKind k);  // "SWA", "CSA", "HCA", "CSA2"
std::string_view csa2_role_name(Csa2Role r);            // "-", "Full", "Reindex", "Reuse"
std::string_view moe_kind_name(MoeKind k);              // "hash", "score"
std::string_view score_func_name(ScoreFunc f);          // "sqrtsoftplus", ...
std::string_view expert_format_name(ExpertFormat f);    // "same", "fp4", "fp8"

struct LayerSpec {
  AttentionKind attention = AttentionKind::kSWA;
  int compress_ratio = 0;  // 0 for SWA; CSA layers overlap windows and own an indexer
  MoeKind moe = MoeKind::kScore;
  // V4.1 (kCSA2 layers; -1 / false elsewhere): the layer whose compressed KV and index keys it
  // reads (itself for a Full layer), the layer whose top-k picks it attends to (itself for an
  // index source), whether it makes the candidate blocks, whether its top-k is restricted to
  // them; and (any V4.1 layer) whether an Engram memory writes into its streams first.
  Csa2Role role = Csa2Role::kNone;
  int kv_source = -1;
  int index_source = -1;
  bool candidate_source = false;
  bool uses_candidates = false;
  bool engram = false;
  bool operator==(const LayerSpec&) const = default;
};

// V4.1 Engram conditional memory (spec §6.1, §6.7 items 1-2).
struct EngramSpec {
  std::vector<int> layer_ids;              // layers with an Engram module (released [1, 14])
  std::vector<int64_t> num_embeddings;     // table rows per layer
  int max_ngram_size = 4;                  // n-grams 2..N
  int n_heads = 8;                         // hash heads per n-gram size
  int head_dim = 256;                      // table row width
  int64_t vocab_size = 16000000;           // where each prime search starts
  int64_t pad_token_id = 2;                // raw token id whose compressed id pads look-backs
  int64_t compressed_vocab_size = 99092;   // must equal the tokenizer-derived count
  bool operator==(const EngramSpec&) const = default;
};

// V4.1 DSpark drafter (spec §6.4, §6.7 item 10); num_stages 0 = none.
struct DSparkSpec {
  int num_stages = 0;                // num_nextn_predict_layers
  int block_size = 5;                // tokens per draft block
  int64_t noise_token_id = 128799;   // fills the block's slots after the anchor
  std::vector<int> target_layer_ids; // backbone layers whose attention input feeds the drafter
  int markov_rank = 256;
  int n_routed_experts = 128;
  int num_experts_per_tok = 3;
  bool operator==(const DSparkSpec&) const = default;
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
  ModelFamily family = ModelFamily::kDeepseekV4;
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
  // V4.1 router (spec §6.7 item 5): logits divided by gate_temp; the selected weights are
  // normalised only when top_k > 1, dividing by their sum + 1e-20. V4: always normalised.
  double gate_temp = 1.0;

  int sliding_window = 128;
  RopeSpec main_rope;      // SWA layers
  RopeSpec compress_rope;  // CSA and HCA layers (and their compressor / indexer)
  int index_n_heads = 64;
  int index_head_dim = 128;
  int index_topk = 512;
  // V4.1 CSA2 (spec §6.2): the shared-KV schedule and the hierarchical candidate selection.
  std::vector<int> kv_source_layer_ids, index_source_layer_ids;
  int candidate_source_layer_id = -1;  // -1: no candidate level
  int candidate_topk_blocks = 2048;
  int candidate_block_size = 8;

  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 1048576;

  std::vector<LayerSpec> layers;      // num_layers entries
  // Draft layers: V4's MTP blocks, V4.1's DSpark stages (num_nextn_predict_layers entries).
  std::vector<LayerSpec> mtp_layers;
  EngramSpec engram;  // V4.1
  DSparkSpec dspark;  // V4.1
  int64_t image_token_id = -1;  // V4.1 image placeholder (the text engine never feeds images)
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

// KV cache footprint (spec §3, §6.3), in elements (one element = one stored value of a row).
struct KvCacheSize {
  double compressed_elements_per_token = 0;  // attention compressed rows, main layers (V4.1:
                                             // per KV source, not per layer)
  double indexer_elements_per_token = 0;     // indexer key rows (V4 CSA layers, V4.1 sources)
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
