// CudaOps' recorded replay: CUDA graphs of the units the model runs through run_recorded.
//
// Life of a key (cuda_ops.h):
//   run 1  eager, on the graph arena: the model's scratch and the arena reach their sizes;
//   run 2  captured (cudaStreamCaptureModeRelaxed, so an allocation elsewhere cannot fail the
//          capture) with the graph arena frozen, instantiated, launched;
//   run 3+ cudaGraphLaunch only: the host code of the unit does not run at all.
// Anything a graph cannot replay faithfully refuses the capture instead of being recorded
// wrongly: a host array staged to the device (the graph would replay the capture's bytes), an
// integer output copied to the host, a synchronisation, an upload/download, an allocation, or
// the frozen arena running out. The unit then runs eagerly on the eager arena from then on,
// with one warning that names the reason. A graph arena merge (another unit's first run grew
// it) moves memory under older graphs: those are dropped and re-recorded.
//
// Frees from any thread while a capture runs are deferred (cudaFree may synchronise the
// device, which a capture in progress does not allow), then done when it ends.
#include <cstdio>
#include <string>

#include "backend/cuda/cuda_ops.h"
#include "base/check.h"

namespace deepinfer::backend::cuda {

bool CudaOps::capturing() const {
  return any_capture_.load() && capture_thread_.load() == std::this_thread::get_id();
}

bool CudaOps::refuse_in_capture(const char* why) {
  if (!capturing()) return false;
  if (refusal_ == nullptr) refusal_ = why;
  return true;
}

void CudaOps::drop_recordings() {
  if (!recordings_.empty()) ++record_stats_.drops;
  for (auto& [key, r] : recordings_) {
    if (r.exec != nullptr) cudaGraphExecDestroy(r.exec);
  }
  recordings_.clear();
}

void CudaOps::run_recorded(uint64_t key, const std::function<void()>& body) {
  if (graph_max_rows_ <= 0 || !replay_ || capturing()) {  // eager, or nested in a capture
    body();
    return;
  }
  Recording& r = recordings_[key];
  if (r.refused) {
    ++record_stats_.eager;
    body();
    return;
  }
  if (r.exec != nullptr && r.arena_generation != graph_arena_.generation()) {
    cudaGraphExecDestroy(r.exec);  // its arena memory was merged away: record it again
    r.exec = nullptr;
    r.eager_runs = 0;
  }
  if (r.exec != nullptr) {
    ++record_stats_.replayed;
    DI_CUDA_CHECK(cudaGraphLaunch(r.exec, stream_));
    return;
  }
  active_arena_ = &graph_arena_;
  ++record_stats_.setups;  // a first run or a capture, not a replay
  if (r.eager_runs == 0) {
    ++r.eager_runs;
    ++record_stats_.eager;
    try {
      body();
    } catch (...) {
      active_arena_ = &arena_;
      throw;
    }
    active_arena_ = &arena_;
    return;
  }

  // Capture. reset() merges the arena's chunks first, so the graph sees one settled chunk.
  graph_arena_.reset();
  graph_arena_.freeze(true);
  refusal_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(deferred_mu_);
    capture_thread_.store(std::this_thread::get_id());
    any_capture_.store(true);
  }
  DI_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  cudaGraph_t graph = nullptr;
  auto end_capture = [&] {
    const cudaError_t e = cudaStreamEndCapture(stream_, &graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (refusal_ == nullptr) refusal_ = "the capture failed";
    }
    {
      std::lock_guard<std::mutex> lock(deferred_mu_);
      any_capture_.store(false);
      capture_thread_.store({});
    }
    graph_arena_.freeze(false);
    active_arena_ = &arena_;
    free_deferred();
  };
  try {
    body();
  } catch (...) {
    end_capture();
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  if (graph_arena_.overflowed() && refusal_ == nullptr) refusal_ = "its scratch outgrew the arena";
  end_capture();
  cudaGraphExec_t exec = nullptr;
  if (refusal_ == nullptr && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    cudaGetLastError();
    refusal_ = "cudaGraphInstantiate failed";
    exec = nullptr;
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (refusal_ != nullptr) {
    // Nothing of the capture ran: run the unit now, eagerly, and from now on.
    r.refused = true;
    ++record_stats_.refused;
    record_stats_.last_refusal = refusal_;
    if (record_stats_.refused == 1) {
      std::fprintf(stderr,
                   "deepinfer: a recorded unit runs without a CUDA graph: it contains %s "
                   "(more such units are counted, not reported)\n",
                   refusal_);
    }
    ++record_stats_.eager;
    body();
    return;
  }
  r.exec = exec;
  r.arena_generation = graph_arena_.generation();
  ++record_stats_.captured;
  DI_CUDA_CHECK(cudaGraphLaunch(r.exec, stream_));
}

}  // namespace deepinfer::backend::cuda
