// Tensor-name families (spec §4, §4.x, §6.6). Canonical names inside DeepInfer are the official
// ones (`embed.weight`, `layers.3.attn.wq_a.weight`, `hc_head_fn`, `mtp.0.e_proj.weight`).
// Hugging Face `save_pretrained` writes the same module tree under a `model.` prefix with a few
// renames, which differ between transformers' deepseek_v4 and deepseek_v41 modules; this maps
// those names onto the canonical ones and back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::io {

enum class NameFamily : uint8_t {
  kOfficial,        // as in DeepSeek's released safetensors
  kSavePretrained,  // as HF transformers' deepseek_v4 save_pretrained writes them
  // transformers' deepseek_v41: `model.` + the official sub-names (model.embed.weight,
  // model.layers.N..., model.norm.weight) and lm_head.weight; no mtp.* (not in transformers).
  kTransformersV41,
};
std::string_view name_family_name(NameFamily f);  // "official", "save_pretrained", ...

// A `model.`-prefixed family when any stored name starts with "model." (which one follows the
// config's model family), else official.
NameFamily detect_name_family(const std::vector<std::string>& stored_names, bool v41 = false);

// Stored name -> canonical name. Official names map to themselves.
std::string to_canonical_name(std::string_view stored, NameFamily family);
// Canonical name -> the name this family stores it under.
std::string to_stored_name(std::string_view canonical, NameFamily family);

}  // namespace deepinfer::io
