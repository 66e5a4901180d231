// Binder (see binder.h): io::Weight -> backend::WeightRef, once, at load.
#include "model/layers/binder.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/numeric_types.h"

namespace deepinfer::model {

using backend::WeightRef;

namespace {

// The weight as a WeightRef over the mapped bytes, in whatever format the checkpoint stores it.
// Stored bytes of a bound weight: its data and, when quantized, its scales.
int64_t stored_bytes(const io::Weight& w) {
  return w.data.nbytes() + (w.scale ? w.scale->nbytes() : 0);
}

Expected<WeightRef> view_of(const io::Weight& w) {
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
  return r;
}

}  // namespace

TensorView Binder::generate(const TensorView& layout, const RandomFill& fill, bool on_host) {
  DI_CHECK(fill.elem_bytes == dtype_size(layout.dtype));
  const int64_t n = layout.numel();
  if (on_host) {
    store_.host_bytes.emplace_back(static_cast<size_t>(layout.nbytes()));
    void* p = store_.host_bytes.back().data();
    fill_random_host(p, n, fill);
    return TensorView::make(layout.dtype, layout.shape, p);
  }
  backend::Buffer b(ops_, static_cast<size_t>(layout.nbytes()));
  ops_.fill_random(b.data(), n, fill);
  TensorView v = TensorView::make(layout.dtype, layout.shape, b.data(), ops_.device_kind());
  store_.placed.push_back(std::move(b));
  return v;
}

io::Weight Binder::materialized(io::Weight w, bool on_host) {
  if (!w.generated()) return w;
  w.data = generate(w.data, *w.data_fill, on_host);
  if (w.scale) w.scale = generate(*w.scale, *w.scale_fill, on_host);
  return w;
}

Expected<WeightRef> Binder::resident(const io::Weight& w) {
  ++store_.stats.tensors;
  store_.stats.bytes += stored_bytes(w);
  if (w.generated()) return view_of(materialized(w, /*on_host=*/false));
  DI_ASSIGN_OR_RETURN(const WeightRef r, view_of(w));
  return place(r);
}

WeightRef Binder::place(const WeightRef& w) {
  return backend::place_weight(ops_, w, store_.placed);
}
TensorView Binder::place(const TensorView& t) {
  return backend::place_tensor(ops_, t, store_.placed);
}

Expected<WeightRef> Binder::linear(const std::string& name) {
  DI_ASSIGN_OR_RETURN(const io::Weight w, ckpt_.get(name));
  return resident(w);
}

Expected<WeightRef> Binder::linear_rows(const std::string& name, Shard rows) {
  DI_ASSIGN_OR_RETURN(const io::Weight got, ckpt_.get(name));
  // A dummy weight is generated whole (its fill is defined over the whole tensor), then sliced.
  const io::Weight w = materialized(got, /*on_host=*/false);
  DI_ASSIGN_OR_RETURN(const WeightRef full, view_of(w));
  if (rows.begin < 0 || rows.end() > full.n) {
    return invalid_argument("tensor '" + w.stored_name + "': rows [" + std::to_string(rows.begin) +
                            ", " + std::to_string(rows.end()) + ") of " + std::to_string(full.n));
  }
  const int64_t bn = full.quantized() ? full.block_n : 1;
  WeightRef r;
  if (rows.begin % bn == 0 || rows.begin % bn + rows.count <= bn) {
    r = full.slice_rows(rows.begin, rows.count);
  } else {
    // FP8 rows that straddle scale blocks: copy them, with one scale row per weight row.
    const int64_t wrow = full.weight.shape[1] * dtype_size(full.weight.dtype);
    const int64_t scols = full.scale.shape[1], sbytes = dtype_size(full.scale.dtype);
    std::vector<uint8_t>& data =
        store_.host_bytes.emplace_back(static_cast<size_t>(rows.count * wrow));
    std::vector<uint8_t>& scale =
        store_.host_bytes.emplace_back(static_cast<size_t>(rows.count * scols * sbytes));
    for (int64_t i = 0; i < rows.count; ++i) {
      const int64_t src = rows.begin + i;
      std::memcpy(data.data() + i * wrow, static_cast<const char*>(full.weight.data) + src * wrow,
                  static_cast<size_t>(wrow));
      std::memcpy(scale.data() + i * scols * sbytes,
                  static_cast<const char*>(full.scale.data) + (src / bn) * scols * sbytes,
                  static_cast<size_t>(scols * sbytes));
    }
    DI_CHECK(full.format == backend::WeightFormat::kFp8);
    DI_ASSIGN_OR_RETURN(
        r, WeightRef::fp8(
               TensorView::make(full.weight.dtype, {rows.count, full.weight.shape[1]}, data.data()),
               TensorView::make(full.scale.dtype, {rows.count, scols}, scale.data()), 1,
               full.block_k));
  }
  const int64_t bytes = r.weight.nbytes() + (r.quantized() ? r.scale.nbytes() : 0);
  ++store_.stats.tensors;
  store_.stats.bytes += bytes;
  ++store_.stats.split_tensors;
  store_.stats.split_bytes += bytes;
  return place(r);
}

Expected<WeightRef> Binder::host_table(const std::string& name) {
  DI_ASSIGN_OR_RETURN(const io::Weight w, ckpt_.get(name));
  ++store_.stats.tensors;
  store_.stats.bytes += stored_bytes(w);
  return view_of(materialized(w, /*on_host=*/true));
}

Expected<WeightRef> Binder::vector(const std::string& name) {
  DI_ASSIGN_OR_RETURN(io::Weight w, ckpt_.get(name));
  w.data = TensorView::make(w.data.dtype, {1, w.data.numel()}, w.data.data);
  return resident(w);
}

Expected<const float*> Binder::floats(const std::string& name) {
  DI_ASSIGN_OR_RETURN(const io::Weight w, ckpt_.get(name));
  const TensorView& t = w.data;
  if (t.dtype == DType::kF32 && w.generated())
    return materialized(w, /*on_host=*/false).data.ptr<float>();
  if (t.dtype == DType::kF32)
    return backend::place_floats(ops_, t.ptr<float>(), t.numel(), store_.placed);
  DI_ASSIGN_OR_RETURN(std::vector<float> v, host_floats(name));
  return place_floats(std::move(v));
}

const float* Binder::place_floats(std::vector<float> values) {
  store_.owned.push_back(std::move(values));
  const std::vector<float>& v = store_.owned.back();
  return backend::place_floats(ops_, v.data(), static_cast<int64_t>(v.size()), store_.placed);
}

Expected<std::vector<float>> Binder::host_floats(const std::string& name) {
  DI_ASSIGN_OR_RETURN(const io::Weight got, ckpt_.get(name));
  const io::Weight w = materialized(got, /*on_host=*/true);  // small: a norm's weights
  const TensorView& t = w.data;
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::kBF16:
        v[i] = bf16_to_float(t.ptr<uint16_t>()[i]);
        break;
      case DType::kF16:
        v[i] = fp16_to_float(t.ptr<uint16_t>()[i]);
        break;
      case DType::kF32:
        v[i] = t.ptr<float>()[i];
        break;
      default:
        return invalid_argument("tensor '" + w.stored_name + "': expected a float dtype, got " +
                                std::string(dtype_name(t.dtype)));
    }
  }
  return v;
}

Status Binder::embedding_and_head(backend::WeightRef* embed, backend::WeightRef* lm_head,
                                  const TensorSelection& tensor) {
  DI_ASSIGN_OR_RETURN(*embed, linear("embed.weight"));
  if (embed->quantized()) return invalid_argument("embed.weight must be stored dense (BF16/F32)");
  const Shard rows = shard_of(embed->n, tensor.rank, tensor.size);
  if (ckpt_.has("head.weight")) {
    if (tensor.split) {
      DI_ASSIGN_OR_RETURN(*lm_head, linear_rows("head.weight", rows));
    } else {
      DI_ASSIGN_OR_RETURN(*lm_head, linear("head.weight"));
    }
  } else {
    *lm_head = *embed;                                                       // tie_word_embeddings
    if (tensor.split) *lm_head = embed->slice_rows(rows.begin, rows.count);  // dense: any rows
  }
  return {};
}

Expected<HcWeights> Binder::hc(const std::string& prefix, int64_t rows, int64_t cols) {
  HcWeights h;
  DI_ASSIGN_OR_RETURN(const float* fn, floats(prefix + "_fn"));
  h.fn = backend::CMat(fn, rows, cols);
  DI_ASSIGN_OR_RETURN(h.base, floats(prefix + "_base"));
  DI_ASSIGN_OR_RETURN(h.scale, floats(prefix + "_scale"));
  return h;
}

Expected<CompressorWeights> Binder::compressor(const std::string& prefix, int ratio, int d_c,
                                               bool overlap, bool has_ape) {
  CompressorWeights c;
  c.ratio = ratio;
  c.d_c = d_c;
  c.overlap = overlap;
  DI_ASSIGN_OR_RETURN(c.wkv, linear(prefix + "wkv.weight"));
  if (ratio > 1) {
    DI_ASSIGN_OR_RETURN(c.wgate, linear(prefix + "wgate.weight"));
  }
  if (has_ape) {
    DI_ASSIGN_OR_RETURN(c.ape, floats(prefix + "ape"));
  }
  DI_ASSIGN_OR_RETURN(c.norm, vector(prefix + "norm.weight"));
  return c;
}

Expected<backend::ExpertWeights> Binder::expert(const std::string& prefix) {
  backend::ExpertWeights e;
  DI_ASSIGN_OR_RETURN(e.w1, linear(prefix + "w1.weight"));
  DI_ASSIGN_OR_RETURN(e.w2, linear(prefix + "w2.weight"));
  DI_ASSIGN_OR_RETURN(e.w3, linear(prefix + "w3.weight"));
  return e;
}

Expected<WeightStats> Binder::expert_footprint(const std::string& prefix) const {
  WeightStats f;
  for (const char* name : {"w1.weight", "w2.weight", "w3.weight"}) {
    DI_ASSIGN_OR_RETURN(const io::Weight w, ckpt_.get(prefix + name));
    ++f.tensors;
    f.bytes += stored_bytes(w);
  }
  return f;
}

Expected<BlockWeights> Binder::block_common(const std::string& p, const io::LayerSpec& spec,
                                            int n_experts, int top_k,
                                            const ExpertSelection& selection,
                                            const TensorSelection& tensor) {
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
  // Tensor parallelism splits by whole output groups (and the heads they read), hidden
  // channels and the shared expert's intermediate rows (tensor_parallel.h).
  TensorSplit split;
  if (tensor.split) {
    split.split = true;
    split.groups = shard_of(c.o_groups, tensor.rank, tensor.size);
    split.hidden = shard_of(c.hidden_size, tensor.rank, tensor.size);
    if (c.n_shared_experts > 0) {  // the shared expert's width, as stored
      DI_ASSIGN_OR_RETURN(const io::Weight w1, ckpt_.get(p + "ffn.shared_experts.w1.weight"));
      split.inter = shard_of(w1.logical_shape.at(0), tensor.rank, tensor.size);
    }
  }
  const int64_t heads_per_group = c.num_heads / c.o_groups;
  const Shard heads = split.split ? Shard{split.groups.begin * heads_per_group,
                                          split.groups.count * heads_per_group}
                                  : Shard{0, c.num_heads};
  a.tp = split;
  a.heads = heads.count;
  DI_ASSIGN_OR_RETURN(a.wq_a, linear(ap + "wq_a.weight"));
  DI_ASSIGN_OR_RETURN(a.q_norm, vector(ap + "q_norm.weight"));
  if (split.split) {
    DI_ASSIGN_OR_RETURN(a.wq_b, linear_rows(ap + "wq_b.weight",
                                            {heads.begin * c.head_dim, heads.count * c.head_dim}));
  } else {
    DI_ASSIGN_OR_RETURN(a.wq_b, linear(ap + "wq_b.weight"));
  }
  DI_ASSIGN_OR_RETURN(a.wkv, linear(ap + "wkv.weight"));
  DI_ASSIGN_OR_RETURN(a.kv_norm, vector(ap + "kv_norm.weight"));
  const Shard groups = split.split ? split.groups : Shard{0, c.o_groups};
  if (split.split) {
    DI_ASSIGN_OR_RETURN(a.wo_a, linear_rows(ap + "wo_a.weight", {groups.begin * c.o_lora_rank,
                                                                 groups.count * c.o_lora_rank}));
    DI_ASSIGN_OR_RETURN(a.wo_b, linear_rows(ap + "wo_b.weight", split.hidden));
  } else {
    DI_ASSIGN_OR_RETURN(a.wo_a, linear(ap + "wo_a.weight"));
    DI_ASSIGN_OR_RETURN(a.wo_b, linear(ap + "wo_b.weight"));
  }
  // Each output group is a row slice of wo_a: it must start on a scale block or lie inside one
  // (o_lora_rank a multiple of the block, or a divisor of it).
  if (a.wo_a.quantized() && c.o_lora_rank % a.wo_a.block_n != 0 &&
      a.wo_a.block_n % c.o_lora_rank != 0) {
    return unimplemented(
        "tensor '" + ap + "wo_a.weight': o_lora_rank " + std::to_string(c.o_lora_rank) +
        " neither a multiple nor a divisor of its scale block " + std::to_string(a.wo_a.block_n) +
        " (a group would straddle two scale blocks)");
  }
  DI_ASSIGN_OR_RETURN(a.sink, floats(ap + "attn_sink"));
  if (a.sink != nullptr) a.sink += heads.begin;

  MoeWeights& m = b.moe;
  const std::string fp = p + "ffn.";
  m.kind = spec.moe;
  m.top_k = top_k;
  DI_ASSIGN_OR_RETURN(m.gate, linear(fp + "gate.weight"));
  if (spec.moe == io::MoeKind::kHash) {
    DI_ASSIGN_OR_RETURN(const io::Weight t, ckpt_.get(fp + "gate.tid2eid"));
    m.tid2eid = t.generated() ? materialized(t, /*on_host=*/false).data : place(t.data);
    m.top_k = static_cast<int>(m.tid2eid.dim(1));
  } else if (ckpt_.has(fp + "gate.bias")) {
    DI_ASSIGN_OR_RETURN(m.bias, floats(fp + "gate.bias"));
  }
  std::vector<int32_t> ids = selection.held;
  if (selection.ep_layer < 0) {
    ids.resize(static_cast<size_t>(n_experts));
    for (int e = 0; e < n_experts; ++e) ids[static_cast<size_t>(e)] = e;
  } else {
    m.ep_layer = selection.ep_layer;
    m.local_experts = ids;
  }
  // Tensor parallelism without expert parallelism splits every routed expert like the shared
  // one (vLLM's MoE under TP): w1/w3 by intermediate rows, w2 by hidden channels (moe_tp.h).
  if (split.split && selection.ep_layer < 0 && !ids.empty()) {
    DI_ASSIGN_OR_RETURN(const io::Weight w1, ckpt_.get(fp + "experts." + std::to_string(ids.front()) + ".w1.weight"));
    split.routed = true;
    split.routed_inter_rows = w1.logical_shape.at(0);
    split.routed_inter = shard_of(split.routed_inter_rows, tensor.rank, tensor.size);
    m.tp = split;
  }
  m.experts.reserve(ids.size());
  for (int32_t e : ids) {
    const int64_t before = store_.stats.bytes;
    const std::string ep = fp + "experts." + std::to_string(e) + ".";
    backend::ExpertWeights ew;
    if (split.routed) {
      DI_ASSIGN_OR_RETURN(ew.w1, linear_rows(ep + "w1.weight", split.routed_inter));
      DI_ASSIGN_OR_RETURN(ew.w3, linear_rows(ep + "w3.weight", split.routed_inter));
      DI_ASSIGN_OR_RETURN(ew.w2, linear_rows(ep + "w2.weight", split.hidden));
    } else {
      DI_ASSIGN_OR_RETURN(ew, expert(ep));
    }
    m.experts.push_back(ew);
    ++store_.stats.routed_experts;
    store_.stats.routed_expert_bytes += store_.stats.bytes - before;
  }
  if (c.n_shared_experts > 0 && split.split) {
    const std::string sp = fp + "shared_experts.";
    backend::ExpertWeights e;
    DI_ASSIGN_OR_RETURN(e.w1, linear_rows(sp + "w1.weight", split.inter));
    DI_ASSIGN_OR_RETURN(e.w3, linear_rows(sp + "w3.weight", split.inter));
    DI_ASSIGN_OR_RETURN(e.w2, linear_rows(sp + "w2.weight", split.hidden));
    m.shared = e;
    m.tp = split;
  } else if (c.n_shared_experts > 0) {
    DI_ASSIGN_OR_RETURN(m.shared, expert(fp + "shared_experts."));
  }
  return b;
}

}  // namespace deepinfer::model
