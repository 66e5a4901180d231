// Attention of one V4 layer, all three kinds (spec §2.3-§2.5): SWA (window only), CSA (window +
// indexer-selected compressed rows) and HCA (window + every visible compressed row).
//
// Shape of one call: the dense projections (q path, shared K=V latent, compressor and indexer
// projections, output projection) run over all M rows of the step; the CSA selection (indexer
// scores + top-k) runs over all rows at once, each row reading its own sequence's index keys;
// each query's key set (window rows oldest→newest, then compressed rows) is a row of cache-row
// addresses (the CSA part written on the backend from the top-k), so a single
// sparse_attention_rows call serves every sequence and reads the cache in place. The cache is
// updated during the call (compressor state and emitted rows first, window rows after the
// attention); the sequence's length is advanced by the caller after the last layer.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "backend/ops.h"
#include "io/model_config.h"
#include "model/layers/compressor.h"
#include "model/layers/numerics.h"
#include "model/step.h"
#include "model/layers/weights.h"

namespace deepinfer::model {

// Integer inputs of a step's dense parts, per row: token ids, positions and, per compress
// ratio, the compressor's ape row (position mod ratio). Host arrays in an eager step; in a
// recorded one they are backend memory uploaded once per step, because a recorded unit
// (Ops::run_recorded) may be replayed without its host code: it must read this step's values
// from memory, not from host arrays it saw when it was recorded.
struct RowInputs {
  const int32_t* ids = nullptr;
  const int32_t* positions = nullptr;
  std::vector<std::pair<int, const int32_t*>> ape;  // (ratio, rows) for every ratio in use
  const int32_t* ape_rows(int ratio) const;
};

// The rows the dense parts of a layer's attention produce for the core (and o, which the core
// produces for the output projection), as views of AttentionBuffers for M rows.
struct AttentionRows {
  backend::Mat qr, q, kv, ckv, cg, ikv, ig, iq, iw, o;
};

// Buffers of the dense parts (backend memory): a recorded unit reads and writes only these, so
// they are kept apart from the core's scratch, whose sizes change with the caches.
struct AttentionBuffers {
  explicit AttentionBuffers(backend::Ops& ops)
      : qr(ops),
        q(ops),
        kv(ops),
        o(ops),
        z(ops),
        comp_kv(ops),
        comp_gate(ops),
        idx_kv(ops),
        idx_gate(ops),
        iq(ops),
        iw(ops),
        ape(ops) {}
  backend::Buffer qr, q, kv, o, z;
  backend::Buffer comp_kv, comp_gate, idx_kv, idx_gate;  // compressor projections
  backend::Buffer iq, iw;                                // indexer query and head weights
  backend::Buffer ape;                                   // gathered ape rows
  // (data, bytes) of every buffer, in a fixed order: equal lists = the same memory.
  void fingerprint(std::vector<std::pair<const void*, size_t>>& out) const;
};

// Scratch of the core (selection, key addresses, cache writes, attention). Host arrays are
// what the host builds (a device backend stages them); the selection and the key-address table
// are backend memory, because the backend writes them.
struct AttentionScratch {
  explicit AttentionScratch(backend::Ops& ops)
      : scores(ops), sel(ops), key_table(ops), comp(ops) {}
  backend::Buffer scores;     // indexer scores
  backend::Buffer sel;        // CSA top-k [M, K] (int32)
  backend::Buffer key_table;  // every query's key addresses [M, width]
  std::vector<int32_t> visible;
  std::vector<const float*> key_rows;        // the table as the host builds it
  std::vector<backend::PagedCMat> row_keys;  // each query row's index keys (its sequence's)
  std::vector<backend::PagedCMat> row_comp;  // ... and compressed rows (what sel indexes)
  std::vector<CompressorJob> comp_jobs, idx_jobs;
  std::vector<const float*> win_src;  // this step's window rows and their ring slots
  std::vector<float*> win_dst;
  CompressorScratch comp;
};

// Everything a layer reads besides its weights and its rows.
struct LayerEnv {
  backend::Ops& ops;
  const io::ModelConfig& config;
  const Numerics& num;
  const RopeTables& rope;
};

// The three parts of a layer's attention. project and output are dense over the M rows (a
// recorded step runs them inside its units, over a padded row count); core reads and writes
// the caches of the step's sequences and runs eagerly.
//
// Views of b for M rows (the same pointers for the same M and layer shape, so a recorded unit
// and the core agree on them without the unit's host code running).
AttentionRows attention_rows(const LayerEnv& env, const AttentionWeights& w, int64_t M,
                             AttentionBuffers& b);
// q path, shared K=V latent, compressor and indexer projections of the M rows of u.
void attention_project(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       backend::CMat u, const RowInputs& rows, AttentionBuffers& b,
                       const AttentionRows& r);
// Compressors, CSA selection, key addresses, sparse attention and window writes of the step's
// sequences: r.o [rows of `in`] = attention. r's views may have more rows than `in` (padding).
void attention_core(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                    bool mtp, size_t cache_index, const AttentionRows& r, const StepInputs& in,
                    AttentionScratch& s);
// out [M, D] = wo_b · grouped wo_a · inverse-RoPE(o).
void attention_output(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                      const int32_t* positions, const AttentionRows& r, backend::Mat out,
                      AttentionBuffers& b);

// All three, eagerly: out [M, D] = Attn(u) for the rows of `in`. `mtp` selects the caches' MTP
// layer list; `cache_index` the layer within it.
void attention_forward(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       bool mtp, size_t cache_index, backend::CMat u, const RowInputs& rows,
                       const StepInputs& in, backend::Mat out, AttentionBuffers& b,
                       AttentionScratch& s);

}  // namespace deepinfer::model
