// DeepSeek-V4.1 weight binding (see weights.h) over the shared Binder.
#include "model/deepseek_v41/weights.h"

#include <algorithm>
#include <string>

#include "model/layers/binder.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

// One backbone block: the common parts, then what the layer's CSA2 role owns: a Full layer its
// compressor (no ape, no overlap; wgate above ratio 1) and the index-key projection, an index
// source its indexer query; an Engram layer its memory.
Expected<Block> bind_block(Binder& b, const std::string& p, const io::LayerSpec& spec,
                           const ExpertSelection& experts, const TensorSelection& tensor) {
  const io::ModelConfig& c = b.checkpoint().config();
  Block blk;
  DI_ASSIGN_OR_RETURN(blk.base, b.block_common(p, spec, c.n_routed_experts, c.num_experts_per_tok,
                                               experts, tensor));
  AttentionWeights& a = blk.base.attn;
  const std::string ap = p + "attn.";
  if (spec.role == io::Csa2Role::kFull) {
    DI_ASSIGN_OR_RETURN(a.compressor, b.compressor(ap + "compressor.", spec.compress_ratio,
                                                   c.head_dim, /*overlap=*/false,
                                                   /*has_ape=*/false));
  }
  if (spec.role == io::Csa2Role::kFull || spec.role == io::Csa2Role::kReindex) {
    IndexerWeights ix;
    DI_ASSIGN_OR_RETURN(ix.wq_b, b.linear(ap + "indexer.wq_b.weight"));
    DI_ASSIGN_OR_RETURN(ix.weights_proj, b.linear(ap + "indexer.weights_proj.weight"));
    if (spec.role == io::Csa2Role::kFull) {
      DI_ASSIGN_OR_RETURN(ix.wk, b.linear(ap + "indexer.wk.weight"));
      DI_ASSIGN_OR_RETURN(ix.k_norm, b.vector(ap + "indexer.k_norm.weight"));
    }
    a.indexer = std::move(ix);
  }
  if (spec.engram) {
    const auto& ids = c.engram.layer_ids;
    const int layer = std::stoi(p.substr(std::string("layers.").size()));
    EngramWeights e;
    e.index = static_cast<int>(std::find(ids.begin(), ids.end(), layer) - ids.begin());
    const std::string ep = p + "engram.";
    DI_ASSIGN_OR_RETURN(e.table, b.host_table(ep + "embed.weight"));
    DI_ASSIGN_OR_RETURN(e.wkv, b.linear(ep + "wkv.weight"));
    // Only the product of the two RMS weights is ever used (spec §6.7 item 1).
    DI_ASSIGN_OR_RETURN(std::vector<float> q, b.host_floats(ep + "q_weight"));
    DI_ASSIGN_OR_RETURN(const std::vector<float> k, b.host_floats(ep + "k_weight"));
    for (size_t i = 0; i < q.size(); ++i) q[i] *= k[i];
    e.w_prod = b.place_floats(std::move(q));
    blk.engram = std::move(e);
  }
  return blk;
}

Expected<DSparkWeights> bind_dspark(Binder& b, const io::ModelConfig& c) {
  DSparkWeights d;
  const int S = c.num_mtp_layers();
  for (int s = 0; s < S; ++s) {
    const std::string p = "mtp." + std::to_string(s) + ".";
    DI_ASSIGN_OR_RETURN(BlockWeights stage,
                        b.block_common(p, c.mtp_layers[static_cast<size_t>(s)],
                                       c.dspark.n_routed_experts, c.dspark.num_experts_per_tok));
    d.stages.push_back(std::move(stage));
  }
  DI_ASSIGN_OR_RETURN(d.main_proj, b.linear("mtp.0.main_proj.weight"));
  DI_ASSIGN_OR_RETURN(d.main_norm, b.vector("mtp.0.main_norm.weight"));
  const std::string last = "mtp." + std::to_string(S - 1) + ".";
  DI_ASSIGN_OR_RETURN(d.norm, b.vector(last + "norm.weight"));
  DI_ASSIGN_OR_RETURN(d.markov_embed, b.linear(last + "markov_head.embed.weight"));
  if (d.markov_embed.quantized()) {
    return invalid_argument("tensor '" + last +
                            "markov_head.embed.weight' must be stored dense (an embedding table)");
  }
  DI_ASSIGN_OR_RETURN(d.markov_head, b.linear(last + "markov_head.head.weight"));
  DI_ASSIGN_OR_RETURN(d.confidence, b.floats(last + "confidence_head.proj.weight"));
  return d;
}

}  // namespace

Expected<ModelWeights> bind_weights(const io::Checkpoint& ckpt, backend::Ops& ops,
                                    const ExpertParallel& ep, const TensorParallel& tp) {
  const io::ModelConfig& c = ckpt.config();
  ModelWeights w;
  Binder b(ckpt, ops, w.store);
  // Tensor parallelism splits the main layers and the LM head; the DSpark stages stay whole.
  TensorSelection tensor;
  if (tp.enabled()) tensor = {true, tp.rank(), tp.size()};
  DI_TRY(b.embedding_and_head(&w.embed, &w.lm_head, tensor));
  DI_ASSIGN_OR_RETURN(w.norm, b.vector("norm.weight"));
  w.layers.reserve(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    ExpertSelection experts;
    if (ep.enabled()) experts = {static_cast<int>(i), ep.placement(i).experts_of(ep.rank())};
    DI_ASSIGN_OR_RETURN(Block blk, bind_block(b, "layers." + std::to_string(i) + ".", c.layers[i],
                                              experts, tensor));
    w.layers.push_back(std::move(blk));
  }
  if (ckpt.mtp_available() && c.num_mtp_layers() > 0) {
    DI_ASSIGN_OR_RETURN(w.dspark, bind_dspark(b, c));
  }
  return w;
}

}  // namespace deepinfer::model::deepseek_v41
