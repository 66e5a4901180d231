#include "io/expected_tensors.h"

namespace deepinfer::io {

std::string_view tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::kLinear:
      return "linear";
    case TensorRole::kExpertLinear:
      return "expert linear";
    case TensorRole::kFloat:
      return "float";
    case TensorRole::kIndexTable:
      return "index table";
    case TensorRole::kEngramTable:
      return "engram table";
  }
  return "?";
}

std::string_view weight_group_name(WeightGroup g) {
  switch (g) {
    case WeightGroup::kEmbeddingHead:
      return "embedding_head";
    case WeightGroup::kAttention:
      return "attention";
    case WeightGroup::kExperts:
      return "experts";
    case WeightGroup::kShared:
      return "shared_experts";
    case WeightGroup::kRouter:
      return "router";
    case WeightGroup::kMhc:
      return "mhc";
    case WeightGroup::kMtp:
      return "mtp";
    case WeightGroup::kEngram:
      return "engram";
  }
  return "?";
}

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kPlain:
      return "plain";
    case WeightFormat::kFp8Block:
      return "fp8";
    case WeightFormat::kFp4Block:
      return "fp4";
  }
  return "?";
}

bool is_float_dtype(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

std::string scale_name_for(std::string_view weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  if (weight_name.size() >= kSuffix.size() &&
      weight_name.substr(weight_name.size() - kSuffix.size()) == kSuffix) {
    return std::string(weight_name.substr(0, weight_name.size() - kSuffix.size())) + ".scale";
  }
  return std::string(weight_name) + ".scale";
}

std::vector<int64_t> fp8_scale_shape(const std::vector<int64_t>& logical, int block_out,
                                     int block_in) {
  return {(logical[0] + block_out - 1) / block_out, (logical[1] + block_in - 1) / block_in};
}

std::vector<int64_t> fp4_packed_shape(const std::vector<int64_t>& logical) {
  return {logical[0], logical[1] / 2};
}

std::vector<int64_t> fp4_scale_shape(const std::vector<int64_t>& logical, int block) {
  return {logical[0], logical[1] / block};
}

namespace {

// What both families' tables share: the naming state (prefix, layer, MTP / drafter block) and
// the parts every block has (norms, the two mHC sites, the attention projections and sink, the
// score router, routed and shared experts).
class TableBase {
 protected:
  explicit TableBase(const ModelConfig& c) : c_(c) {}

  void add(std::string name, std::vector<int64_t> shape, TensorRole role, WeightGroup group,
           bool optional = false) {
    ExpectedTensor t;
    t.name = prefix_ + std::move(name);
    t.shape = std::move(shape);
    t.role = role;
    t.group = mtp_ ? WeightGroup::kMtp : group;
    t.layer = layer_;
    t.mtp = mtp_;
    t.optional = optional;
    out_.push_back(std::move(t));
  }

  void at_block(const std::string& prefix, int layer) {
    prefix_ = prefix;
    layer_ = layer;
  }

  void embedding_and_head() {
    const int64_t D = c_.hidden_size;
    add("embed.weight", {c_.vocab_size, D}, TensorRole::kFloat, WeightGroup::kEmbeddingHead);
    add("head.weight", {c_.vocab_size, D}, TensorRole::kFloat, WeightGroup::kEmbeddingHead);
    add("norm.weight", {D}, TensorRole::kFloat, WeightGroup::kEmbeddingHead);
  }

  // Norms, mHC sites, q path, K=V projection, grouped output projection, sink.
  void attention_common() {
    const int64_t D = c_.hidden_size, n = c_.hc_mult, H = c_.num_heads, d = c_.head_dim;
    const int64_t G = c_.o_groups, R = c_.o_lora_rank, Q = c_.q_lora_rank;
    const int64_t mix = (2 + n) * n;
    constexpr auto kA = WeightGroup::kAttention;
    constexpr auto kLin = TensorRole::kLinear;
    constexpr auto kF = TensorRole::kFloat;
    add("attn_norm.weight", {D}, kF, kA);
    add("ffn_norm.weight", {D}, kF, WeightGroup::kRouter);
    for (const char* site : {"attn", "ffn"}) {
      const std::string s = std::string("hc_") + site;
      add(s + "_fn", {mix, n * D}, kF, WeightGroup::kMhc);
      add(s + "_base", {mix}, kF, WeightGroup::kMhc);
      add(s + "_scale", {3}, kF, WeightGroup::kMhc);
    }
    add("attn.wq_a.weight", {Q, D}, kLin, kA);
    add("attn.q_norm.weight", {Q}, kF, kA);
    add("attn.wq_b.weight", {H * d, Q}, kLin, kA);
    add("attn.wkv.weight", {d, D}, kLin, kA);
    add("attn.kv_norm.weight", {d}, kF, kA);
    add("attn.wo_a.weight", {G * R, H * d / G}, kLin, kA);
    add("attn.wo_b.weight", {D, G * R}, kLin, kA);
    add("attn.attn_sink", {H}, kF, kA);
  }

  // E routed experts of width I, and the shared experts (n fused into one MLP of width n x I).
  void experts(int64_t E) {
    const int64_t D = c_.hidden_size, I = c_.moe_intermediate_size;
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = "ffn.experts." + std::to_string(e) + ".";
      add(p + "w1.weight", {I, D}, TensorRole::kExpertLinear, WeightGroup::kExperts);
      add(p + "w2.weight", {D, I}, TensorRole::kExpertLinear, WeightGroup::kExperts);
      add(p + "w3.weight", {I, D}, TensorRole::kExpertLinear, WeightGroup::kExperts);
    }
    if (c_.n_shared_experts > 0) {
      const int64_t SI = I * c_.n_shared_experts;
      add("ffn.shared_experts.w1.weight", {SI, D}, TensorRole::kLinear, WeightGroup::kShared);
      add("ffn.shared_experts.w2.weight", {D, SI}, TensorRole::kLinear, WeightGroup::kShared);
      add("ffn.shared_experts.w3.weight", {SI, D}, TensorRole::kLinear, WeightGroup::kShared);
    }
  }

  const ModelConfig& c_;
  std::string prefix_;
  int layer_ = -1;
  bool mtp_ = false;
  std::vector<ExpectedTensor> out_;
};

// DeepSeek-V4 (spec §4): hc_head; CSA / HCA compressors with ape (CSA: overlapping, 2d), the CSA
// indexer with its own compressor; hash or score routing; MTP blocks with their projections.
class TableBuilder : TableBase {
 public:
  explicit TableBuilder(const ModelConfig& c) : TableBase(c) {}

  std::vector<ExpectedTensor> build() {
    embedding_and_head();
    hc_head();
    for (int i = 0; i < c_.num_layers; ++i) {
      at_block("layers." + std::to_string(i) + ".", i);
      block(c_.layers[static_cast<size_t>(i)]);
    }
    mtp_ = true;
    for (int i = 0; i < c_.num_mtp_layers(); ++i) {
      at_block("mtp." + std::to_string(i) + ".", c_.num_layers + i);
      block(c_.mtp_layers[static_cast<size_t>(i)]);
      mtp_extras();
    }
    return std::move(out_);
  }

 private:
  void hc_head() {
    const int64_t D = c_.hidden_size, n = c_.hc_mult;
    add("hc_head_fn", {n, n * D}, TensorRole::kFloat, WeightGroup::kMhc);
    add("hc_head_base", {n}, TensorRole::kFloat, WeightGroup::kMhc);
    add("hc_head_scale", {1}, TensorRole::kFloat, WeightGroup::kMhc);
  }

  void block(const LayerSpec& l) {
    const int64_t D = c_.hidden_size, d = c_.head_dim, Q = c_.q_lora_rank;
    const int64_t E = c_.n_routed_experts;
    constexpr auto kA = WeightGroup::kAttention;
    constexpr auto kLin = TensorRole::kLinear;
    constexpr auto kF = TensorRole::kFloat;
    attention_common();
    if (l.attention != AttentionKind::kSWA) {
      // CSA windows overlap: the compressor emits two halves (2d channels) per token.
      const int64_t coff = l.attention == AttentionKind::kCSA ? 2 : 1;
      const int64_t m = l.compress_ratio;
      add("attn.compressor.wkv.weight", {coff * d, D}, kF, kA);
      add("attn.compressor.wgate.weight", {coff * d, D}, kF, kA);
      add("attn.compressor.ape", {m, coff * d}, kF, kA);
      add("attn.compressor.norm.weight", {d}, kF, kA);
      if (l.attention == AttentionKind::kCSA) {
        const int64_t IH = c_.index_n_heads, ID = c_.index_head_dim;
        add("attn.indexer.wq_b.weight", {IH * ID, Q}, kLin, kA);
        add("attn.indexer.weights_proj.weight", {IH, D}, kF, kA);
        add("attn.indexer.compressor.wkv.weight", {2 * ID, D}, kF, kA);
        add("attn.indexer.compressor.wgate.weight", {2 * ID, D}, kF, kA);
        add("attn.indexer.compressor.ape", {m, 2 * ID}, kF, kA);
        add("attn.indexer.compressor.norm.weight", {ID}, kF, kA);
      }
    }
    add("ffn.gate.weight", {E, D}, kF, WeightGroup::kRouter);
    if (l.moe == MoeKind::kHash) {
      add("ffn.gate.tid2eid", {c_.vocab_size, c_.num_experts_per_tok}, TensorRole::kIndexTable,
          WeightGroup::kRouter);
    } else {
      add("ffn.gate.bias", {E}, kF, WeightGroup::kRouter);
    }
    experts(E);
  }

  void mtp_extras() {
    const int64_t D = c_.hidden_size;
    add("e_proj.weight", {D, D}, TensorRole::kLinear, WeightGroup::kMtp);
    add("h_proj.weight", {D, D}, TensorRole::kLinear, WeightGroup::kMtp);
    add("enorm.weight", {D}, TensorRole::kFloat, WeightGroup::kMtp);
    add("hnorm.weight", {D}, TensorRole::kFloat, WeightGroup::kMtp);
    add("norm.weight", {D}, TensorRole::kFloat, WeightGroup::kMtp);
    hc_head();
  }
};

// DeepSeek-V4.1 (spec §6.6, §6.7 item 8): no hc_head, no hash routing; Full layers own the
// compressor (no ape, no overlap; wgate only above ratio 1) and the index-key projection
// (indexer.wk, indexer.k_norm); index sources have an indexer query; Engram layers a table and
// its projection; DSpark stages are SWA blocks with their own expert count, the first with the
// feature projection, the last with the final norm and the Markov and confidence heads.
class TableBuilderV41 : TableBase {
 public:
  explicit TableBuilderV41(const ModelConfig& c) : TableBase(c) {}

  std::vector<ExpectedTensor> build() {
    const int64_t D = c_.hidden_size;
    embedding_and_head();
    for (int i = 0; i < c_.num_layers; ++i) {
      at_block("layers." + std::to_string(i) + ".", i);
      block(c_.layers[static_cast<size_t>(i)], c_.n_routed_experts);
    }
    mtp_ = true;
    const int S = c_.num_mtp_layers();
    for (int s = 0; s < S; ++s) {
      at_block("mtp." + std::to_string(s) + ".", c_.num_layers + s);
      block(c_.mtp_layers[static_cast<size_t>(s)], c_.dspark.n_routed_experts);
      if (s == 0) {
        const int64_t T = static_cast<int64_t>(c_.dspark.target_layer_ids.size());
        add("main_proj.weight", {D, T * D}, TensorRole::kLinear, WeightGroup::kMtp);
        add("main_norm.weight", {D}, TensorRole::kFloat, WeightGroup::kMtp);
      }
      if (s == S - 1) {
        const int64_t r = c_.dspark.markov_rank;
        add("norm.weight", {D}, TensorRole::kFloat, WeightGroup::kMtp);
        add("markov_head.embed.weight", {c_.vocab_size, r}, TensorRole::kFloat, WeightGroup::kMtp);
        add("markov_head.head.weight", {c_.vocab_size, r}, TensorRole::kLinear, WeightGroup::kMtp);
        add("confidence_head.proj.weight", {1, D + r}, TensorRole::kFloat, WeightGroup::kMtp);
      }
    }
    return std::move(out_);
  }

 private:
  void block(const LayerSpec& l, int64_t E) {
    const int64_t D = c_.hidden_size, n = c_.hc_mult, d = c_.head_dim, Q = c_.q_lora_rank;
    constexpr auto kA = WeightGroup::kAttention;
    constexpr auto kLin = TensorRole::kLinear;
    constexpr auto kF = TensorRole::kFloat;
    attention_common();
    const int64_t IH = c_.index_n_heads, ID = c_.index_head_dim;
    if (l.role == Csa2Role::kFull) {
      add("attn.compressor.wkv.weight", {d, D}, kF, kA);
      if (l.compress_ratio > 1) add("attn.compressor.wgate.weight", {d, D}, kF, kA);
      add("attn.compressor.norm.weight", {d}, kF, kA);
      add("attn.indexer.wk.weight", {ID, d}, kF, kA);
      add("attn.indexer.k_norm.weight", {ID}, kF, kA);
    }
    if (l.role == Csa2Role::kFull || l.role == Csa2Role::kReindex) {
      add("attn.indexer.wq_b.weight", {IH * ID, Q}, kLin, kA);
      add("attn.indexer.weights_proj.weight", {IH, D}, kF, kA);
    }
    add("ffn.gate.weight", {E, D}, kF, WeightGroup::kRouter);
    add("ffn.gate.bias", {E}, kF, WeightGroup::kRouter);
    add("ffn.gate.bias_vl", {E}, kF, WeightGroup::kRouter, /*optional=*/true);
    experts(E);
    if (l.engram) {
      const EngramSpec& e = c_.engram;
      size_t k = 0;
      while (e.layer_ids[k] != layer_) ++k;
      const int64_t cols = static_cast<int64_t>(e.max_ngram_size - 1) * e.n_heads * e.head_dim;
      add("engram.embed.weight", {e.num_embeddings[k], e.head_dim}, TensorRole::kEngramTable,
          WeightGroup::kEngram);
      add("engram.wkv.weight", {(n + 1) * D, cols}, kLin, WeightGroup::kEngram);
      add("engram.q_weight", {n, D}, kF, WeightGroup::kEngram);
      add("engram.k_weight", {n, D}, kF, WeightGroup::kEngram);
    }
  }
};

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config) {
  if (config.family == ModelFamily::kDeepseekV41) return TableBuilderV41(config).build();
  return TableBuilder(config).build();
}

}  // namespace deepinfer::io
