// MoE FFN of one layer (spec §2.7): router (score: sqrtsoftplus + bias top-k; hash: tid2eid by
// token id), routed experts grouped by expert, shared expert, SwiGLU with clamp.
//
// The routed sum is formed first and the shared expert added to it, like the reference
// (index_add over experts in ascending id, then + shared), so the FP32 summation order and the
// final BF16 rounding match in official semantics.
//
// With expert parallelism (MoeExchange, moe_ep.h) the routed experts of a main-model layer run
// on the ranks holding them, with the same bits; routing, the shared expert and the activation
// rounding stay on the token's rank. With tensor parallelism the experts run split by
// intermediate rows and hidden channels (moe_tp.h), with the same bits.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "backend/buffer.h"
#include "backend/ops.h"
#include "io/model_config.h"
#include "model/layers/moe_ep.h"
#include "model/layers/numerics.h"
#include "model/layers/weights.h"
#include "model/tensor_parallel.h"

namespace deepinfer::model {

struct MoeScratch {
  explicit MoeScratch(backend::Ops& ops)
      : ids(ops),
        shared_ids(ops),
        weights(ops),
        shared_weights(ops),
        gate_part(ops),
        up_part(ops),
        act_all(ops),
        out_part(ops),
        rows_in(ops),
        pair_part(ops),
        pair_all(ops) {}
  // Routed ids stay in the backend's memory (router -> experts without a host round trip).
  // shared_ids: all zeros (never written: new backend memory is zero-filled).
  backend::Buffer ids, shared_ids;
  backend::Buffer weights, shared_weights;  // shared_weights: all ones, grown on demand
  int64_t shared_ones = 0;                  // rows of shared_weights set to 1
  // Tensor parallelism: the shared expert's w1/w3 outputs of this rank's intermediate rows, the
  // SwiGLU output of all of them, and this rank's hidden channels of w2 (moe_tp.h; the routed
  // experts' pass reuses up_part and out_part); the routed experts' gathered input rows of one
  // expert, their SwiGLU outputs per (token, expert) pair of this rank's intermediate rows and of
  // all of them.
  backend::Buffer gate_part, up_part, act_all, out_part, rows_in, pair_part, pair_all;
  void fingerprint(std::vector<std::pair<const void*, size_t>>& out) const {
    for (const backend::Buffer* b : {&ids, &shared_ids, &weights, &shared_weights}) {
      out.emplace_back(b->data(), b->bytes());
    }
  }
};

// out [M, D] = MoE(v). token_ids [M] feed hash routing (host or backend memory). ep: the
// model's expert exchange, or null; used for layers bound for it (MoeWeights::ep_layer >= 0),
// and then M may be 0 (the rank only serves its experts to the others). Throws
// parallel::CollectiveFailure when the exchange fails. tp: the gathers of tensor parallelism, for
// layers whose experts are bound split (MoeWeights::tp); throws parallel::CollectiveFailure.
// Both (tensor with expert parallelism: every rank has the same M rows): each rank sends only its
// share tp->shard(M) of the rows through the exchange, and the routed sums are gathered by rows.
void moe_forward(backend::Ops& ops, const io::ModelConfig& cfg, const Numerics& num,
                 const MoeWeights& w, backend::CMat v, const int32_t* token_ids, backend::Mat out,
                 MoeScratch& s, MoeExchange* ep = nullptr, TensorParallelGather* tp = nullptr);

// A layer's part of an empty step under expert parallelism: no rows of this rank's own, the
// peers' rows for its experts served (moe_forward with M = 0).
void moe_serve_only(backend::Ops& ops, const io::ModelConfig& cfg, const Numerics& num,
                    const MoeWeights& w, MoeScratch& s, MoeExchange& ep);

}  // namespace deepinfer::model
