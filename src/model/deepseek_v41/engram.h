// The Engram memory of DeepSeek-V4.1 (spec §6.1, §6.7 items 1-2), the host half: which table
// rows each token of a step reads, and those rows, dequantized, ready for the backend.
//
// At load the compressed token map comes from the checkpoint's tokenizer.json (its vocabulary
// alone: TokenTexts decodes each id, whatever the tokenizer's model type) and must give the
// config's engram_compressed_vocab_size; the hash layout (primes, offsets, multipliers) comes
// from the config and must fit every table. Per step, a sequence's rows hash its last N-1
// compressed ids (SequenceCache::engram_history) and its new ones (engram_hash.h), so prefill,
// chunks and decode read the same rows. The tables stay in host memory; only the looked-up rows
// ([M, (N-1)·heads·head_dim] per Engram layer) travel to the backend, and the layer then runs
// wkv and the gate on them (deepseek_v41/model.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/buffer.h"
#include "backend/ops.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "io/model_config.h"
#include "model/deepseek_v41/engram_hash.h"
#include "model/deepseek_v41/weights.h"
#include "model/step.h"

namespace deepinfer::model::deepseek_v41 {

class EngramLookup {
 public:
  // Errors: no tokenizer.json in model_dir (Engram needs it), a compressed vocabulary that
  // differs from the config's, a table too small for its hash buckets.
  static Expected<EngramLookup> create(const io::ModelConfig& config, const std::string& model_dir);

  const EngramHashLayout& layout() const { return layout_; }
  int64_t columns() const { return layout_.columns(); }  // rows looked up per token and layer
  int32_t compressed_id(int32_t token) const { return layout_.compressed_id(token); }

  // Per step, before the first gather: the step's compressed ids. Waits for the backend (a
  // no-op between steps, which end with a download) so the staging of the last step is free.
  void begin_step(backend::Ops& ops, const StepInputs& in);

  // The step's rows of Engram layer `e`, gathered from its table and sent to backend memory:
  // out = [rows, columns · head_dim] FP32 (the table values, exact in BF16), rows >= M; rows
  // past M (a padded recorded step's) are zero. Host work (hashing, dequantizing) into pinned
  // staging, then Ops::upload_async: called just before the layer that reads it, the gather
  // overlaps the layers queued before it. Reads each sequence's history; appends nothing
  // (push_history does, after the step).
  void gather_layer(backend::Ops& ops, const StepInputs& in, const EngramWeights& e, int64_t rows,
                    backend::Buffer& out);

  // Host time spent in begin_step and gather_layer, and the bytes they sent, since load.
  struct Stats {
    double seconds = 0;
    int64_t bytes = 0;
    int64_t layer_gathers = 0;
  };
  const Stats& stats() const { return stats_; }

  // After a step: each sequence's look-back takes its new compressed ids.
  void push_history(const StepInputs& in) const;

 private:
  EngramHashLayout layout_;
  int64_t head_dim_ = 0;
  std::vector<int32_t> ids_;    // the step's compressed ids (scratch)
  std::vector<int64_t> rows_;   // [M, columns] of one layer (scratch)
  // Per Engram layer: its [rows, columns · head_dim] of the step, uploaded from here (each
  // layer its own, since the uploads of a step are all in flight together).
  std::vector<backend::StagingBuffer> staging_;
  // Threads for the row decode of big steps (kParallelRows looked-up rows or more), made on the
  // first such step; shared_ptr so the lookup stays movable.
  static constexpr int64_t kParallelRows = 4096;
  std::shared_ptr<ThreadPool> pool_;
  Stats stats_;
};

}  // namespace deepinfer::model::deepseek_v41
