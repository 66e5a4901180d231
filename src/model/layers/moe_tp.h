// The MoE FFN under tensor parallelism (model/tensor_parallel.h): every rank holds the same M
// rows and its shard of each expert, and every output element is computed whole on one rank, so
// the gathered result is the single rank's bits (the steps of Ops::moe_experts, as separate ops):
//   * routed experts (vLLM's default for MoE under TP, without --enable-expert-parallel): w1/w3
//     by intermediate rows (TensorSplit::routed_inter), the weighted SwiGLU outputs of every
//     (token, expert) pair gathered, then w2 by output rows (hidden channels) and each token's
//     pairs summed in ascending expert id on the rank that holds those channels;
//   * the shared expert likewise (TensorSplit::inter), added to the routed sum, then the output
//     gathered.
// Host memory only (TensorParallel::validate): ids and gate weights are read on the host.
#pragma once

#include "backend/ops.h"
#include "model/layers/weights.h"
#include "model/tensor_parallel.h"

namespace deepinfer::model {

struct MoeScratch;

// out's columns w.tp.hidden (= the routed sum of this rank's hidden channels; the other columns
// untouched) from the rows of v routed by ids / g [M, top_k]. w.experts hold this rank's shards
// (w.tp.routed). Throws parallel::CollectiveFailure when the gather fails.
void routed_experts_split(backend::Ops& ops, const backend::MoeOpts& opts, const MoeWeights& w,
                          backend::CMat v, const int32_t* ids, backend::CMat g, backend::Mat out,
                          MoeScratch& s, TensorParallelGather& tp);

// out += the shared expert of v on this rank's shards, then every column of out gathered. out's
// columns w.tp.hidden hold the routed sum on entry (the other columns may be stale: the gather
// overwrites them). Throws parallel::CollectiveFailure.
void shared_expert_split(backend::Ops& ops, const backend::MoeOpts& opts,
                         const backend::ExpertWeights& e, const TensorSplit& split,
                         backend::CMat v, backend::Mat out, MoeScratch& s,
                         TensorParallelGather& tp);

}  // namespace deepinfer::model
