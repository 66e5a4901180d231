// Attention of one layer, the pieces both families use (spec §2.3-§2.5, §6.2): the dense
// projections, the selection of compressed rows by the lightning indexer, and the attention over
// each query's key set; plus V4's core (SWA, CSA with its own indexer, HCA over every visible
// compressed row). V4.1's core (deepseek_v41/attention.h) composes the same selection and
// attention over the compressed rows of its KV source.
//
// Shape of one call: the dense projections (q path, shared K=V latent, compressor and indexer
// projections, output projection) run over all M rows of the step; the selection (indexer
// scores + top-k) runs over all rows at once, each row reading its own sequence's index keys;
// each query's key set (window rows oldest→newest, then compressed rows) is a row of cache-row
// addresses (the selected part written on the backend from the top-k), so a single
// sparse_attention_rows call serves every sequence and reads the cache in place. The cache is
// updated during the call (compressor state and emitted rows first, window rows after the
// attention); the sequence's length is advanced by the caller after the last layer.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "backend/ops.h"
#include "io/model_config.h"
#include "model/layers/compressor.h"
#include "model/layers/numerics.h"
#include "model/layers/weights.h"
#include "model/step.h"
#include "model/tensor_parallel.h"

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
        ape(ops),
        z_all(ops),
        out_part(ops) {}
  backend::Buffer qr, q, kv, o, z;
  backend::Buffer comp_kv, comp_gate, idx_kv, idx_gate;  // compressor projections
  backend::Buffer iq, iw;                                // indexer query and head weights
  backend::Buffer ape;                                   // gathered ape rows
  // Tensor parallelism: every rank's groups' outputs, and this rank's hidden channels of wo_b.
  backend::Buffer z_all, out_part;
  // (data, bytes) of every buffer, in a fixed order: equal lists = the same memory.
  void fingerprint(std::vector<std::pair<const void*, size_t>>& out) const;
};

// Scratch of the core (selection, key addresses, cache writes, attention). Host arrays are
// what the host builds (a device backend stages them); the selection and the key-address table
// are backend memory, because the backend writes them.
struct AttentionScratch {
  explicit AttentionScratch(backend::Ops& ops)
      : scores(ops), sel(ops), cand(ops), key_table(ops), comp(ops) {}
  backend::Buffer scores;  // indexer scores
  backend::Buffer sel;     // the latest selection [M, sel_k] (int32): V4.1 Reuse layers read it
  int64_t sel_k = 0;
  backend::Buffer cand;       // V4.1 candidate blocks [M, candidate_topk_blocks] (int32)
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
  // Tensor parallelism (model/tensor_parallel.h): the gathers of layers bound split
  // (AttentionWeights::tp, MoeWeights::tp); null without it.
  TensorParallelGather* tp = nullptr;
  // Context parallelism (model/context_parallel.h): this rank's index of each step row among
  // its query rows (-1: a peer's row), and how many it has. The caches still take every row
  // (the step's kv, compressor and indexer rows are the gathered, whole-step ones); selection
  // and attention run for this rank's rows only (iq, iw, q, o hold just those). Null: every
  // row is a query row of this rank.
  const int32_t* query_of = nullptr;
  int64_t query_count = 0;
  int64_t queries(int64_t step_rows) const { return query_of ? query_count : step_rows; }
  int64_t query(int64_t row) const { return query_of ? query_of[row] : row; }
};

// The cache of a sequence a core piece reads: the layer's own (its window), or the source layer
// whose compressed rows and index keys it shares (V4.1).
using LayerOf = std::function<LayerCache&(const SequenceSpan&)>;

// What a selection scores and keeps (spec §2.5, §6.7 items 3-4).
struct SelectOpts {
  int ratio = 0;     // query t sees rows w < (t + 1) / ratio
  int64_t topk = 0;  // index_topk
  enum class Candidates : uint8_t { kNone, kMake, kUse } candidates = Candidates::kNone;
  int64_t block_size = 0, n_blocks = 0;  // candidate_block_size, candidate_topk_blocks
};

// Scores the M query rows of iq / iw against their sequences' index keys (keys_of(sq).idx.rows)
// and keeps each row's top-k in s.sel [M, s.sel_k] (backend memory, -1 past a row's picks):
// the candidate source also writes its candidate blocks to s.cand, and index sources after it
// score inside them.
void select_compressed(const LayerEnv& env, backend::CMat iq, backend::CMat iw,
                       const StepInputs& in, const LayerOf& keys_of, const SelectOpts& opts,
                       AttentionScratch& s);

// Each query's keys: the window (window_of(sq)'s ring rows, then this step's kv rows), then
// compressed rows of comp_of(sq).comp.rows, either every visible one (V4 HCA: all_visible, at
// `ratio`) or the picks of the latest selection (s.sel, s.sel_k columns); then one
// sparse_attention_rows into r.o, and the window rings take this step's rows. comp_of may be
// empty (SWA).
void attend(const LayerEnv& env, const AttentionWeights& w, const AttentionRows& r,
            const StepInputs& in, const LayerOf& window_of, const LayerOf& comp_of, int ratio,
            bool all_visible, AttentionScratch& s);

// The three parts of a layer's attention. project and output are dense over the M rows (a
// recorded step runs them inside its units, over a padded row count); core reads and writes
// the caches of the step's sequences and runs eagerly.
//
// Views of b for M rows (the same pointers for the same M and layer shape, so a recorded unit
// and the core agree on them without the unit's host code running).
AttentionRows attention_rows(const LayerEnv& env, const AttentionWeights& w, int64_t M,
                             AttentionBuffers& b);
// q path, shared K=V latent, compressor and indexer projections of the M rows of u (the parts
// w has: a V4.1 Reuse layer only the q path and K=V latent).
void attention_project(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                       backend::CMat u, const RowInputs& rows, AttentionBuffers& b,
                       const AttentionRows& r);
// V4: compressors, CSA selection, key addresses, sparse attention and window writes of the
// step's sequences: r.o [rows of `in`] = attention. r's views may have more rows than `in`
// (padding).
void attention_core(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                    bool mtp, size_t cache_index, const AttentionRows& r, const StepInputs& in,
                    AttentionScratch& s);
// out [M, D] = wo_b · grouped wo_a · inverse-RoPE(o). Split (w.tp): this rank's groups, their
// outputs gathered, this rank's hidden channels of wo_b, gathered (every element's sum on one
// rank: the single-rank bits).
void attention_output(const LayerEnv& env, const AttentionWeights& w, const io::LayerSpec& spec,
                      const int32_t* positions, const AttentionRows& r, backend::Mat out,
                      AttentionBuffers& b);

}  // namespace deepinfer::model
