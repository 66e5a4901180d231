#include "io/tensor_names.h"

#include <array>
#include <utility>

namespace deepinfer::io {
namespace {

constexpr std::string_view kPrefix = "model.";

// save_pretrained name (after the "model." prefix) <-> canonical, for whole names.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kTopLevel = {{
    {"embed_tokens.weight", "embed.weight"},
    {"hc_head.hc_fn", "hc_head_fn"},
    {"hc_head.hc_base", "hc_head_base"},
    {"hc_head.hc_scale", "hc_head_scale"},
}};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// "layers.12.attn.norm.weight" / "mtp.0.attn.norm.weight": the attention's own KV norm (not
// attn.compressor.norm / attn.indexer.compressor.norm, which keep their names).
bool is_block_attn_norm(std::string_view name, std::string_view norm_suffix) {
  for (std::string_view block : {std::string_view("layers."), std::string_view("mtp.")}) {
    if (!starts_with(name, block)) continue;
    std::string_view rest = name.substr(block.size());
    size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits == 0) return false;
    return rest.substr(digits) == norm_suffix;
  }
  return false;
}

}  // namespace

std::string_view name_family_name(NameFamily f) {
  switch (f) {
    case NameFamily::kOfficial:
      return "official";
    case NameFamily::kSavePretrained:
      return "save_pretrained";
    case NameFamily::kTransformersV41:
      return "transformers_v41";
  }
  return "?";
}

NameFamily detect_name_family(const std::vector<std::string>& stored_names, bool v41) {
  for (const auto& n : stored_names) {
    if (starts_with(n, kPrefix)) return v41 ? NameFamily::kTransformersV41 : NameFamily::kSavePretrained;
  }
  return NameFamily::kOfficial;
}

namespace {

std::string without_scale_inv(std::string out) {
  // Quantized HF saves call the block scale `weight_scale_inv` (same meaning as `.scale`).
  if (ends_with(out, ".weight_scale_inv")) {
    out.resize(out.size() - std::string_view(".weight_scale_inv").size());
    out += ".scale";
  }
  return out;
}

}  // namespace

std::string to_canonical_name(std::string_view stored, NameFamily family) {
  if (family == NameFamily::kOfficial) return std::string(stored);
  std::string_view name = stored;
  if (starts_with(name, kPrefix)) name.remove_prefix(kPrefix.size());
  if (family == NameFamily::kTransformersV41) {
    if (name == "lm_head.weight") return "head.weight";
    return without_scale_inv(std::string(name));
  }
  for (const auto& [hf, canonical] : kTopLevel) {
    if (name == hf) return std::string(canonical);
  }
  if (name == "lm_head.weight") return "head.weight";
  std::string out = without_scale_inv(std::string(name));
  if (is_block_attn_norm(out, ".attn.norm.weight")) {
    out.replace(out.size() - std::string_view("norm.weight").size(), std::string::npos,
                "kv_norm.weight");
  }
  return out;
}

std::string to_stored_name(std::string_view canonical, NameFamily family) {
  if (family == NameFamily::kOfficial) return std::string(canonical);
  if (family == NameFamily::kTransformersV41) {
    if (canonical == "head.weight") return "lm_head.weight";
    return std::string(kPrefix) + std::string(canonical);
  }
  if (canonical == "head.weight") return "head.weight";  // save_pretrained keeps it unprefixed
  for (const auto& [hf, c] : kTopLevel) {
    if (canonical == c) return std::string(kPrefix) + std::string(hf);
  }
  std::string out(canonical);
  if (is_block_attn_norm(out, ".attn.kv_norm.weight")) {
    out.replace(out.size() - std::string_view("kv_norm.weight").size(), std::string::npos,
                "norm.weight");
  }
  return std::string(kPrefix) + out;
}

}  // namespace deepinfer::io
