// RecordedSteps: the CUDA-graph policy of a model's steps, kept apart from the layer
// composition. A step of M <= Ops::record_max_rows() rows runs padded to a row bucket, and the
// dense parts between two attention cores run as Ops::run_recorded units, keyed per model,
// unit and bucket, which a recording backend replays as CUDA graphs (vLLM's piecewise graphs:
// the attention cores, whose shapes follow the caches, stay eager between them).
//
// A recorded unit replays the buffer addresses it was captured with, so the family hands its
// recorded buffers' fingerprint after every recorded step; when a buffer moved (a bigger
// bucket grew it) every recording is dropped and made again two steps later. Recordings go with
// the model: the destructor drops them, so a later model on the same ops never replays freed
// weights (keys come from a per-process model id, not an address a later model may reuse).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "backend/ops.h"

namespace deepinfer::model {

class RecordedSteps {
 public:
  using Fingerprint = std::vector<std::pair<const void*, size_t>>;

  explicit RecordedSteps(backend::Ops& ops);
  ~RecordedSteps();
  RecordedSteps(const RecordedSteps&) = delete;
  RecordedSteps& operator=(const RecordedSteps&) = delete;

  // The rows a step of M rows runs with when it is recorded, or 0 when it runs eagerly (the
  // backend does not record, or M is 0 or above its limit). Buckets 1, 2, 4, 8, then multiples
  // of 8 up to 64, of 32 up to 512, of 64 beyond: a few graph sets serve every batch size.
  int64_t bucket(int64_t M) const { return bucket(M, ops_->record_max_rows()); }
  static int64_t bucket(int64_t M, int64_t max_rows);
  // Every bucket of a step of 1..rows rows (rows <= max_rows), ascending: the graph sets a
  // workload of steps up to that size can use (the engine records them at start-up).
  static std::vector<int64_t> buckets(int64_t rows, int64_t max_rows);
  // The rows an eager op over n rows runs with on a recording backend: n, or its bucket when
  // n is at most max_rows (the extra rows' values are whatever their buffer holds; the op is
  // row-wise, so they change no real row).
  static int64_t padded_count(int64_t n, int64_t max_rows) {
    return n > 0 && n <= max_rows ? bucket(n, max_rows) : n;
  }
  // `rows` (row ids of a step) padded to `to` entries with copies of its last id, in `buf`: the
  // rows an eager op that is not recorded (the LM head) runs with so that its row count is a
  // bucket. A backend's per-shape setups (cuBLAS's, at the first call of a row count) then
  // happen at start-up, which runs every bucket, not in the middle of serving.
  static std::span<const int32_t> padded(std::span<const int32_t> rows, int64_t to,
                                         std::vector<int32_t>& buf);

  // Runs `body` as unit `unit` of a step padded to Mb rows.
  void run(size_t unit, int64_t Mb, const std::function<void()>& body);
  // The model's form its units run in now (e.g. V4.1 with and without the drafter's context):
  // part of every key, so that the forms' recordings coexist and a switch drops none.
  void set_variant(uint32_t variant) { variant_ = variant; }

  // After a recorded step: the recorded buffers' (data, bytes) in a fixed order. A change means
  // they moved, so the units recorded before point to freed memory: all recordings go.
  void buffers_after_step(Fingerprint print);

 private:
  backend::Ops* ops_;
  uint64_t id_;  // unique per process
  uint32_t variant_ = 0;
  Fingerprint print_;
};

}  // namespace deepinfer::model
