// Pieces of config.json parsing shared by the families and spellings (config_parser.cc for
// DeepSeek-V4 and the dispatch, config_parser_v41.cc for V4.1). Internal to src/io.
//
// Most ModelConfig members have one Hugging Face name and one official (ModelArgs) name; the
// table in config_fields.cc lists each member once with both, so a field is read, and named
// in errors, the same way in every spelling.
#pragma once

#include <string>

#include "base/status.h"
#include "io/json_fields.h"
#include "io/model_config.h"

namespace deepinfer::io {

// Reads every member of the shared table present in `f` under the spelling's name; required
// members (sizes) must be present.
Status read_common_fields(const JsonFields& f, ConfigNaming naming, ModelConfig& c);

// The name a member has in `naming` (for messages), e.g. hidden_size / dim. Members without an
// official name keep their Hugging Face one.
std::string field_name(ConfigNaming naming, const char* hf_name);

// Fields that are not ModelConfig members of the table but that every family reads in both
// spellings, each under the spelling's own key:
// scoring_func (Hugging Face) / score_func (official).
Status parse_score_func(const JsonFields& f, ConfigNaming naming, ScoreFunc& out);
// The rope width: partial_rotary_factor x head_dim or qk_rope_head_dim (Hugging Face),
// rope_head_dim (official).
Status read_rope_width(const JsonFields& f, ConfigNaming naming, ModelConfig& c);
// c.num_layers (read by read_common_fields) must be a positive layer count, at most 100000.
Status check_layer_count(const JsonFields& f, ConfigNaming naming, const ModelConfig& c);
// MTP layers (V4) or DSpark stages (V4.1): num_nextn_predict_layers (Hugging Face) /
// n_mtp_layers (official), 0..64; `n` keeps the family's default when the key is absent.
Status read_stage_count(const JsonFields& f, ConfigNaming naming, int& n);
// The rope sections: parse_hf_rope or parse_official_rope.
Status parse_rope(const JsonFields& f, ConfigNaming naming, ModelConfig& c);

// eos_token_id: an integer or a list of integers.
Status parse_eos(const JsonFields& f, ModelConfig& c);
// rope_theta / compress_rope_theta and rope_parameters or rope_scaling (YaRN on the compress
// rope only), Hugging Face spelling.
Status parse_hf_rope(const JsonFields& f, ModelConfig& c);
// Official spelling: rope_theta, compress_rope_theta, rope_factor, original_seq_len, beta_*.
Status parse_official_rope(const JsonFields& f, ModelConfig& c);
// `quantization_config`, when present.
Status parse_quantization_config(const JsonFields& f, ModelConfig& c);
// Official spelling: dtype / expert_dtype / scale_fmt, or a quantization_config.
Status parse_official_quantization(const JsonFields& f, ModelConfig& c);

// DeepSeek-V4.1 (config_parser_v41.cc): `text` holds the text fields (the text_config section,
// or the top level of a flat config), `top` the top level (quantization_config, image_token_id).
Status parse_v41(const JsonFields& text, const JsonFields& top, ConfigNaming naming,
                 ModelConfig& c);

// Validation every family shares (sizes positive, heads divisible by groups, rope width,
// token ids inside the vocabulary, ...); errors name the field in the config's spelling.
Status validate_common(const ModelConfig& c, const std::string& source);

}  // namespace deepinfer::io
