// Weight binding (see weights.h): io::Weight -> backend::WeightRef, once, at load.
#include "model/deepseek_v4/weights.h"

#include <string>

#include "base/numeric_types.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

using backend::WeightRef;

class Binder {
 public:
  Binder(const io::Checkpoint& ckpt, backend::Ops& ops, ModelWeights& out)
      : ckpt_(ckpt), ops_(ops), out_(out) {}

  // A linear (or expert linear) in whatever format the checkpoint stores it.
  Expected<WeightRef> linear(const std::string& name) {
    DI_ASSIGN_OR_RETURN(const io::Weight w, ckpt_.get(name));
    auto r = [&]() -> Expected<WeightRef> {
      switch (w.format) {
        case io::WeightFormat::kFp8Block:
          return WeightRef::fp8(w.data, *w.scale, w.block_out, w.block_in);
        case io::WeightFormat::kFp4Block:
          return WeightRef::fp4(w.data, *w.scale, w.block_in);
        case io::WeightFormat::kPlain:
          break;
      }
      return WeightRef::dense(w.data);
    }();
    if (!r.ok()) return r.status().with_context("binding tensor '" + w.stored_name + "'");
    return place(*r);
  }

  // A 1-D float vector (RMSNorm weight) as a dense [1, n] WeightRef over the same bytes.
  Expected<WeightRef> vector(const std::string& name) {
    DI_ASSIGN_OR_RETURN(const io::Weight w, ckpt_.get(name));
    TensorView v = TensorView::make(w.data.dtype, {1, w.data.numel()}, w.data.data);
    auto r = WeightRef::dense(v);
    if (!r.ok()) return r.status().with_context("binding tensor '" + w.stored_name + "'");
    return place(*r);
  }

  // The weight in the backend's memory (a zero-copy view for host backends).
  WeightRef place(const WeightRef& w) { return backend::place_weight(ops_, w, out_.placed); }
  TensorView place(const TensorView& t) { return backend::place_tensor(ops_, t, out_.placed); }

  // FP32 data of a small float tensor: the mapped bytes when stored F32, else an owned copy.
  Expected<const float*> floats(const std::string& name) {
    DI_ASSIGN_OR_RETURN(const io::Weight w, ckpt_.get(name));
    const TensorView& t = w.data;
    if (t.dtype == DType::kF32)
      return backend::place_floats(ops_, t.ptr<float>(), t.numel(), out_.placed);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) {
      switch (t.dtype) {
        case DType::kBF16:
          v[i] = bf16_to_float(t.ptr<uint16_t>()[i]);
          break;
        case DType::kF16:
          v[i] = fp16_to_float(t.ptr<uint16_t>()[i]);
          break;
        default:
          return invalid_argument("tensor '" + w.stored_name + "': expected a float dtype, got " +
                                  std::string(dtype_name(t.dtype)));
      }
    }
    out_.owned.push_back(std::move(v));
    return backend::place_floats(ops_, out_.owned.back().data(), t.numel(), out_.placed);
  }

  Expected<HcWeights> hc(const std::string& prefix, int64_t rows, int64_t cols) {
    HcWeights h;
    DI_ASSIGN_OR_RETURN(const float* fn, floats(prefix + "_fn"));
    h.fn = backend::CMat(fn, rows, cols);
    DI_ASSIGN_OR_RETURN(h.base, floats(prefix + "_base"));
    DI_ASSIGN_OR_RETURN(h.scale, floats(prefix + "_scale"));
    return h;
  }

  Expected<CompressorWeights> compressor(const std::string& p, int ratio, int d_c) {
    CompressorWeights c;
    c.ratio = ratio;
    c.d_c = d_c;
    c.overlap = ratio == 4;
    DI_ASSIGN_OR_RETURN(c.wkv, linear(p + "wkv.weight"));
    DI_ASSIGN_OR_RETURN(c.wgate, linear(p + "wgate.weight"));
    DI_ASSIGN_OR_RETURN(c.ape, floats(p + "ape"));
    DI_ASSIGN_OR_RETURN(c.norm, vector(p + "norm.weight"));
    return c;
  }

  Expected<backend::ExpertWeights> expert(const std::string& p) {
    backend::ExpertWeights e;
    DI_ASSIGN_OR_RETURN(e.w1, linear(p + "w1.weight"));
    DI_ASSIGN_OR_RETURN(e.w2, linear(p + "w2.weight"));
    DI_ASSIGN_OR_RETURN(e.w3, linear(p + "w3.weight"));
    return e;
  }

  Expected<BlockWeights> block(const std::string& p, const io::LayerSpec& spec) {
    const io::ModelConfig& c = ckpt_.config();
    const int64_t n = c.hc_mult, nD = static_cast<int64_t>(c.hc_mult) * c.hidden_size;
    BlockWeights b;
    b.spec = spec;
    DI_ASSIGN_OR_RETURN(b.attn_norm, vector(p + "attn_norm.weight"));
    DI_ASSIGN_OR_RETURN(b.ffn_norm, vector(p + "ffn_norm.weight"));
    DI_ASSIGN_OR_RETURN(b.hc_attn, hc(p + "hc_attn", (2 + n) * n, nD));
    DI_ASSIGN_OR_RETURN(b.hc_ffn, hc(p + "hc_ffn", (2 + n) * n, nD));

    AttentionWeights& a = b.attn;
    const std::string ap = p + "attn.";
    DI_ASSIGN_OR_RETURN(a.wq_a, linear(ap + "wq_a.weight"));
    DI_ASSIGN_OR_RETURN(a.q_norm, vector(ap + "q_norm.weight"));
    DI_ASSIGN_OR_RETURN(a.wq_b, linear(ap + "wq_b.weight"));
    DI_ASSIGN_OR_RETURN(a.wkv, linear(ap + "wkv.weight"));
    DI_ASSIGN_OR_RETURN(a.kv_norm, vector(ap + "kv_norm.weight"));
    DI_ASSIGN_OR_RETURN(a.wo_a, linear(ap + "wo_a.weight"));
    DI_ASSIGN_OR_RETURN(a.wo_b, linear(ap + "wo_b.weight"));
    if (a.wo_a.quantized() && c.o_lora_rank % a.wo_a.block_n != 0) {
      return unimplemented("tensor '" + ap + "wo_a.weight': o_lora_rank " +
                           std::to_string(c.o_lora_rank) +
                           " is not a multiple of its scale block " +
                           std::to_string(a.wo_a.block_n) + " (groups must start on a block)");
    }
    for (int g = 0; g < c.o_groups; ++g) {
      a.wo_a_groups.push_back(a.wo_a.slice_rows(int64_t{g} * c.o_lora_rank, c.o_lora_rank));
    }
    DI_ASSIGN_OR_RETURN(a.sink, floats(ap + "attn_sink"));
    if (spec.attention != io::AttentionKind::kSWA) {
      DI_ASSIGN_OR_RETURN(a.compressor,
                          compressor(ap + "compressor.", spec.compress_ratio, c.head_dim));
    }
    if (spec.attention == io::AttentionKind::kCSA) {
      IndexerWeights ix;
      DI_ASSIGN_OR_RETURN(ix.wq_b, linear(ap + "indexer.wq_b.weight"));
      DI_ASSIGN_OR_RETURN(ix.weights_proj, linear(ap + "indexer.weights_proj.weight"));
      DI_ASSIGN_OR_RETURN(ix.compressor, compressor(ap + "indexer.compressor.", spec.compress_ratio,
                                                    c.index_head_dim));
      a.indexer = std::move(ix);
    }

    MoeWeights& m = b.moe;
    const std::string fp = p + "ffn.";
    m.kind = spec.moe;
    DI_ASSIGN_OR_RETURN(m.gate, linear(fp + "gate.weight"));
    if (spec.moe == io::MoeKind::kHash) {
      DI_ASSIGN_OR_RETURN(const io::Weight t, ckpt_.get(fp + "gate.tid2eid"));
      m.tid2eid = place(t.data);
    } else if (ckpt_.has(fp + "gate.bias")) {
      DI_ASSIGN_OR_RETURN(m.bias, floats(fp + "gate.bias"));
    }
    m.experts.reserve(static_cast<size_t>(c.n_routed_experts));
    for (int e = 0; e < c.n_routed_experts; ++e) {
      DI_ASSIGN_OR_RETURN(auto ew, expert(fp + "experts." + std::to_string(e) + "."));
      m.experts.push_back(ew);
    }
    if (c.n_shared_experts > 0) {
      DI_ASSIGN_OR_RETURN(m.shared, expert(fp + "shared_experts."));
    }
    return b;
  }

  Expected<HeadWeights> head(const std::string& p) {
    const io::ModelConfig& c = ckpt_.config();
    HeadWeights h;
    DI_ASSIGN_OR_RETURN(
        h.hc, hc(p + "hc_head", c.hc_mult, static_cast<int64_t>(c.hc_mult) * c.hidden_size));
    DI_ASSIGN_OR_RETURN(h.norm, vector(p + "norm.weight"));
    return h;
  }

 private:
  const io::Checkpoint& ckpt_;
  backend::Ops& ops_;
  ModelWeights& out_;
};

}  // namespace

Expected<ModelWeights> bind_weights(const io::Checkpoint& ckpt, backend::Ops& ops) {
  const io::ModelConfig& c = ckpt.config();
  ModelWeights w;
  Binder b(ckpt, ops, w);
  DI_ASSIGN_OR_RETURN(w.embed, b.linear("embed.weight"));
  if (w.embed.quantized()) return invalid_argument("embed.weight must be stored dense (BF16/F32)");
  if (ckpt.has("head.weight")) {
    DI_ASSIGN_OR_RETURN(w.lm_head, b.linear("head.weight"));
  } else {
    w.lm_head = w.embed;  // tie_word_embeddings
  }
  DI_ASSIGN_OR_RETURN(w.head, b.head(""));
  w.layers.reserve(c.layers.size());
  for (size_t i = 0; i < c.layers.size(); ++i) {
    DI_ASSIGN_OR_RETURN(auto blk, b.block("layers." + std::to_string(i) + ".", c.layers[i]));
    w.layers.push_back(std::move(blk));
  }
  if (ckpt.mtp_available()) {
    for (size_t i = 0; i < c.mtp_layers.size(); ++i) {
      const std::string p = "mtp." + std::to_string(i) + ".";
      MtpWeights m;
      DI_ASSIGN_OR_RETURN(m.block, b.block(p, c.mtp_layers[i]));
      DI_ASSIGN_OR_RETURN(m.e_proj, b.linear(p + "e_proj.weight"));
      DI_ASSIGN_OR_RETURN(m.h_proj, b.linear(p + "h_proj.weight"));
      DI_ASSIGN_OR_RETURN(m.enorm, b.vector(p + "enorm.weight"));
      DI_ASSIGN_OR_RETURN(m.hnorm, b.vector(p + "hnorm.weight"));
      DI_ASSIGN_OR_RETURN(m.head, b.head(p));
      w.mtp.push_back(std::move(m));
    }
  }
  return w;
}

}  // namespace deepinfer::model::deepseek_v4
