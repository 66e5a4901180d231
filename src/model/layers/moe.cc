// MoE FFN (see moe.h).
#include "model/layers/moe.h"

#include <algorithm>

#include "base/check.h"
#include "model/layers/moe_tp.h"

namespace deepinfer::model {

namespace {

backend::MoeOpts expert_opts(const io::ModelConfig& cfg, const Numerics& num) {
  backend::MoeOpts opts;
  opts.swiglu_limit = static_cast<float>(cfg.swiglu_limit);
  opts.weight_before_w2 = num.official;
  opts.act_quant = num.official;
  opts.act_block = num.act_block;
  opts.bf16_rounding = num.official;
  opts.accumulate = false;
  return opts;
}

}  // namespace

void moe_forward(backend::Ops& ops, const io::ModelConfig& cfg, const Numerics& num,
                 const MoeWeights& w, backend::CMat v, const int32_t* token_ids, backend::Mat out,
                 MoeScratch& s, MoeExchange* ep, TensorParallelGather* tp) {
  const int64_t M = v.rows;
  const bool exchange = ep != nullptr && w.ep_layer >= 0;
  if (exchange && M == 0) {  // an empty step: no routing, only the peers' rows to serve
    ep->routed(ops, static_cast<size_t>(w.ep_layer), v, nullptr, {}, w.top_k, w.experts,
               expert_opts(cfg, num), out);
    return;
  }
  const int k = w.top_k;
  const float route_scale = static_cast<float>(cfg.routed_scaling_factor);
  int32_t* ids =
      static_cast<int32_t*>(s.ids.fit_bytes(static_cast<size_t>(M * k) * sizeof(int32_t)));
  backend::Mat g(fit(s.weights, M * k), M, k);
  if (w.kind == io::MoeKind::kHash) {
    ops.moe_route_hash(v, token_ids, w.tid2eid, w.gate, route_scale, ids, g);
  } else {
    backend::RouteOpts ro;
    if (cfg.family == io::ModelFamily::kDeepseekV41) {  // spec §6.7 item 5
      ro.temperature = static_cast<float>(cfg.gate_temp);
      ro.normalize = k > 1;
      ro.norm_floor = 1e-20f;
    }
    ops.moe_route_score(v, w.gate, w.bias, k, route_scale, ro, ids, g);
  }

  backend::MoeOpts opts = expert_opts(cfg, num);
  // The output's act (official semantics) goes into the store of the op that writes out last,
  // where that is one local moe_experts call: the shared expert's, else the routed one's
  // (one launch fewer per layer on a device backend); otherwise it is a pass of its own.
  const bool shared_last = w.shared && !w.tp.split;
  const bool act_in_op = num.official && (shared_last || (!w.shared && !exchange && !w.tp.routed));
  if (exchange) {  // the router runs on host memory here (ExpertParallel::validate)
    // This rank's rows go through the exchange: all M of them, or with tensor parallelism (every
    // rank holds the same M rows) its share shard(M), the shares' routed sums then gathered by
    // rows. Each token is counted once, by the rank that sends it.
    const Shard mine = tp != nullptr ? tp->shard(M) : Shard{0, M};
    const int32_t* my_ids = ids + mine.begin * k;
    ep->count(static_cast<size_t>(w.ep_layer), my_ids, mine.count * k);
    ep->routed(ops, static_cast<size_t>(w.ep_layer), v.rows_slice(mine.begin, mine.count), my_ids,
               backend::CMat(g).rows_slice(mine.begin, mine.count), k, w.experts, opts,
               out.rows_slice(mine.begin, mine.count));
    if (tp != nullptr) tp->gather_rows(out, "routed experts' rows");
  } else if (w.tp.routed) {  // this rank's hidden channels of the routed sum (moe_tp.h)
    DI_CHECK(tp != nullptr);
    routed_experts_split(ops, opts, w, v, ids, g, out, s, *tp);
    if (!w.shared) tp->gather_cols(out.cols_slice(w.tp.hidden.begin, w.tp.hidden.count), out.cols,
                                   1, out, "routed experts' output");
  } else {
    backend::MoeOpts routed = opts;
    routed.round_out = act_in_op && !w.shared;
    ops.moe_experts(v, ids, g, k, w.experts, routed, out);
  }

  if (w.shared && w.tp.split) {
    DI_CHECK(tp != nullptr);
    shared_expert_split(ops, opts, *w.shared, w.tp, v, out, s, *tp);
  } else if (w.shared) {
    const auto* sid =
        static_cast<const int32_t*>(s.shared_ids.fit_bytes(static_cast<size_t>(M) * 4));
    if (s.shared_ones < M) {  // the shared expert's gate weight is 1 for every row
      s.shared_ones = std::max<int64_t>(M, 2 * s.shared_ones);
      const std::vector<float> ones(static_cast<size_t>(s.shared_ones), 1.0f);
      ops.upload(fit(s.shared_weights, s.shared_ones), ones.data(), ones.size() * sizeof(float));
    }
    backend::Mat sg(s.shared_weights.as<float>(), M, 1);
    opts.accumulate = true;
    opts.single_expert = true;
    opts.round_out = act_in_op;
    ops.moe_experts(v, sid, sg, 1, {&*w.shared, 1}, opts, out);
  }
  if (!act_in_op) num.act(ops, out);
}

void moe_serve_only(backend::Ops& ops, const io::ModelConfig& cfg, const Numerics& num,
                    const MoeWeights& w, MoeScratch& s, MoeExchange& ep) {
  const int64_t D = cfg.hidden_size;
  moe_forward(ops, cfg, num, w, backend::CMat(nullptr, 0, D), nullptr, backend::Mat(nullptr, 0, D),
              s, &ep);
}

}  // namespace deepinfer::model
