// DeepSeek-V4 weight binding (see weights.h) over the shared Binder.
#include "model/deepseek_v4/weights.h"

#include <string>

#include "model/layers/binder.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

// One V4 block: the common parts, then the compressor (CSA, HCA) and the indexer with its own
// overlapping compressor (CSA) that the layer kind implies.
Expected<BlockWeights> bind_block(Binder& b, const std::string& p, const io::LayerSpec& spec,
                                  const ExpertSelection& experts = {},
                                  const TensorSelection& tensor = {}) {
  const io::ModelConfig& c = b.checkpoint().config();
  DI_ASSIGN_OR_RETURN(BlockWeights blk, b.block_common(p, spec, c.n_routed_experts,
                                                       c.num_experts_per_tok, experts, tensor));
  AttentionWeights& a = blk.attn;
  const std::string ap = p + "attn.";
  const bool overlap = spec.compress_ratio == 4;
  if (spec.attention != io::AttentionKind::kSWA) {
    DI_ASSIGN_OR_RETURN(a.compressor, b.compressor(ap + "compressor.", spec.compress_ratio,
                                                   c.head_dim, overlap, true));
  }
  if (spec.attention == io::AttentionKind::kCSA) {
    IndexerWeights ix;
    DI_ASSIGN_OR_RETURN(ix.wq_b, b.linear(ap + "indexer.wq_b.weight"));
    DI_ASSIGN_OR_RETURN(ix.weights_proj, b.linear(ap + "indexer.weights_proj.weight"));
    DI_ASSIGN_OR_RETURN(ix.compressor, b.compressor(ap + "indexer.compressor.", spec.compress_ratio,
                                                    c.index_head_dim, overlap, true));
    a.indexer = std::move(ix);
  }
  return blk;
}

Expected<HeadWeights> bind_head(Binder& b, const std::string& p) {
  const io::ModelConfig& c = b.checkpoint().config();
  HeadWeights h;
  DI_ASSIGN_OR_RETURN(
      h.hc, b.hc(p + "hc_head", c.hc_mult, static_cast<int64_t>(c.hc_mult) * c.hidden_size));
  DI_ASSIGN_OR_RETURN(h.norm, b.vector(p + "norm.weight"));
  return h;
}

}  // namespace

Expected<ModelWeights> bind_weights(const io::Checkpoint& ckpt, backend::Ops& ops,
                                    const ExpertParallel& ep, const TensorParallel& tp) {
  const io::ModelConfig& c = ckpt.config();
  ModelWeights w;
  Binder b(ckpt, ops, w.store);
  // Tensor parallelism splits the main layers and the LM head; the MTP blocks stay whole.
  TensorSelection tensor;
  if (tp.enabled()) tensor = {true, tp.rank(), tp.size()};
  DI_TRY(b.embedding_and_head(&w.embed, &w.lm_head, tensor));
  DI_ASSIGN_OR_RETURN(w.head, bind_head(b, ""));
  w.layers.reserve(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    ExpertSelection experts;
    if (ep.enabled()) experts = {static_cast<int>(i), ep.placement(i).experts_of(ep.rank())};
    DI_ASSIGN_OR_RETURN(
        auto blk, bind_block(b, "layers." + std::to_string(i) + ".", c.layers[i], experts, tensor));
    w.layers.push_back(std::move(blk));
  }
  if (ckpt.mtp_available()) {
    for (size_t i = 0; i < c.mtp_layers.size(); ++i) {
      const std::string p = "mtp." + std::to_string(i) + ".";
      MtpWeights m;
      DI_ASSIGN_OR_RETURN(m.block, bind_block(b, p, c.mtp_layers[i]));
      DI_ASSIGN_OR_RETURN(m.e_proj, b.linear(p + "e_proj.weight"));
      DI_ASSIGN_OR_RETURN(m.h_proj, b.linear(p + "h_proj.weight"));
      DI_ASSIGN_OR_RETURN(m.enorm, b.vector(p + "enorm.weight"));
      DI_ASSIGN_OR_RETURN(m.hnorm, b.vector(p + "hnorm.weight"));
      DI_ASSIGN_OR_RETURN(m.head, bind_head(b, p));
      w.mtp.push_back(std::move(m));
    }
  }
  return w;
}

}  // namespace deepinfer::model::deepseek_v4
