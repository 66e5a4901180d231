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

Status parse_score_func(const JsonFields& f, const char* key, ScoreFunc& out);
// eos_token_id: an integer or a list of integers.
Status parse_eos(const JsonFields& f, ModelConfig& c);
// rope width: partial_rotary_factor x head_dim, or qk_rope_head_dim.
Status parse_rope_width(const JsonFields& f, ModelConfig& c);
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
