// DeepSeek-V4.1 config.json -> ModelConfig (spec §1.3, §6, §6.7): the text fields in Hugging
// Face names (transformers' DeepseekV41TextConfig, also what the released checkpoint's
// text_config section holds) or in official ModelArgs names plus V4.1's own keys, then the
// CSA2 layer schedule derived and validated: which layer is a KV source (Full), which only
// re-selects (Reindex), which reuses, which layer each reads, the candidate level, Engram
// layers and the DSpark stages. Defaults follow transformers' derivations where the config
// is silent (a custom compress_ratios without sources: the first layer of each same-ratio run
// is the source).
#include <algorithm>
#include <string>
#include <vector>

#include "io/config_fields.h"

namespace deepinfer::io {
namespace {

// The released Flash schedule (transformers' default_compress_ratios / sources).
std::vector<int> released_ratios() {
  std::vector<int> r = {0, 0};
  r.insert(r.end(), 18, 2);
  r.insert(r.end(), 20, 1);
  return r;
}
const std::vector<int> kReleasedKvSources = {2, 8, 14, 20};
const std::vector<int> kReleasedIndexSources = {2, 8, 14, 20, 24, 28, 32, 36};

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string list_text(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Status strictly_increasing(const JsonFields& f, const char* key, const std::vector<int>& ids,
                           int n, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= n) {
      return f.invalid(key, "names layer " + std::to_string(ids[i]) + ", but the model has " +
                                std::to_string(n) + " " + what);
    }
    if (i > 0 && ids[i] <= ids[i - 1]) {
      return f.invalid(key, "must list strictly increasing layer ids, found " + list_text(ids));
    }
  }
  return Status::ok_status();
}

// compress_ratios: n backbone entries, optionally followed by the DSpark stages' (all 0).
Status read_ratios(const JsonFields& f, int n, int n_stages, std::vector<int>& ratios) {
  const char* key = "compress_ratios";
  if (!f.has(key)) {
    if (n == 40) {
      ratios = released_ratios();
    } else {  // transformers: the released pattern scaled to n layers
      const int n_slide = std::min(2, n), n_enc = std::max(0, (n - n_slide + 1) / 2);
      ratios.assign(static_cast<size_t>(n_slide), 0);
      ratios.insert(ratios.end(), static_cast<size_t>(n_enc), 2);
      ratios.insert(ratios.end(), static_cast<size_t>(std::max(0, n - n_slide - n_enc)), 1);
    }
    return Status::ok_status();
  }
  DI_TRY(f.int_list(key, ratios, 0, 1 << 20));
  const int got = static_cast<int>(ratios.size());
  if (got < n || got > n + n_stages) {
    return f.invalid(key, "has " + std::to_string(got) + " entries; expected " +
                              std::to_string(n) + " (one per layer)" +
                              (n_stages > 0 ? " or up to " + std::to_string(n + n_stages) +
                                                  " (layers + DSpark stages)"
                                            : std::string()));
  }
  for (int i = n; i < got; ++i) {
    if (ratios[static_cast<size_t>(i)] != 0) {
      return f.invalid(key, "entry " + std::to_string(i) + " (DSpark stage " +
                                std::to_string(i - n) + ") is " +
                                std::to_string(ratios[static_cast<size_t>(i)]) +
                                "; DSpark stages are sliding-window only (0)");
    }
  }
  ratios.resize(static_cast<size_t>(n));
  return Status::ok_status();
}

// The CSA2 schedule: sources (defaults as transformers derives them), then every layer's role
// and the layers it reads.
Status derive_schedule(const JsonFields& f, ModelConfig& c, const std::vector<int>& ratios) {
  const int n = c.num_layers;
  std::vector<int>& kv = c.kv_source_layer_ids;
  std::vector<int>& ix = c.index_source_layer_ids;
  const std::vector<int> rel = released_ratios();
  const bool released =
      n <= static_cast<int>(rel.size()) && std::equal(ratios.begin(), ratios.end(), rel.begin());
  if (!f.has("kv_source_layer_ids")) {
    kv.clear();
    if (released) {
      for (int s : kReleasedKvSources) {
        if (s < n) kv.push_back(s);
      }
    } else {
      for (int i = 0; i < n; ++i) {
        const int r = ratios[static_cast<size_t>(i)];
        if (r > 0 && (i == 0 || ratios[static_cast<size_t>(i - 1)] != r)) kv.push_back(i);
      }
    }
  } else {
    DI_TRY(f.int_list("kv_source_layer_ids", kv, 0, 1 << 20));
  }
  if (!f.has("index_source_layer_ids")) {
    ix.clear();
    ix = kv == kReleasedKvSources ? kReleasedIndexSources : kv;
  } else {
    DI_TRY(f.int_list("index_source_layer_ids", ix, 0, 1 << 20));
  }
  DI_TRY(strictly_increasing(f, "kv_source_layer_ids", kv, n, "layers"));
  DI_TRY(strictly_increasing(f, "index_source_layer_ids", ix, n, "layers"));
  for (int s : kv) {
    if (ratios[static_cast<size_t>(s)] == 0) {
      return f.invalid("kv_source_layer_ids",
                       "names layer " + std::to_string(s) +
                           ", a sliding-window layer (compress_ratios[" + std::to_string(s) +
                           "] = 0); a KV source needs a compressed branch");
    }
    if (!contains(ix, s)) {
      return f.invalid("kv_source_layer_ids",
                       "names layer " + std::to_string(s) +
                           ", which is not in index_source_layer_ids: a KV source must also be an "
                           "index source (its indexer makes the index keys its group scores)");
    }
  }
  for (int s : ix) {
    if (ratios[static_cast<size_t>(s)] == 0) {
      return f.invalid("index_source_layer_ids",
                       "names layer " + std::to_string(s) +
                           ", a sliding-window layer; an index source needs a compressed branch");
    }
  }

  // Candidate level: a negative id (or null) disables it; absent = the last KV source.
  c.candidate_source_layer_id = kv.empty() ? -1 : kv.back();
  if (f.has("candidate_source_layer_id")) {
    int64_t cand = 0;
    DI_TRY(f.integer("candidate_source_layer_id", cand));
    c.candidate_source_layer_id = cand < 0 ? -1 : static_cast<int>(std::min<int64_t>(cand, n));
    if (cand >= 0 && !contains(ix, static_cast<int>(cand))) {
      return f.invalid("candidate_source_layer_id",
                       std::string("(") + std::to_string(cand) + ") must be one of index_source_layer_ids " +
                           list_text(ix) + ", or negative to disable the candidate level");
    }
  }
  DI_TRY(f.integer("candidate_topk_blocks", c.candidate_topk_blocks));
  DI_TRY(f.integer("candidate_block_size", c.candidate_block_size));
  if (c.candidate_source_layer_id >= 0 &&
      (c.candidate_topk_blocks <= 0 || c.candidate_block_size <= 0)) {
    return f.invalid(c.candidate_topk_blocks <= 0 ? "candidate_topk_blocks" : "candidate_block_size",
                     "must be positive when a candidate source layer is set");
  }

  c.layers.assign(static_cast<size_t>(n), LayerSpec{});
  int kv_src = -1, ix_src = -1;
  for (int i = 0; i < n; ++i) {
    LayerSpec& l = c.layers[static_cast<size_t>(i)];
    l.moe = MoeKind::kScore;
    const int r = ratios[static_cast<size_t>(i)];
    if (r == 0) continue;
    if (contains(kv, i)) kv_src = i;
    if (contains(ix, i)) ix_src = i;
    if (kv_src < 0) {
      return f.invalid("kv_source_layer_ids",
                       "leaves layer " + std::to_string(i) + " (compress_ratios[" +
                           std::to_string(i) + "] = " + std::to_string(r) +
                           ") without a KV source at or before it; add a source or make the "
                           "layer sliding-window (0)");
    }
    if (ratios[static_cast<size_t>(kv_src)] != r) {
      return f.invalid("compress_ratios",
                       "layer " + std::to_string(i) + " has ratio " + std::to_string(r) +
                           " but reads KV source " + std::to_string(kv_src) + " of ratio " +
                           std::to_string(ratios[static_cast<size_t>(kv_src)]) +
                           "; a compressed layer must follow a KV source of its own ratio");
    }
    l.attention = AttentionKind::kCSA2;
    l.compress_ratio = r;
    l.kv_source = kv_src;
    l.index_source = ix_src;  // >= kv_src: every KV source is an index source
    l.role = kv_src == i ? Csa2Role::kFull : ix_src == i ? Csa2Role::kReindex : Csa2Role::kReuse;
  }
  const int cand = c.candidate_source_layer_id;
  if (cand >= 0) {
    c.layers[static_cast<size_t>(cand)].candidate_source = true;
    const int cand_kv = c.layers[static_cast<size_t>(cand)].kv_source;
    for (int s : ix) {
      if (s <= cand) continue;
      if (c.layers[static_cast<size_t>(s)].kv_source != cand_kv) {
        return f.invalid("candidate_source_layer_id",
                         std::string("(") + std::to_string(cand) + ") restricts every later index source, but "
                         "layer " + std::to_string(s) + " reads KV source " +
                             std::to_string(c.layers[static_cast<size_t>(s)].kv_source) +
                             ", not the candidate source's (" + std::to_string(cand_kv) +
                             "): its candidate blocks would index other rows");
      }
      c.layers[static_cast<size_t>(s)].uses_candidates = true;
    }
  }
  return Status::ok_status();
}

Status read_engram(const JsonFields& f, ModelConfig& c) {
  EngramSpec& e = c.engram;
  DI_TRY(f.int_list("engram_layer_ids", e.layer_ids, 0, 1 << 20));
  DI_TRY(strictly_increasing(f, "engram_layer_ids", e.layer_ids, c.num_layers, "layers"));
  DI_TRY(f.int_list("engram_num_embeddings", e.num_embeddings, 1, int64_t{1} << 40));
  if (e.num_embeddings.size() != e.layer_ids.size()) {
    return f.invalid("engram_num_embeddings",
                     "has " + std::to_string(e.num_embeddings.size()) + " entries for " +
                         std::to_string(e.layer_ids.size()) +
                         " engram_layer_ids; give one table row count per Engram layer");
  }
  DI_TRY(f.integer("engram_max_ngram_size", e.max_ngram_size));
  DI_TRY(f.integer("engram_n_heads", e.n_heads));
  DI_TRY(f.integer("engram_head_dim", e.head_dim));
  DI_TRY(f.integer("engram_vocab_size", e.vocab_size));
  // transformers spells the pad id engram_pad_id, NeMo engram_pad_token_id.
  DI_TRY(f.integer(f.has("engram_pad_id") ? "engram_pad_id" : "engram_pad_token_id",
                   e.pad_token_id));
  DI_TRY(f.integer("engram_compressed_vocab_size", e.compressed_vocab_size));
  if (e.layer_ids.empty()) return Status::ok_status();
  if (e.max_ngram_size < 2 || e.max_ngram_size > 64) {
    return f.invalid("engram_max_ngram_size",
                     "must be in [2, 64] when Engram layers exist, found " +
                         std::to_string(e.max_ngram_size));
  }
  auto positive = [&](const char* key, int64_t v) -> Status {
    if (v <= 0) return f.invalid(key, "must be positive, found " + std::to_string(v));
    return Status::ok_status();
  };
  DI_TRY(positive("engram_n_heads", e.n_heads));
  DI_TRY(positive("engram_head_dim", e.head_dim));
  DI_TRY(positive("engram_vocab_size", e.vocab_size));
  DI_TRY(positive("engram_compressed_vocab_size", e.compressed_vocab_size));
  if (e.pad_token_id < 0 || e.pad_token_id >= c.vocab_size) {
    return f.invalid(f.has("engram_pad_id") ? "engram_pad_id" : "engram_pad_token_id",
                     std::string("(") + std::to_string(e.pad_token_id) + ") is outside the vocabulary");
  }
  for (int l : e.layer_ids) c.layers[static_cast<size_t>(l)].engram = true;
  return Status::ok_status();
}

Status read_dspark(const JsonFields& f, ModelConfig& c, int n_stages) {
  DSparkSpec& d = c.dspark;
  d.num_stages = n_stages;
  DI_TRY(f.integer("dspark_block_size", d.block_size));
  DI_TRY(f.integer("dspark_noise_token_id", d.noise_token_id));
  DI_TRY(f.integer("dspark_markov_rank", d.markov_rank));
  DI_TRY(f.integer("dspark_n_routed_experts", d.n_routed_experts));
  DI_TRY(f.integer("dspark_num_experts_per_tok", d.num_experts_per_tok));
  if (f.has("dspark_target_layer_ids")) {
    DI_TRY(f.int_list("dspark_target_layer_ids", d.target_layer_ids, 0, 1 << 20));
  } else {  // transformers: the last three layers that are no KV source
    std::vector<int> last;
    for (int i = c.num_layers - 1; i >= 0 && last.size() < 3; --i) {
      if (!contains(c.kv_source_layer_ids, i)) last.push_back(i);
    }
    d.target_layer_ids.assign(last.rbegin(), last.rend());
  }
  c.mtp_layers.assign(static_cast<size_t>(n_stages), LayerSpec{});
  if (n_stages == 0) return Status::ok_status();
  DI_TRY(strictly_increasing(f, "dspark_target_layer_ids", d.target_layer_ids, c.num_layers,
                             "layers"));
  if (d.target_layer_ids.empty()) {
    return f.invalid("dspark_target_layer_ids", "must name at least one layer for the drafter");
  }
  if (d.block_size < 1 || d.block_size > 64) {
    return f.invalid("dspark_block_size", "must be in [1, 64], found " + std::to_string(d.block_size));
  }
  if (d.noise_token_id < 0 || d.noise_token_id >= c.vocab_size) {
    return f.invalid("dspark_noise_token_id",
                     std::string("(") + std::to_string(d.noise_token_id) + ") is outside the vocabulary");
  }
  if (d.markov_rank <= 0) return f.invalid("dspark_markov_rank", "must be positive");
  if (d.n_routed_experts <= 0 || d.num_experts_per_tok <= 0 ||
      d.num_experts_per_tok > d.n_routed_experts) {
    return f.invalid("dspark_num_experts_per_tok",
                     std::string("(") + std::to_string(d.num_experts_per_tok) +
                         ") must be in [1, dspark_n_routed_experts (" +
                         std::to_string(d.n_routed_experts) + ")]");
  }
  return Status::ok_status();
}

}  // namespace

Status parse_v41(const JsonFields& t, const JsonFields& top, ConfigNaming naming,
                 ModelConfig& c) {
  const bool hf = naming == ConfigNaming::kHuggingFace;
  c.family = ModelFamily::kDeepseekV41;
  c.model_type = "deepseek_v41";  // the family, whichever section the fields came from
  c.naming = naming;
  // The released Flash values where V4.1 differs from V4's defaults.
  c.rms_norm_eps = 1e-20;
  c.index_n_heads = 32;
  DI_TRY(read_common_fields(t, naming, c));
  DI_TRY(parse_score_func(t, naming, c.scoring_func));
  DI_TRY(t.boolean("norm_topk_prob", c.norm_topk_prob));
  DI_TRY(t.number("gate_temp", c.gate_temp));
  if (!(c.gate_temp > 0)) return t.invalid("gate_temp", "must be positive");
  std::string topk_method = "noaux_tc";
  DI_TRY(t.string("topk_method", topk_method));
  if (topk_method != "noaux_tc") {
    return t.invalid("topk_method", "is '" + topk_method +
                                        "'; DeepSeek-V4.1 routes with noaux_tc (the bias steers "
                                        "selection only)");
  }
  DI_TRY(t.boolean("tie_word_embeddings", c.tie_word_embeddings));
  // Token ids may sit in either section of the composite layout.
  DI_TRY(parse_eos(top, c));
  DI_TRY(parse_eos(t, c));
  DI_TRY(top.integer("bos_token_id", c.bos_token_id));
  DI_TRY(t.integer("bos_token_id", c.bos_token_id));
  DI_TRY(top.integer("image_token_id", c.image_token_id));
  DI_TRY(read_rope_width(t, naming, c));
  DI_TRY(check_layer_count(t, naming, c));
  int n_stages = 3;
  DI_TRY(read_stage_count(t, naming, n_stages));

  std::vector<int> ratios;
  DI_TRY(read_ratios(t, c.num_layers, n_stages, ratios));
  DI_TRY(derive_schedule(t, c, ratios));
  DI_TRY(read_engram(t, c));
  DI_TRY(read_dspark(t, c, n_stages));

  DI_TRY(parse_rope(t, naming, c));
  // The composite layout keeps quantization_config at the top level; accept it in either place.
  if (top.has("quantization_config")) {
    DI_TRY(parse_quantization_config(top, c));
  } else if (t.has("quantization_config")) {
    DI_TRY(parse_quantization_config(t, c));
  } else if (!hf) {
    DI_TRY(parse_official_quantization(t, c));
  }
  return Status::ok_status();
}

}  // namespace deepinfer::io
